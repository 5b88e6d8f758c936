#!/usr/bin/env bash
# bench/bridge.sh - what the in-sandbox bridge costs. The same proxy
# (bench/isolation-proxy.lua on a unix socket) and the same upstream (nginx
# /small) are reached four ways, with the shared loadgen:
#   direct    no proxy (loopback reference)
#   unix      straight to the proxy's unix socket (--proxy unix:PATH)
#   builtin   through isolation-bridge (--proxy tcp:127.0.0.1:PORT)
#   socat     through socat with the seed's argument order, fork per client
#   tcp       straight to a second proxy listening on loopback TCP (the
#             proxy's own TCP row)
#   pass      bridge "pass": a loopback listener handed to a third proxy
#             (accept_listeners) by isolation-bridge --pass, which the proxy
#             accepts on itself; no process between client and proxy
# connect-latency: sequential CONNECT + GET /small tunnels (p50, p99);
# connect-rate: C concurrent clients for T s (tunnels/s, the bridge's CPU per
# tunnel); tunnel-throughput: one tunnel to blast, down and up (MB/s);
# idle-tunnels: K tunnels to the harness's blast held open (Pss
# growth of the bridge's process tree per tunnel: socat forks one process
# per client). Added latency = p50 minus the unix p50.
#
# usage: bench/bridge.sh [--out FILE]     (QUICK=1: shorter runs;
#        BRIDGE_BIN=PATH: another isolation-bridge build, for an A/B;
#        BRIDGE_VIAS="unix tcp pass": only those rows;
#        SANDBOX_ROWS=1: the whole sandbox path too, SANDBOX_BRIDGES_LIST="pass builtin socat";
#        with the tcp row and pass among them, P50_ROUNDS alternating pairs
#        of the tcp and sandbox-pass p50, default 7, QUICK 3)
set -uo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

out_arg "$@"
if [ -n "$QUICK" ]; then LAT_N=${LAT_N:-500}; RATE_T=${RATE_T:-3}; else LAT_N=${LAT_N:-3000}; RATE_T=${RATE_T:-8}; fi
RATE_C=${RATE_C:-32}
if [ -n "$QUICK" ]; then IDLE_K=${IDLE_K:-300}; TP=${TP:-256M}; else IDLE_K=${IDLE_K:-1000}; TP=${TP:-1G}; fi
WARM=${WARM:-0.5}
NGINX_PORT=${NGINX_PORT:-18080}
BLAST_PORT=${BLAST_PORT:-18081}
BUILTIN_PORT=${BUILTIN_PORT:-18151}
SOCAT_PORT=${SOCAT_PORT:-18152}
TCP_PORT=${TCP_PORT:-18153}
PASS_PORT=${PASS_PORT:-18154}

harness_ready || exit 2
LG=$HARNESS/loadgen
RUN=$BENCH_RUN/bridge
rm -rf "$RUN"
mkdir -p "$RUN/nginx/www" "$RUN/nginx/tmp"
for p in $NGINX_PORT $BLAST_PORT $BUILTIN_PORT $SOCAT_PORT $TCP_PORT $PASS_PORT; do
    port_free "$p" || { echo "bridge.sh: port $p busy" >&2; exit 2; }
done
ulimit -n "$(ulimit -Hn)"

trap kill_pids EXIT
trap 'exit 130' INT TERM

# upstream: the harness's nginx config, rendered as its run.sh does
sed -e "s|@NGINX_PORT@|$NGINX_PORT|g; s|@BLAST_PORT@|$BLAST_PORT|g; s|@PROXY_PORT@|0|g; s|@DIR@|$RUN/nginx|g" \
    "$HARNESS/conf/nginx.conf" >"$RUN/nginx/nginx.conf"
head -c 100 /dev/zero | tr '\0' s >"$RUN/nginx/www/small"
head -c 1048576 /dev/zero | tr '\0' l >"$RUN/nginx/www/large"
nginx -p "$RUN/nginx/" -c "$RUN/nginx/nginx.conf" -e "$RUN/nginx/error.log" >"$RUN/nginx.log" 2>&1 &
PIDS+=("$!")
wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$NGINX_PORT" 2>/dev/null || { echo "bridge.sh: nginx did not start" >&2; exit 1; }

