# `make memcheck`: the proxy specs (spec/proxy_spec.lua and
# spec/proxy_*_spec.lua) under valgrind, against the normal build. Fails
# on any memory error and on definite leaks (possible/reachable ones are the
# interpreter's and luv's globals at exit).
# Slow (minutes); not part of `make test`. mk/memcheck.supp holds the
# suppressions, each explained there; it suppresses nothing of ours.
# --ignore-lua: .busted names lua5.4, and busted then re-runs itself in a
# child process that valgrind would not follow. ISOLATION_MEMCHECK=1 tells
# a spec that it runs under valgrind (some 20 times slower), should it need
# longer deadlines.
MEMCHECK_SPECS ?= $(wildcard spec/proxy_spec.lua spec/proxy_*_spec.lua)
VALGRIND       ?= valgrind
MEMCHECK_FLAGS  = --error-exitcode=1 --leak-check=full \
                  --errors-for-leak-kinds=definite \
                  --suppressions=mk/memcheck.supp --num-callers=30 \
                  --keep-debuginfo=yes

EXTRA_DEBS += valgrind

.PHONY: memcheck

memcheck: deps all
	@test -n "$(MEMCHECK_SPECS)" || { echo "memcheck: no spec/proxy_*_spec.lua"; exit 1; }
	ISOLATION_MEMCHECK=1 $(VALGRIND) $(MEMCHECK_FLAGS) $(BUSTED) --ignore-lua $(MEMCHECK_SPECS)
	@echo "memcheck: no memory errors, no definite leaks in $(words $(MEMCHECK_SPECS)) spec files"
