#!/usr/bin/env bash
# bench/route.sh - a credential route next to the paths it is measured
# against: the same HTTPS request to the same upstream (nginx with TLS on
# loopback, a CA and leaf made here by openssl) made
#   direct    with TLS from the client (the floor: a client holding the key)
#   route     as plain HTTP to the proxy, GET /up/json: the proxy makes the
#             TLS connection and adds the secret (proxy option routes)
#   connect   through a CONNECT tunnel of the same proxy, TLS end to end
#             (the path a route replaces)
#   floor     through a CONNECT tunnel of bench/floor-relay.c, TLS end to
#             end: the cheapest relay, no checks at all (c=1 kept only).
#             What one more process on the path costs here, whatever it
#             does: a route cannot be faster than direct plus this hop
# by one client (bench/route-load.c, OpenSSL, verifying as the proxy does).
#   c=1 kept   one client, keep-alive (K requests a connection): p50 of a
#              request; the issue's goal: route within 1.2x of direct
#   c=1 new    one client, a new connection for every request (as curl, git
#              and most command-line clients make them): p50 of a request
#   c=32 new   32 clients, a new connection for every request (connect,
#              CONNECT, TLS handshake included): requests/s, p50, p99, the
#              proxy's CPU per request; goal: route no worse than connect
#   c=32 kept  the same with keep-alive
#   stream     one GET of a 256 MiB file (64 MiB with QUICK): MB/s
# Rounds interleave the three modes (REPS, medians).
#
# usage: bench/route.sh [--out FILE]    (QUICK=1: shorter runs; RATE_T,
#        KEEP, REPS, ROUTE_BENCH_PORT override; FLOOR_ROW= leaves the
#        floor row out)
set -uo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

out_arg "$@"
if [ -n "$QUICK" ]; then RATE_T=${RATE_T:-3}; BIG_MB=64; else RATE_T=${RATE_T:-6}; BIG_MB=256; fi
KEEP=${KEEP:-100}
REPS=${REPS:-$([ -n "$QUICK" ] && echo 1 || echo 3)}
PROXY_PORT=${ROUTE_BENCH_PORT:-18170}
UP_PORT=$((PROXY_PORT + 1))
FLOOR_PORT=$((PROXY_PORT + 2))
FLOOR_ROW=${FLOOR_ROW-1}
LOAD=$REPO/build/route-load

[ -x "$LOAD" ] || { echo "route.sh: build first (make build/route-load)" >&2; exit 2; }
if [ -n "$FLOOR_ROW" ] && [ ! -x "$REPO/build/floor-relay" ]; then
    echo "route.sh: build first (make build/floor-relay), or FLOOR_ROW= to leave the floor out" >&2; exit 2
fi
if ! command -v nginx >/dev/null || ! command -v openssl >/dev/null; then
    echo "route.sh: needs nginx and openssl" >&2; exit 2
fi
if [ -n "$OUT" ]; then harness_ready || exit 2; fi
RUN=$BENCH_RUN/route
rm -rf "$RUN"
mkdir -p "$RUN/www" "$RUN/tmp"
for p in $PROXY_PORT $UP_PORT ${FLOOR_ROW:+$FLOOR_PORT}; do
    port_free "$p" || { echo "route.sh: port $p busy (ROUTE_BENCH_PORT=...)" >&2; exit 2; }
done
ulimit -n "$(ulimit -Hn)"

trap kill_pids EXIT
trap 'exit 130' INT TERM

# The CA and the upstream's leaf (an IP SAN: the route's upstream is
# https://127.0.0.1:PORT, verified by the proxy and by the client alike).
(
    cd "$RUN" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=bench-ca -keyout ca.key -out ca.pem &&
        openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout up.key -out up.csr &&
        printf 'subjectAltName=IP:127.0.0.1\n' >up.ext &&
        openssl x509 -req -in up.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile up.ext -out up.pem
) >"$RUN/openssl.log" 2>&1 || { echo "route.sh: openssl failed (see $RUN/openssl.log)" >&2; exit 1; }
head -c $((BIG_MB * 1048576)) /dev/zero >"$RUN/www/big"