"$HARNESS/blast" "127.0.0.1:$BLAST_PORT" >"$RUN/blast.log" 2>&1 &
PIDS+=("$!")
wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$BLAST_PORT" 2>/dev/null || { echo "bridge.sh: blast did not start" >&2; exit 1; }

SOCK=$RUN/proxy.sock
BENCH_ALLOW="127.0.0.1:$NGINX_PORT 127.0.0.1:$BLAST_PORT" lua5.4 "$REPO/bench/isolation-proxy.lua" --unix "$SOCK" >"$RUN/proxy.log" 2>&1 &
PROXY_PID=$!
PIDS+=("$PROXY_PID")
wait_for test -S "$SOCK" || { echo "bridge.sh: proxy did not start: $(cat "$RUN/proxy.log")" >&2; exit 1; }

"${BRIDGE_BIN:-$REPO/build/isolation-bridge}" "$BUILTIN_PORT" "$SOCK" || exit 1
BUILTIN_PID=$(listener_pid "$BUILTIN_PORT")
PIDS+=("$BUILTIN_PID")
socat "TCP-LISTEN:$SOCAT_PORT,bind=127.0.0.1,reuseaddr,fork" "UNIX-CONNECT:$SOCK" 2>"$RUN/socat.log" &
SOCAT_PID=$!
PIDS+=("$SOCAT_PID")
wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$SOCAT_PORT" 2>/dev/null || { echo "bridge.sh: socat did not start" >&2; exit 1; }

BENCH_ALLOW="127.0.0.1:$NGINX_PORT 127.0.0.1:$BLAST_PORT" lua5.4 "$REPO/bench/isolation-proxy.lua" \
    --listen "127.0.0.1:$TCP_PORT" >"$RUN/proxy-tcp.log" 2>&1 &
TCP_PID=$!
PIDS+=("$TCP_PID")
PASS_SOCK=$RUN/proxy-pass.sock
BENCH_ALLOW="127.0.0.1:$NGINX_PORT 127.0.0.1:$BLAST_PORT" lua5.4 "$REPO/bench/isolation-proxy.lua" \
    --unix "$PASS_SOCK" --accept-listeners 1 >"$RUN/proxy-pass.log" 2>&1 &
PASS_PROXY_PID=$!
PIDS+=("$PASS_PROXY_PID")
wait_for test -S "$PASS_SOCK" || { echo "bridge.sh: pass proxy did not start" >&2; exit 1; }
wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$TCP_PORT" 2>/dev/null || { echo "bridge.sh: tcp proxy did not start" >&2; exit 1; }
# the starter hands the listener over, then execs a stand-in for the command
"${BRIDGE_BIN:-$REPO/build/isolation-bridge}" --pass "$PASS_PORT" "$PASS_SOCK" sleep 100000 &
PIDS+=("$!")
wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$PASS_PORT" 2>/dev/null || { echo "bridge.sh: pass did not start" >&2; exit 1; }

