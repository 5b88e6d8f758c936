# The in-sandbox bridge program: a TCP listener on the sandbox's loopback
# relayed to the proxy's unix socket (bridge/). Not part of isolation.so.
#
#   make                      builds $(BUILD)/isolation-bridge too
#   make bridge-asan          an ASan+UBSan build of it, used by `make spec-asan`
#
# isolation.BRIDGE finds it beside isolation.so (build/, build/asan/, or a
# rock tree whose rockspec installs build/isolation-bridge as a lib file).

BRIDGE_SRC  = $(wildcard bridge/*.c)
BRIDGE_HDR  = $(wildcard bridge/*.h)
BRIDGE_CFLAGS = $(CSTD) $(WARN) $(CFLAGS) -Ibridge $(EXTRA_CFLAGS)
# Static: docker and podman mount it into any image, which may have no
# loader or libc of its own (or a musl one). It uses no NSS (no name
# lookups, no user database), so glibc's static libc.a serves it whole.
# The sanitizer build stays dynamic (the ASan runtime is a shared library).
BRIDGE_LDFLAGS ?= -static

ALL_TARGETS += $(BUILD)/isolation-bridge

$(BUILD)/isolation-bridge: $(BRIDGE_SRC) $(BRIDGE_HDR) mk/bridge.mk
	@mkdir -p $(BUILD)
	$(CC) $(BRIDGE_CFLAGS) $(BRIDGE_LDFLAGS) -o $@ $(BRIDGE_SRC)

$(BUILD)/asan/isolation-bridge: $(BRIDGE_SRC) $(BRIDGE_HDR)
	@mkdir -p $(BUILD)/asan
	$(CC) $(BRIDGE_CFLAGS) $(SAN_FLAGS) -o $@ $(BRIDGE_SRC)

.PHONY: bridge-asan
bridge-asan: $(BUILD)/asan/isolation-bridge

# The sanitizer run of the specs also runs the bridge's specs against the
# sanitizer build of the bridge (spec/bridge_spec.lua picks it).
spec-asan: $(BUILD)/asan/isolation-bridge
