# `make demo`: the README's first command. On a fresh Debian 12 machine (as
# root) `deps` installs the packages and `all` builds the module; then the
# demo runs one command in a real bwrap sandbox and prints a PASS/FAIL table.
.PHONY: demo
demo: deps all
	$(LUA) examples/demo.lua
