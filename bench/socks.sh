#!/usr/bin/env bash
# bench/socks.sh - the SOCKS5 row next to HTTP CONNECT: the same proxy
# (bench/isolation-proxy.lua, thread mode, on loopback TCP: SOCKS5 is
# picked by the first byte on the same listener) and the same upstream (the
# harness's blast), with one client (bench/socks-load.c) that opens the
# same tunnel either way, so the rows differ only in the handshake.
#   rate        C threads open tunnels back to back for T s: handshake,
#               PING/PONG through the tunnel, close (tunnels/s, p50, p99,
#               the proxy's CPU per tunnel)
#   throughput  one tunnel, blast sends B bytes down (MB/s)
#
# usage: bench/socks.sh [--out FILE]    (QUICK=1: shorter runs;
#        RATE_C, RATE_T, TP override the concurrency, seconds, bytes)
set -uo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

out_arg "$@"
if [ -n "$QUICK" ]; then RATE_T=${RATE_T:-3}; TP=${TP:-268435456}; else RATE_T=${RATE_T:-8}; TP=${TP:-1073741824}; fi
RATE_C=${RATE_C:-32}
REPS=${REPS:-$([ -n "$QUICK" ] && echo 1 || echo 3)}
PROXY_PORT=${SOCKS_BENCH_PORT:-18160}
BLAST_PORT=$((PROXY_PORT + 1))
LOAD=$REPO/build/socks-load

[ -x "$LOAD" ] || { echo "socks.sh: build first (make build/socks-load)" >&2; exit 2; }
harness_ready || exit 2
RUN=$BENCH_RUN/socks
rm -rf "$RUN"
mkdir -p "$RUN"
for p in $PROXY_PORT $BLAST_PORT; do
    port_free "$p" || { echo "socks.sh: port $p busy (SOCKS_BENCH_PORT=...)" >&2; exit 2; }
done
ulimit -n "$(ulimit -Hn)"

trap kill_pids EXIT
trap 'exit 130' INT TERM

"$HARNESS/blast" "127.0.0.1:$BLAST_PORT" >"$RUN/blast.log" 2>&1 &
PIDS+=("$!")
wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$BLAST_PORT" 2>/dev/null || { echo "socks.sh: blast did not start" >&2; exit 1; }
BENCH_ALLOW="127.0.0.1:$BLAST_PORT" lua5.4 "$REPO/bench/isolation-proxy.lua" --listen "127.0.0.1:$PROXY_PORT" \
    >"$RUN/proxy.log" 2>&1 &
PROXY_PID=$!
PIDS+=("$PROXY_PID")
wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT" 2>/dev/null || { echo "socks.sh: proxy did not start" >&2; exit 1; }

declare -A R
: >"$RUN/raw.txt"
for rep in $(seq "$REPS"); do
    # interleaved: each round runs both protocols, so drift hits both
    for proto in connect socks5; do
        line=$("$LOAD" --proto "$proto" --proxy "127.0.0.1:$PROXY_PORT" --target "127.0.0.1:$BLAST_PORT" \
            rate --conc "$RATE_C" --time "$RATE_T" --pid "$PROXY_PID")
        echo "$line" >>"$RUN/raw.txt"
        R[$proto,rate,$rep]=$(kv "$line" rate)
        R[$proto,p50,$rep]=$(kv "$line" p50_us)
        R[$proto,p99,$rep]=$(kv "$line" p99_us)
        R[$proto,cpu,$rep]=$(kv "$line" cpu_us)
        R[$proto,err,$rep]=$(kv "$line" errors)
        line=$("$LOAD" --proto "$proto" --proxy "127.0.0.1:$PROXY_PORT" --target "127.0.0.1:$BLAST_PORT" \
            throughput --bytes "$TP")
        echo "$line" >>"$RUN/raw.txt"
        R[$proto,mbps,$rep]=$(kv "$line" mbps)
    done
done

# median KEY...: the median of the values given
median() { printf '%s\n' "$@" | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
med() {                         # med PROTO FIELD
    local r vals=()
    for r in $(seq "$REPS"); do vals+=("${R[$1,$2,$r]:-}"); done
    median "${vals[@]}"
}

section=$RUN/section.md
{
    echo "## SOCKS5 next to HTTP CONNECT ($(date +%F), $(nproc) cores, ${QUICK:+quick, }$REPS round(s), medians)"
    echo
    echo "The project's proxy on 127.0.0.1 TCP (thread mode); the same listener takes both protocols."
    echo "rate: $RATE_C clients for ${RATE_T} s, each tunnel = handshake + PING/PONG to blast + close;"
    echo "throughput: one tunnel, $TP bytes down. Client: bench/socks-load.c."
    echo
    echo "| protocol | tunnels/s | p50 µs | p99 µs | proxy CPU µs/tunnel | errors | throughput MB/s |"
    echo "|---|---|---|---|---|---|---|"
    for proto in connect socks5; do
        printf '| %s | %s | %s | %s | %s | %s | %s |\n' \
            "$([ "$proto" = connect ] && echo "HTTP CONNECT" || echo SOCKS5)" \
            "$(med "$proto" rate)" "$(med "$proto" p50)" "$(med "$proto" p99)" "$(med "$proto" cpu)" \
            "$(med "$proto" err)" "$(med "$proto" mbps)"
    done
    echo
    raw_details "raw socks-load lines" "$RUN/raw.txt"
} >"$section"
publish socks "$section"