declare -A R
read -ra VIAS <<<"${BRIDGE_VIAS:-direct unix tcp builtin socat pass}"
for via in "${VIAS[@]}"; do
    case $via in
        direct) args=(--direct); pid= ;;
        unix) args=(--proxy "unix:$SOCK"); pid=$PROXY_PID ;;
        builtin) args=(--proxy "tcp:127.0.0.1:$BUILTIN_PORT"); pid=$BUILTIN_PID ;;
        socat) args=(--proxy "tcp:127.0.0.1:$SOCAT_PORT"); pid=$SOCAT_PID ;;
        tcp) args=(--proxy "tcp:127.0.0.1:$TCP_PORT"); pid=$TCP_PID ;;
        pass) args=(--proxy "tcp:127.0.0.1:$PASS_PORT"); pid=$PASS_PROXY_PID ;;
    esac
    [ -n "$pid" ] && args+=(--pid "$pid")
    log "bridge: $via"
    l=$(timeout -k 5 100 "$LG" connect-latency "${args[@]}" --target "127.0.0.1:$NGINX_PORT" --path /small \
        -n "$LAT_N" -w "$WARM" --label "$via" --max-time 80 2>>"$RUN/loadgen.stderr")
    log "  $l"
    echo "$l" >>"$RUN/raw.txt"
    R[$via,p50]=$(kv "$l" p50_us); R[$via,p99]=$(kv "$l" p99_us); R[$via,lat_err]=$(kv "$l" err)
    l=$(timeout -k 5 100 "$LG" connect-rate "${args[@]}" --target "127.0.0.1:$NGINX_PORT" --path /small \
        -c "$RATE_C" -t "$RATE_T" -w "$WARM" --label "$via" --max-time 80 2>>"$RUN/loadgen.stderr")
    log "  $l"
    echo "$l" >>"$RUN/raw.txt"
    R[$via,rate]=$(kv "$l" rate_per_s); R[$via,rate_p99]=$(kv "$l" p99_us)
    R[$via,cpu]=$(kv "$l" proxy_cpu_us_per_op); R[$via,rate_err]=$(kv "$l" err)
    for dir in down up; do
        targs=("${args[@]}" --target "127.0.0.1:$BLAST_PORT" --bytes "$TP" --label "$via" --max-time 80)
        [ $dir = up ] && targs+=(--up)
        l=$(timeout -k 5 100 "$LG" tunnel-throughput "${targs[@]}" 2>>"$RUN/loadgen.stderr")
        log "  $l"
        echo "$l" >>"$RUN/raw.txt"
        R[$via,tput_$dir]=$(kv "$l" mb_per_s)
        R[$via,tput_err]=$(( ${R[$via,tput_err]:-0} + $(kv "$l" err | grep . || echo 0) ))
    done
    if [ "$via" != direct ]; then
        sleep 1     # let the proxy end the last tunnels first
        l=$(timeout -k 5 100 "$LG" idle-tunnels "${args[@]}" --target "127.0.0.1:$BLAST_PORT" \
            -n "$IDLE_K" -c 50 -t 2 --label "$via" --max-time 80 2>>"$RUN/loadgen.stderr")
        log "  $l"
        echo "$l" >>"$RUN/raw.txt"
        R[$via,idle]=$(kv "$l" per_tunnel_kib); R[$via,held]=$(kv "$l" held)
        R[$via,idle_err]=$(( $(kv "$l" err | grep . || echo 0) + $(kv "$l" dropped | grep . || echo 0) ))
    fi
done

