# make bench: the shared proxy benchmark with this project's proxy plugged in
# (TCP, unix socket, luv mode) next to its peers and to a floor relay (the
# cheapest CONNECT relay, bench/floor-relay.c), the bridge's cost, and the
# start cost of a deny launch, and the noisy neighbour (one session's
# latency while another floods its proxy; `make bench-noisy` runs it
# alone). Results go to bench/results/. Loads the
# machine for minutes (QUICK=1: about 2-3). The shared folder is read-only:
# the harness is copied to $(BENCH_RUN) and built there.
SHARED    ?= ../shared
BENCH_RUN ?= /tmp/isolation-bench
QUICK     ?=
REPEAT    ?=

.PHONY: bench bench-noisy chart
bench: all $(BUILD)/floor-relay $(BUILD)/socks-load $(BUILD)/route-load
	QUICK='$(QUICK)' REPEAT='$(REPEAT)' SHARED='$(abspath $(SHARED))' BENCH_RUN='$(BENCH_RUN)' bench/bench.sh

$(BUILD)/floor-relay: bench/floor-relay.c | $(BUILD)/obj
	$(CC) -std=c11 $(WARN) -O2 -o $@ $<

# bench/socks.sh's client: the same tunnel through SOCKS5 and HTTP CONNECT
$(BUILD)/socks-load: bench/socks-load.c | $(BUILD)/obj
	$(CC) -std=c11 $(WARN) -O2 -pthread -o $@ $<

# bench/route.sh's client: one HTTPS request direct, through a credential
# route, and through a CONNECT tunnel (OpenSSL, as the proxy)
$(BUILD)/route-load: bench/route-load.c | $(BUILD)/obj
	$(CC) -std=c11 $(WARN) -O2 -pthread -o $@ $< -lssl -lcrypto

# The chart of a results file (bench/chart.lua: an SVG next to it, same
# name): `make bench` draws it at the end; `make chart` draws it again,
# from the newest results file or CHART_FROM=bench/results/bench-DATE.md.
CHART_FROM ?= $(lastword $(sort $(wildcard bench/results/bench-*.md)))
chart:
	$(LUA) bench/chart.lua $(CHART_FROM)

bench-noisy: all
	QUICK='$(QUICK)' SHARED='$(abspath $(SHARED))' bench/noisy.sh $(if $(BENCH_OUT),--out '$(BENCH_OUT)')