# nginx: one worker, TLS 1.3, keep-alive without limit, a small JSON answer
cat >"$RUN/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $RUN/nginx.pid;
error_log $RUN/nginx.err warn;
$( [ "$(id -u)" = 0 ] && echo "user root;" )
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $RUN/tmp; proxy_temp_path $RUN/tmp; fastcgi_temp_path $RUN/tmp;
    uwsgi_temp_path $RUN/tmp; scgi_temp_path $RUN/tmp;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$UP_PORT ssl;
        ssl_certificate $RUN/up.pem;
        ssl_certificate_key $RUN/up.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache off;
        ssl_session_tickets off;
        location = /json { default_type application/json; return 200 '{"ok": true}'; }
        location = /big { root $RUN/www; }
    }
}
EOF
nginx -c "$RUN/nginx.conf" -p "$RUN" >"$RUN/nginx.log" 2>&1 &
PIDS+=("$!")
wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$UP_PORT" 2>/dev/null ||
    { echo "route.sh: nginx did not start (see $RUN/nginx.err)" >&2; exit 1; }

BENCH_ALLOW="127.0.0.1:$UP_PORT" lua5.4 "$REPO/bench/isolation-proxy.lua" --listen "127.0.0.1:$PROXY_PORT" \
    --route "up=https://127.0.0.1:$UP_PORT" --upstream-ca "$RUN/ca.pem" >"$RUN/proxy.log" 2>&1 &
PROXY_PID=$!
PIDS+=("$PROXY_PID")
wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT" 2>/dev/null ||
    { echo "route.sh: proxy did not start" >&2; exit 1; }

if [ -n "$FLOOR_ROW" ]; then
    BENCH_ALLOW="127.0.0.1:$UP_PORT" "$REPO/build/floor-relay" "127.0.0.1:$FLOOR_PORT" >"$RUN/floor.log" 2>&1 &
    PIDS+=("$!")
    wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$FLOOR_PORT" 2>/dev/null ||
        { echo "route.sh: floor-relay did not start" >&2; exit 1; }
fi

load() {   # load MODE ARGS... (floor: a CONNECT through floor-relay)
    local mode=$1 via=$PROXY_PORT
    [ "$mode" = floor ] && mode=connect via=$FLOOR_PORT
    "$LOAD" --mode "$mode" --target "127.0.0.1:$UP_PORT" --proxy "127.0.0.1:$via" --route up \
        --ca "$RUN/ca.pem" "${@:2}"
}

declare -A R
: >"$RUN/raw.txt"
MODES="direct route connect"
for rep in $(seq "$REPS"); do
    for m in $MODES; do
        for cell in "c1k:1:$KEEP" "c1n:1:1" "c32n:32:1" "c32k:32:$KEEP"; do
            IFS=: read -r name c k <<<"$cell"
            line=$(load "$m" --path /json rate --conc "$c" --time "$RATE_T" --keep "$k" --pid "$PROXY_PID")
            echo "$name $line" >>"$RUN/raw.txt"
            for f in rate p50_us p99_us cpu_us errors; do R[$m,$name,$f,$rep]=$(kv "$line" "$f"); done
        done
        line=$(load "$m" --path /big throughput)
        echo "stream $line" >>"$RUN/raw.txt"
        R[$m,stream,mbps,$rep]=$(kv "$line" mbps)
    done
    if [ -n "$FLOOR_ROW" ]; then
        line=$(load floor --path /json rate --conc 1 --time "$RATE_T" --keep "$KEEP")
        echo "c1k $line (floor-relay)" >>"$RUN/raw.txt"
        for f in p50_us errors; do R[floor,c1k,$f,$rep]=$(kv "$line" "$f"); done
    fi
done

med() {   # med MODE CELL FIELD
    local r vals=()
    for r in $(seq "$REPS"); do vals+=("${R[$1,$2,$3,$r]:-}"); done
    printf '%s\n' "${vals[@]}" | grep -v '^$' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'
}