# The whole sandbox path (SANDBOX_ROWS=1): the loadgen inside a real deny
# sandbox (isolation.wrap, bwrap), through each bridge, to a proxy on the
# host that takes listeners: p50 (sequential), c=$RATE_C rate, throughput
# down and up (to blast), and CPU per tunnel of every process but the
# client's: the proxy (sampled from the host over the rate window) plus the
# bridge's process tree in the sandbox (the loadgen's --pid, found in the
# sandbox's own /proc: the built-in relay, socat and its forks, or pass's
# idle keeper).
declare -A S
SANDBOX_BRIDGES=()
# CPU ticks (user + system, every thread) of process $1
ticks() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }'; }
sandbox_line() {               # sandbox_line BRIDGE COMMAND: the wrap() line
    WORKDIR=$RUN/work SOCK=$SB_SOCK B=$1 H=$HARNESS CMD=$2 LUA_CPATH="$REPO/build/?.so;;" lua5.4 -e '
        local isolation = require("isolation")
        print(assert(isolation.wrap({
          config = { mode = "bwrap", network = "deny" }, agent = "bench",
          workdir = os.getenv("WORKDIR"), command = os.getenv("CMD"),
          proxy_socket = os.getenv("SOCK"), bridge = os.getenv("B"), ro_binds = { os.getenv("H") },
        })))'
}
if [ -n "${SANDBOX_ROWS:-}" ]; then
    read -ra SANDBOX_BRIDGES <<<"${SANDBOX_BRIDGES_LIST:-pass builtin socat}"
    SB_SOCK=$RUN/proxy-sandbox.sock
    mkdir -p "$RUN/work"
    BENCH_ALLOW="127.0.0.1:$NGINX_PORT 127.0.0.1:$BLAST_PORT" lua5.4 "$REPO/bench/isolation-proxy.lua" \
        --unix "$SB_SOCK" --accept-listeners 64 >"$RUN/proxy-sandbox.log" 2>&1 &
    SB_PID=$!
    PIDS+=("$SB_PID")
    wait_for test -S "$SB_SOCK" || { echo "bridge.sh: sandbox proxy did not start" >&2; exit 1; }
    TCK=$(getconf CLK_TCK)
    # the bridge's process in the sandbox: pass's keeper, the relay, socat
    # (a command line that starts with it; the command's bash does not)
    find_bridge='bp=$(pgrep -o -f "^(/[^ ]*/isolation-bridge|socat) "); exec '
    for b in "${SANDBOX_BRIDGES[@]}"; do
        for mode in connect-latency connect-rate down up; do
            case $mode in
                connect-latency) cmd="$LG $mode --proxy tcp:127.0.0.1:3128 --target 127.0.0.1:$NGINX_PORT --path /small -n $LAT_N -w $WARM" ;;
                connect-rate) cmd="$find_bridge$LG $mode --proxy tcp:127.0.0.1:3128 --target 127.0.0.1:$NGINX_PORT --path /small -c $RATE_C -t $RATE_T -w $WARM \${bp:+--pid \$bp}" ;;
                down|up) cmd="$LG tunnel-throughput --proxy tcp:127.0.0.1:3128 --target 127.0.0.1:$BLAST_PORT --bytes $TP"
                    [ $mode = up ] && cmd="$cmd --up" ;;
            esac
            line=$(sandbox_line "$b" "$cmd --label sandbox-$b --max-time 80")
            log "bridge: sandbox $b $mode"
            rm -f "$RUN/proxy-ticks"
            if [ $mode = connect-rate ]; then
                # the proxy's CPU over the loadgen's window (after its warm-up)
                ( sleep "$WARM"; t0=$(ticks "$SB_PID"); sleep "$RATE_T"; echo $(( $(ticks "$SB_PID") - t0 )) \
                    >"$RUN/proxy-ticks" ) &
                sampler=$!
            fi
            l=$(timeout -k 5 120 sh -c "$line" 2>>"$RUN/loadgen.stderr" | grep "mode=")
            [ $mode = connect-rate ] && wait "$sampler"
            log "  $l"
            echo "$l" >>"$RUN/raw.txt"
            case $mode in
                connect-latency) S[$b,p50]=$(kv "$l" p50_us); S[$b,p99]=$(kv "$l" p99_us) ;;
                connect-rate)
                    S[$b,rate]=$(kv "$l" rate_per_s); S[$b,err]=$(kv "$l" err)
                    S[$b,bcpu]=$(kv "$l" proxy_cpu_us_per_op)
                    S[$b,pcpu]=$(awk -v t="$(cat "$RUN/proxy-ticks" 2>/dev/null)" -v hz="$TCK" -v ok="$(kv "$l" ok)" \
                        'BEGIN { if (t == "" || ok + 0 == 0) print "-"; else printf "%.1f", t * 1e6 / hz / ok }')
                    echo "proxy-ticks sandbox-$b $(cat "$RUN/proxy-ticks" 2>/dev/null) hz=$TCK" >>"$RUN/raw.txt" ;;
                *) S[$b,$mode]=$(kv "$l" mb_per_s) ;;
            esac
        done
    done
fi

