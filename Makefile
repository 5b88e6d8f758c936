# isolation - build, test, lint. `make test` is what CI runs; on a fresh
# Debian 12 machine (as root) it first installs the packages it needs.
#
#   make            build build/isolation.so (and what mk/*.mk adds); it
#                   installs nothing: a missing header names `make deps`
#   make deps       install the Debian packages (as root); test, spec, demo,
#                   lint and rockcheck run it first
#   make test       everything CI checks: specs, specs again under ASan+UBSan,
#                   luacheck, clang-format, a luarocks install into a temp tree
#   make lint       luacheck and clang-format --dry-run -Werror
#   make format     clang-format -i on the C sources

SHELL     := /bin/bash
LUA       ?= lua5.4
BUSTED    ?= $(LUA) /usr/bin/busted
CC        ?= cc
BUILD     ?= build
LUA_INC   ?= /usr/include/lua5.4
CFLAGS    ?= -O2 -g
# uv.h needs POSIX declarations that -std=c11 alone hides.
CSTD       = -std=c11 -D_GNU_SOURCE
WARN       = -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes -Wstrict-prototypes
# Hidden by default: the module exports luaopen_isolation alone (marked in
# src/isolation.c), so that none of its internal functions can collide with
# another library's in the process or be called from outside it.
VISIBILITY = -fvisibility=hidden
ALL_CFLAGS = $(CSTD) $(WARN) $(CFLAGS) -fPIC $(VISIBILITY) -I$(LUA_INC) -Isrc $(EXTRA_CFLAGS)
# Each object's header dependencies, as the compiler saw them (build/**/*.d):
# a header change rebuilds the objects that include it, and only those.
DEPFLAGS   = -MMD -MP
# Not linked against liblua: the interpreter provides it. libuv is linked
# because Lua loads luv with RTLD_LOCAL, so luv's copy is not visible to us.
LIBS       = -luv -lpthread -lssl -lcrypto

MODULE_SRC = $(wildcard src/*.c src/*/*.c)
MODULE_OBJ = $(MODULE_SRC:src/%.c=$(BUILD)/obj/%.o)
ASAN_OBJ   = $(MODULE_SRC:src/%.c=$(BUILD)/asan/obj/%.o)
SAN_FLAGS  = -fsanitize=address,undefined -fno-sanitize-recover=all \
             -fno-omit-frame-pointer -DISOLATION_SANITIZER_PROBE
ASAN_RT   := $(shell $(CC) -print-file-name=libasan.so 2>/dev/null)

# Debian packages `make test` needs; installed when missing (as root).
DEBS = lua5.4 liblua5.4-dev libuv1-dev lua-luv lua-luv-dev lua-cjson \
       lua-busted lua-check luarocks bubblewrap socat curl gcc make \
       libc6-dev clang-format libssl-dev openssl tinyproxy

# mk/*.mk add targets (fuzz, bench, memcheck, the bridge, the demo) and may
# append to ALL_TARGETS and TEST_STEPS.
ALL_TARGETS = $(BUILD)/isolation.so
TEST_STEPS  =

.DEFAULT_GOAL := all
.PHONY: all deps check-headers exports layers test spec spec-asan spec-asan-all spec-both lint format clean rockcheck