cpu() {   # cpu MODE CELL: the proxy's CPU per request; - for direct (no proxy)
    if [ "$1" = direct ]; then echo -; else med "$1" "$2" cpu_us; fi
}

section=$RUN/section.md
{
    echo "## Credential route next to direct TLS and a CONNECT tunnel ($(date +%F), $(nproc) cores, ${QUICK:+quick, }$REPS round(s), medians)"
    echo
    echo "The same GET of a 12-byte JSON answer from nginx over TLS on 127.0.0.1 (one worker, no session"
    echo "resumption), made directly (TLS from the client), through a route (plain HTTP to the proxy, which"
    echo "makes the TLS connection and adds the secret), and through a CONNECT tunnel of the same proxy (thread"
    echo "mode, TCP). Client: bench/route-load.c. c=1 kept: one client, $KEEP requests a connection; c=1 new: one client, a new connection a request (as curl and git make them); c=32 new: a"
    echo "new connection (and, direct and through CONNECT, a TLS handshake) for every request: through a route the"
    echo "proxy keeps idle upstream TLS connections for the next client connection, so there it is a plain"
    echo "connection to the proxy; ${RATE_T} s a cell. CPU: the proxy's process."
    echo
    echo "| path | c=1 kept p50 µs | c=1 new p50 µs | c=32 new req/s | c=32 new p50 µs | c=32 new p99 µs | proxy CPU µs/req (new) | c=32 kept req/s | c=32 kept p50 µs | proxy CPU µs/req (kept) | stream MB/s | errors |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for m in $MODES; do
        errs=$(( $(med "$m" c1k errors) + $(med "$m" c1n errors) + $(med "$m" c32n errors) + $(med "$m" c32k errors) ))
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$m" \
            "$(med "$m" c1k p50_us)" "$(med "$m" c1n p50_us)" "$(med "$m" c32n rate)" "$(med "$m" c32n p50_us)" "$(med "$m" c32n p99_us)" \
            "$(cpu "$m" c32n)" "$(med "$m" c32k rate)" \
            "$(med "$m" c32k p50_us)" "$(cpu "$m" c32k)" \
            "$(med "$m" stream mbps)" "$errs"
    done
    if [ -n "$FLOOR_ROW" ]; then
        printf '| floor (CONNECT through floor-relay) | %s | - | - | - | - | - | - | - | - | - | %s |\n' \
            "$(med floor c1k p50_us)" "$(med floor c1k errors)"
    fi
    echo
    echo "Ratios: c=1 kept p50 route/direct $(ratio "$(med route c1k p50_us)" "$(med direct c1k p50_us)")" \
        "(goal <= 1.20), route/connect $(ratio "$(med route c1k p50_us)" "$(med connect c1k p50_us)");" \
        "c=1 new p50 route/direct $(ratio "$(med route c1n p50_us)" "$(med direct c1n p50_us)")" \
        "(goal <= 1.20), route/connect $(ratio "$(med route c1n p50_us)" "$(med connect c1n p50_us)");" \
        "c=32 new req/s route/connect $(ratio "$(med route c32n rate)" "$(med connect c32n rate)") (goal >= 1)," \
        "route/direct $(ratio "$(med route c32n rate)" "$(med direct c32n rate)");" \
        "c=32 kept req/s route/connect $(ratio "$(med route c32k rate)" "$(med connect c32k rate)");" \
        "stream route/connect $(ratio "$(med route stream mbps)" "$(med connect stream mbps)")."
    if [ -n "$FLOOR_ROW" ]; then
        echo
        echo "The floor: c=1 kept p50 floor/direct $(ratio "$(med floor c1k p50_us)" "$(med direct c1k p50_us)")" \
            "(one more process on the path, relaying blind), route/floor $(ratio "$(med route c1k p50_us)" "$(med floor c1k p50_us)")."
    fi
    echo
    raw_details "raw route-load lines" "$RUN/raw.txt"
} >"$section"
publish route "$section"