# The pass path against the proxy's own TCP row, measured in alternating
# pairs (P50_ROUNDS of them; the order flips every round): the rows above
# run minutes apart, and on a shared machine a load change in between moves
# a p50 by more than the 10 µs asked of the pass path, and a rate by more
# than the 10 % it may lose. Each pair is the same loadgen run, from the
# host to the TCP proxy and from inside a deny sandbox through bridge pass:
# sequential connect-latency, then connect-rate (c=RATE_C, DUEL_RATE_T s).
DUEL=()
if [ -n "${SANDBOX_ROWS:-}" ] && [[ " ${SANDBOX_BRIDGES[*]} " == *" pass "* ]]; then
    if [ -n "$QUICK" ]; then P50_ROUNDS=${P50_ROUNDS:-3}; else P50_ROUNDS=${P50_ROUNDS:-7}; fi
    DUEL_RATE_T=${DUEL_RATE_T:-3}
    lat_args="connect-latency --target 127.0.0.1:$NGINX_PORT --path /small -n $LAT_N -w $WARM --max-time 80"
    rate_args="connect-rate --target 127.0.0.1:$NGINX_PORT --path /small -c $RATE_C -t $DUEL_RATE_T -w $WARM --max-time 80"
    duel_line() { sandbox_line pass "$LG $1 --proxy tcp:127.0.0.1:3128 --label duel-pass"; }
    lat_line=$(duel_line "$lat_args")
    rate_line=$(duel_line "$rate_args")
    for ((r = 1; r <= P50_ROUNDS; r++)); do
        order="tcp pass"; [ $((r % 2)) = 0 ] && order="pass tcp"
        declare -A P=()
        for kind in lat rate; do
            for side in $order; do
                if [ "$side" = tcp ]; then
                    a=$lat_args; [ $kind = rate ] && a=$rate_args
                    # shellcheck disable=SC2086 # the arguments are words
                    l=$(timeout -k 5 100 "$LG" $a --proxy "tcp:127.0.0.1:$TCP_PORT" --label duel-tcp 2>>"$RUN/loadgen.stderr")
                else
                    line=$lat_line; [ $kind = rate ] && line=$rate_line
                    l=$(timeout -k 5 120 sh -c "$line" 2>>"$RUN/loadgen.stderr" | grep "mode=")
                fi
                echo "$l" >>"$RUN/raw.txt"
                if [ $kind = lat ]; then P[$side,$kind]=$(kv "$l" p50_us); else P[$side,$kind]=$(kv "$l" rate_per_s); fi
            done
        done
        log "bridge: pair $r ($order): p50 tcp ${P[tcp,lat]} pass ${P[pass,lat]}; rate tcp ${P[tcp,rate]} pass ${P[pass,rate]}"
        DUEL+=("$r|$order|${P[tcp,lat]}|${P[pass,lat]}|${P[tcp,rate]}|${P[pass,rate]}")
    done
fi