-include mk/*.mk

all: $(ALL_TARGETS)

deps:
	@missing=$$(for p in $(DEBS) $(EXTRA_DEBS); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; \
	  done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make: missing Debian packages: $$missing (run as root to install them)" >&2; exit 1; \
	  fi; \
	  echo "make: installing $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# `make` does not install packages behind one's back (that needs root and
# the network, and changes the machine): before the first compile, the two
# headers every object needs are looked for the way the compiler will, and
# a missing one stops the build with the step that installs them.
BUILD_HEADERS = lua.h uv.h openssl/ssl.h
check-headers:
	@for h in $(BUILD_HEADERS); do \
	  printf '#include <%s>\n' "$$h" | $(CC) $(ALL_CFLAGS) -E -x c - -o /dev/null 2>/dev/null || { \
	    echo "make: <$$h> is not found (LUA_INC=$(LUA_INC)): \`make deps\` installs the Debian packages" \
	      "the build needs (as root; it also runs first in make test, spec and demo)" >&2; exit 1; }; \
	done

# The Makefile too: a change of the flags above rebuilds every object.
$(BUILD)/obj/%.o: src/%.c Makefile | check-headers
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(BUILD)/isolation.so: $(MODULE_OBJ)
	$(CC) -shared -o $@ $^ $(LIBS)

$(BUILD)/asan/obj/%.o: src/%.c Makefile | check-headers
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) $(DEPFLAGS) -c -o $@ $<

$(BUILD)/asan/isolation.so: $(ASAN_OBJ)
	$(CC) -shared $(SAN_FLAGS) -o $@ $^ $(LIBS)

$(BUILD)/obj $(BUILD)/asan/obj:
	mkdir -p $@

-include $(MODULE_OBJ:.o=.d) $(ASAN_OBJ:.o=.d)

# Only luaopen_isolation may be exported: anything else in the dynamic
# symbol table means a function lost its hidden visibility.
exports: $(BUILD)/isolation.so
	@syms=$$(nm -D --defined-only $< | awk '{ print $$3 }'); \
	if [ "$$syms" != luaopen_isolation ]; then \
	  echo "exports: $< exports more than luaopen_isolation:" $$syms >&2; exit 1; fi; \
	echo "exports: $< exports luaopen_isolation only"

# The C layers, as the folders draw them: src/wire/ (the fuzzed wire
# parsers) sees neither Lua nor libuv nor any other folder; src/allow/ (host
# patterns) sees wire/ only; src/launch/ and src/proxy/ never see each
# other; one connection's insides (proxy/proxy_conn.h) stay in src/proxy/.
# The root holds the module's entry and the helpers all of them share.
layers:
	@bad=$$( { grep -Hn '#include' src/wire/* | grep -Ev '#include (<[a-z0-9_/]+\.h>|"wire/)' ; \
	  grep -HnE '#include <(lua|lauxlib|lualib|uv)\.h>' src/wire/* ; \
	  grep -HnE '#include "(proxy|launch)/' src/allow/* ; \
	  grep -HnE '#include "proxy/' src/launch/* ; \
	  grep -HnE '#include "launch/' src/proxy/* ; \
	  grep -Hn '#include "proxy/proxy_conn.h"' src/*.[ch] src/wire/* src/allow/* src/launch/* ; } ); \
	if [ -n "$$bad" ]; then echo "layers: an include crosses a layer:"; echo "$$bad"; exit 1; fi; \
	echo "layers: wire/ sees no other folder nor Lua/libuv; allow/ sees wire/; launch/ and proxy/ do not see each other"

# The specs, with the normal build.
spec: deps all
	$(BUSTED) spec

# The same specs against the sanitizer build. The sanitizer runtime must be
# the first library in the process, hence LD_PRELOAD; the spec helpers drop
# it again for the child processes they start (bwrap, curl, bash).
# Only the specs whose work is the module's C in this process: those that
# drive `isolate` as a child process (which runs the normal build), or
# whose time goes to containers, git and file walks, are left to `spec`,
# so that `make test` stays within about 20 minutes on 2 cores.
# `make spec-asan-all` runs every spec file under the sanitizers.
ASAN_SKIP = spec/containers_spec.lua spec/gitcheck_spec.lua spec/agentcfg_spec.lua spec/escape_spec.lua \
  spec/limits_spec.lua spec/proc_spec.lua spec/home_guard_spec.lua spec/protect_spec.lua \
  spec/report_escape_spec.lua spec/root_masks_spec.lua spec/setid_spec.lua spec/session_end_spec.lua \
  spec/isolate_errors_spec.lua spec/isolate_summary_forgery_spec.lua spec/isolate_learn_spec.lua \
  spec/isolate_denials_spec.lua spec/isolate_env_spec.lua spec/isolate_files_spec.lua \
  spec/isolate_log_spec.lua spec/isolate_route_spec.lua spec/examples_spec.lua spec/quickstart_spec.lua \
  spec/tools_spec.lua spec/git_usable_spec.lua spec/unprivileged_spec.lua spec/docs_links_spec.lua \
  spec/bench_chart_spec.lua spec/isolate_spec.lua spec/cjson_roundtrip_spec.lua
ASAN_SPECS = $(filter-out $(ASAN_SKIP),$(sort $(wildcard spec/*_spec.lua)))
ASAN_RUN = ISOLATION_SANITIZER=1 ISOLATION_CPATH='$(BUILD)/asan/?.so' \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LD_PRELOAD='$(ASAN_RT)' $(BUSTED)
spec-asan: deps all $(BUILD)/asan/isolation.so
	$(ASAN_RUN) $(ASAN_SPECS)
spec-asan-all: deps all $(BUILD)/asan/isolation.so $(BUILD)/asan/isolation-bridge
	$(ASAN_RUN) spec

# spec and spec-asan side by side: most of a spec's time is spent waiting
# (sandboxes starting, timers, child processes), so on 2 cores the pair
# takes about as long as spec alone (measured: 17.5 min, against 17.3 +
# 13.1 one after the other). make test runs it. A spec must not depend on
# what the other run may undo (limits_spec: a killed run's cgroup may be
# removed by another isolate's cleanup). Each run's output is printed whole
# once both have ended.
spec-both: deps all $(BUILD)/asan/isolation.so $(BUILD)/asan/isolation-bridge
	@tmp=$$(mktemp -d); \
	{ $(BUSTED) spec >"$$tmp/spec.log" 2>&1; echo $$? >"$$tmp/spec.rc"; } & \
	{ $(ASAN_RUN) $(ASAN_SPECS) >"$$tmp/asan.log" 2>&1; echo $$? >"$$tmp/asan.rc"; } & \
	wait; \
	echo "== make spec"; cat "$$tmp/spec.log"; echo "== make spec-asan"; cat "$$tmp/asan.log"; \
	s=$$(cat "$$tmp/spec.rc"); a=$$(cat "$$tmp/asan.rc"); rm -rf "$$tmp"; \
	echo "spec-both: spec exit $$s, spec-asan exit $$a"; [ "$$s" = 0 ] && [ "$$a" = 0 ]

C_FORMAT = $(wildcard src/*.c src/*.h src/*/*.c src/*/*.h bridge/*.c fuzz/*.c bench/*.c)

lint: deps
	luacheck -q lua spec $(wildcard examples bench) bin/isolate
	clang-format --dry-run -Werror $(C_FORMAT)

format:
	clang-format -i $(C_FORMAT)

# Installs the rock into a temporary tree, from a copy of the sources (the
# builtin build compiles next to them), and loads it from that tree alone.
# The rockspec must list exactly the C files the Makefile builds and the
# Lua modules in lua/isolation/ and lua/isolation/cli/.
# luv and lua-cjson, which the rockspec depends on, are Debian's packages
# here (lua-luv, lua-cjson), not rocks: a temporary luarocks config declares
# them provided (rocks_provided, at Debian's versions), so that the install
# works offline and still resolves the rockspec's dependencies by name.
# Then, from an empty directory and with no LUA_PATH/LUA_CPATH but the
# tree's (and the system's defaults), isolation and its Lua modules load
# from the tree, and the installed `isolate --version` runs.
ROCK_ENV = env -u LUA_INIT -u LUA_INIT_5_4 -u LUA_PATH -u LUA_PATH_5_4 -u LUA_CPATH -u LUA_CPATH_5_4
ROCK_LOAD = local tree, checkout = os.getenv("TREE"), os.getenv("CHECKOUT"); \
  for p in (package.path .. ";" .. package.cpath):gmatch("[^;]+") do \
    assert(not p:find(checkout, 1, true), "the checkout is on the path: " .. p) end; \
  local i = require("isolation"); \
  assert(package.searchpath("isolation", package.cpath):find(tree, 1, true), "isolation is not from the tree"); \
  for _, m in ipairs({"agentcfg", "cli", "cli.prepare", "cli.run", "cli.dryrun", "cli.doctor", "json", "policy", "preflight", "protect", "scheduler", "session", "tools"}) do require("isolation." .. m); \
    assert(package.searchpath("isolation." .. m, package.path):find(tree, 1, true), m .. " is not from the tree") end; \
  assert(i.BRIDGE and i.BRIDGE:find(tree, 1, true), "BRIDGE is not in the tree"); \
  print("rockcheck: isolation " .. i.version .. " and isolation.session (luv " .. require("luv").version_string() \
    .. ", cjson " .. require("cjson")._VERSION .. ") load from the installed tree, BRIDGE " .. i.BRIDGE)

rockcheck: deps all
	@want=$$(printf '%s\n' $(MODULE_SRC) | sort); have=$$(grep -o 'src/[a-z0-9_/]*\.c' isolation-scm-1.rockspec | sort); \
	if [ "$$want" != "$$have" ]; then echo "rockcheck: the rockspec's sources differ from the Makefile's:"; \
	  diff <(echo "$$have") <(echo "$$want"); exit 1; fi
	@want=$$(ls lua/isolation/*.lua lua/isolation/cli/*.lua | sort); \
	have=$$(grep -o 'lua/isolation/[a-z0-9_/]*\.lua' isolation-scm-1.rockspec | sort); \
	if [ "$$want" != "$$have" ]; then \
	  echo "rockcheck: the rockspec's Lua modules differ from lua/isolation/*.lua and lua/isolation/cli/*.lua:"; \
	  diff <(echo "$$have") <(echo "$$want"); exit 1; fi
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	luv=$$(dpkg-query -W -f='$${Version}' lua-luv | sed 's/[-+~].*//') && \
	cjson=$$(dpkg-query -W -f='$${Version}' lua-cjson | sed 's/[-+~].*//') && \
	printf 'rocks_provided = { luv = "%s-1", ["lua-cjson"] = "%s-1" }\n' "$$luv" "$$cjson" >"$$tmp/config.lua" && \
	export LUAROCKS_CONFIG="$$tmp/config.lua" && \
	cp -r src lua bin isolation-scm-1.rockspec "$$tmp/" && mkdir "$$tmp/build" "$$tmp/empty" && \
	cp $(BUILD)/isolation-bridge "$$tmp/build/" && \
	(cd "$$tmp" && luarocks --lua-version 5.4 make --tree "$$tmp/tree" isolation-scm-1.rockspec >"$$tmp/log" 2>&1) \
	  || { cat "$$tmp/log"; exit 1; }; \
	luarocks --lua-version 5.4 --tree "$$tmp/tree" show isolation >"$$tmp/show" 2>&1 || { cat "$$tmp/show"; exit 1; }; \
	for d in luv lua-cjson; do grep -Eq "^[[:space:]]+$$d " "$$tmp/show" \
	  || { echo "rockcheck: the installed rock does not depend on $$d:"; cat "$$tmp/show"; exit 1; }; done; \
	cd "$$tmp/empty" && \
	$(ROCK_ENV) TREE="$$tmp/tree" CHECKOUT="$(CURDIR)" LUA_PATH="$$tmp/tree/share/lua/5.4/?.lua;;" \
	  LUA_CPATH="$$tmp/tree/lib/lua/5.4/?.so;;" $(LUA) -e '$(ROCK_LOAD)' && \
	out=$$($(ROCK_ENV) "$$tmp/tree/bin/isolate" --version) && \
	case "$$out" in "isolate "*"(module $$tmp/tree/"*) echo "rockcheck: installed $$out" ;; \
	  *) echo "rockcheck: the installed isolate --version says: $$out"; exit 1 ;; esac

test: deps all exports layers spec-both lint rockcheck $(TEST_STEPS)
	@echo "make test: all steps passed"

clean:
	rm -rf $(BUILD)
