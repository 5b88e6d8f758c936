#!/usr/bin/env bash
# bench/bench.sh - `make bench`: the shared proxy benchmark with the
# project's proxy plugged in (TCP and unix socket) next to tinyproxy, squid,
# asrt and asrt-uds; the shared sandbox start cost; then the project's own
# bridge.sh, socks.sh, route.sh, startup.sh (with hyperfine, then interleaved), gitcheck.sh and noisy.sh. Results:
# bench/results/bench-YYYY-MM-DD.md, and its chart (bench/chart.lua) beside
# it, bench-YYYY-MM-DD.svg.
#
#   QUICK=1        the harness's --quick, fewer runs everywhere (~2-3 min)
#   SHARED=DIR     where the shared folder is (../shared from the repo root)
#   BENCH_RUN=DIR  scratch directory (/tmp/isolation-bench)
#   BENCH_OUT=FILE results file
#   PEERS="tinyproxy squid asrt asrt-uds"   the peer rows
#   REPEAT=N       the harness's --repeat N (interleaved rounds, medians)
#   LUV_ROW=       leave out the isolation-luv row (the proxy in luv mode)
#   FLOOR_ROW=     leave out the floor row (bench/floor-relay.c, no checks)
#   SANDBOX_ROWS=  leave out bridge.sh's whole-sandbox rows (a client in a real deny
#                  sandbox, with each bridge)
set -uo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

QUICK=${QUICK:-}
export QUICK
[ "$QUICK" = 0 ] && QUICK=
OUT=${BENCH_OUT:-$REPO/bench/results/bench-$(date +%F).md}
PEERS=${PEERS:-tinyproxy squid asrt asrt-uds}
PROXY_PORT=${ISOLATION_BENCH_PORT:-18140}
# The luv-mode row (isolate's mode: the proxy driven from luv's loop on the
# Lua thread); LUV_ROW= leaves it out.
LUV_ROW=${LUV_ROW-1}
LUV_PORT=$((PROXY_PORT + 1))
# The floor row: bench/floor-relay.c, a CONNECT relay with no checks at
# all, for what any relay pays on this machine; FLOOR_ROW= leaves it out.
FLOOR_ROW=${FLOOR_ROW-1}
FLOOR_PORT=$((PROXY_PORT + 2))
UDS=$BENCH_RUN/isolation.sock

harness_ready || exit 2
if [ ! -x "$REPO/build/isolation-bridge" ] || [ ! -f "$REPO/build/isolation.so" ] ||
    [ ! -x "$REPO/build/floor-relay" ]; then
    echo "bench: build first (make)" >&2; exit 2
fi
port_free "$PROXY_PORT" || { echo "bench: port $PROXY_PORT busy (ISOLATION_BENCH_PORT=...)" >&2; exit 2; }
port_free "$FLOOR_PORT" || { echo "bench: port $FLOOR_PORT busy (ISOLATION_BENCH_PORT=...)" >&2; exit 2; }
port_free "$LUV_PORT" || { echo "bench: port $LUV_PORT busy (ISOLATION_BENCH_PORT=...)" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"

START="exec lua5.4 $REPO/bench/isolation-proxy.lua"
log "proxy benchmark -> $OUT"
# shellcheck disable=SC2086
BENCH_RUN=$BENCH_RUN/run "$HARNESS/run.sh" ${QUICK:+--quick} ${REPEAT:+--repeat "$REPEAT"} --out "$OUT" \
    "custom:isolation:$START --listen 127.0.0.1:$PROXY_PORT:127.0.0.1:$PROXY_PORT" \
    "custom:isolation-uds:$START --unix $UDS:unix:$UDS" \
    ${LUV_ROW:+"custom:isolation-luv:$START --luv --listen 127.0.0.1:$LUV_PORT:127.0.0.1:$LUV_PORT"} \
    ${FLOOR_ROW:+"custom:floor:exec $REPO/build/floor-relay 127.0.0.1:$FLOOR_PORT:127.0.0.1:$FLOOR_PORT"} \
    $PEERS
rc=$?

log "shared sandbox start cost -> $OUT"
"$HARNESS/startup.sh" --out "$OUT" ${QUICK:+--runs 10} || rc=1
log "bridge cost -> $OUT"
SANDBOX_ROWS=${SANDBOX_ROWS-1} "$REPO/bench/bridge.sh" --out "$OUT" || rc=1
log "SOCKS5 next to HTTP CONNECT -> $OUT"
"$REPO/bench/socks.sh" --out "$OUT" || rc=1
log "credential route next to direct TLS and CONNECT -> $OUT"
"$REPO/bench/route.sh" --out "$OUT" || rc=1
log "deny launch start cost -> $OUT"
"$REPO/bench/startup.sh" --out "$OUT" ${QUICK:+--runs 10} || rc=1
# the same rows again, interleaved: their ratios on a shared machine
IL_RUNS=60; [ -n "$QUICK" ] && IL_RUNS=20
"$REPO/bench/startup.sh" --out "$OUT" --interleave --runs "$IL_RUNS" || rc=1
log "git end check -> $OUT"
"$REPO/bench/gitcheck.sh" --out "$OUT" || rc=1
log "noisy neighbour -> $OUT"
"$REPO/bench/noisy.sh" --out "$OUT" || rc=1
log "chart -> ${OUT%.md}.svg"
"${LUA:-lua5.4}" "$REPO/bench/chart.lua" "$OUT" || rc=1
log "results in $OUT"
exit $rc