section=$RUN/section.md
{
    echo "## Bridge cost"
    echo
    echo "Run $(date '+%F %T %Z') on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)." \
         "One proxy (bench/isolation-proxy.lua, thread mode, unix socket), nginx /small as the upstream;" \
         "connect-latency n=$LAT_N (sequential CONNECT + GET /small + close), connect-rate c=$RATE_C t=${RATE_T}s," \
         "tunnel-throughput $TP each way, idle-tunnels n=$IDLE_K held 2 s (both to blast). MB = 10^6 B."
    echo "cpu and idle = CPU per tunnel and Pss growth per held tunnel of the process tree named in the row" \
         "(the proxy for unix; the bridge alone for builtin and socat)."
    echo
    echo "pass and tcp: the proxy's own process (no bridge); added p50 compares with unix (pass / tcp below the table)."
    echo
    echo "| via | p50 µs | p99 µs | added p50 µs vs unix | p50 / direct | tunnels/s (c=$RATE_C) | rate / direct | rate / unix | rate p99 µs | cpu µs/tunnel | down MB/s | up MB/s | idle KiB/tunnel | held | errors |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for via in "${VIAS[@]}"; do
        added=$(awk -v a="${R[$via,p50]}" -v b="${R[unix,p50]:-}" 'BEGIN { if (a == "" || b == "") print "-"; else printf "%.0f", a - b }')
        [ "$via" = direct ] && added=-
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$via" \
            "${R[$via,p50]:--}" "${R[$via,p99]:--}" "$added" "$(ratio "${R[$via,p50]}" "${R[direct,p50]:-}")" \
            "${R[$via,rate]:--}" "$(ratio "${R[$via,rate]}" "${R[direct,rate]:-}")" \
            "$(ratio "${R[$via,rate]}" "${R[unix,rate]:-}")" "${R[$via,rate_p99]:--}" "${R[$via,cpu]:--}" \
            "${R[$via,tput_down]:--}" "${R[$via,tput_up]:--}" "${R[$via,idle]:--}" "${R[$via,held]:--}" \
            "$(( ${R[$via,lat_err]:-0} + ${R[$via,rate_err]:-0} + ${R[$via,tput_err]:-0} + ${R[$via,idle_err]:-0} ))"
    done
    echo
    if [ -n "${R[pass,rate]:-}" ] && [ -n "${R[tcp,rate]:-}" ]; then
        echo "pass against the proxy's own TCP row: rate $(ratio "${R[pass,rate]}" "${R[tcp,rate]}")x," \
             "p50 $(awk -v a="${R[pass,p50]}" -v b="${R[tcp,p50]}" 'BEGIN { printf "%+.0f", a - b }') µs."
        echo
    fi
    if [ ${#SANDBOX_BRIDGES[@]} -gt 0 ]; then
        echo "The whole sandbox path: the loadgen inside a real deny sandbox (isolation.wrap, bwrap), to the"
        echo "sandbox's 127.0.0.1:3128, through each bridge, to a proxy on the host (accept_listeners 64)."
        echo "cpu: µs per tunnel in the rate window, the proxy's (sampled from the host) plus the bridge's"
        echo "process tree in the sandbox (pass: its idle keeper); the client's own CPU is not counted."
        echo
        echo "| bridge | p50 µs | p99 µs | added p50 µs vs tcp | tunnels/s (c=$RATE_C) | rate / tcp | proxy cpu µs/tunnel | bridge cpu µs/tunnel | all cpu µs/tunnel | down MB/s | up MB/s | errors |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for b in "${SANDBOX_BRIDGES[@]}"; do
            added=$(awk -v a="${S[$b,p50]}" -v b="${R[tcp,p50]}" 'BEGIN { if (a == "" || b == "") print "-"; else printf "%.0f", a - b }')
            all=$(awk -v a="${S[$b,pcpu]:-}" -v b="${S[$b,bcpu]:-0}" 'BEGIN { if (a == "" || a == "-") print "-"; else printf "%.1f", a + b }')
            printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$b" "${S[$b,p50]:--}" "${S[$b,p99]:--}" \
                "$added" "${S[$b,rate]:--}" "$(ratio "${S[$b,rate]}" "${R[tcp,rate]}")" "${S[$b,pcpu]:--}" \
                "${S[$b,bcpu]:-0}" "$all" "${S[$b,down]:--}" "${S[$b,up]:--}" "${S[$b,err]:--}"
        done
        echo
    fi
    if [ ${#DUEL[@]} -gt 0 ]; then
        echo "The pass path against the proxy's TCP row in alternating pairs ($P50_ROUNDS rounds, the order"
        echo "flipping each round): the same loadgen run from the host to the TCP proxy and from inside a deny"
        echo "sandbox through bridge pass; sequential connect-latency n=$LAT_N, then connect-rate c=$RATE_C for ${DUEL_RATE_T} s."
        echo
        echo "| round | order | tcp p50 µs | sandbox pass p50 µs | pass - tcp µs | tcp tunnels/s | sandbox pass tunnels/s | pass / tcp |"
        echo "|---:|---|---:|---:|---:|---:|---:|---:|"
        diffs=(); ratios=()
        for d in "${DUEL[@]}"; do
            IFS='|' read -r r order t p tr pr <<<"$d"
            df=$(awk -v a="$p" -v b="$t" 'BEGIN { if (a == "" || b == "") print "-"; else printf "%+.1f", a - b }')
            rt=$(ratio "$pr" "$tr")
            [ "$df" != - ] && diffs+=("$df")
            [ "$rt" != - ] && ratios+=("$rt")
            echo "| $r | $order | ${t:--} | ${p:--} | $df | ${tr:--} | ${pr:--} | $rt |"
        done
        echo
        echo "Medians over the pairs: added p50 $(median "${diffs[@]}") µs (${#diffs[@]} pairs)," \
             "rate $(median "${ratios[@]}")x the TCP row (${#ratios[@]} pairs)."
        echo
    fi
    echo "socat runs exactly as the seed's launch script does (listen backlog 5, one process per client);"
    echo "Errors for socat under load, if any, are connections reset while its accept queue was full."
    echo
    raw_details "raw loadgen lines" "$RUN/raw.txt"
} >"$section"
publish bridge "$section"
