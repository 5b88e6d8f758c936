# `make memcheck`: the proxy specs (spec/proxy_*_spec.lua) under valgrind,
# against the normal build. Fails on any memory error and on definite leaks
# (possible/reachable ones are the interpreter's and luv's globals at exit).
# Slow (minutes); not part of `make test`. mk/memcheck.supp holds the
# suppressions, each explained there; it suppresses nothing of ours.
MEMCHECK_SPECS ?= $(wildcard spec/proxy_*_spec.lua)
VALGRIND       ?= valgrind
MEMCHECK_FLAGS  = --error-exitcode=1 --leak-check=full \
                  --errors-for-leak-kinds=definite \
                  --suppressions=mk/memcheck.supp --num-callers=30

EXTRA_DEBS += valgrind

.PHONY: memcheck

memcheck: deps all
	@test -n "$(MEMCHECK_SPECS)" || { echo "memcheck: no spec/proxy_*_spec.lua"; exit 1; }
	ISOLATION_MEMCHECK=1 $(VALGRIND) $(MEMCHECK_FLAGS) $(BUSTED) $(MEMCHECK_SPECS)
	@echo "memcheck: no memory errors, no definite leaks in $(words $(MEMCHECK_SPECS)) spec files"
