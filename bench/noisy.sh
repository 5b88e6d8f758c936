#!/usr/bin/env bash
# bench/noisy.sh - the noisy neighbour: two session proxies, A and B, in
# one orchestrator process (spec/support/flood_orchestrator.lua, the module's
# thread mode, as the session manager runs them), while A's agent (a process
# of its own, spec/support/flood_client.lua) floods A. B makes sequential
# CONNECT+echo exchanges (20 ms apart) before the flood (quiet) and during
# it; the row gives B's p50 and max for each attack, from the same run.
#   64 / 512 bulk tunnels      CONNECT tunnels kept full, to a sink
#   1,024 / 2,048 x 30 GETs    connections of 30 pipelined forward GETs,
#                              again and again (20 batches at most)
#   8 slow names a second      CONNECTs to new names whose name server never
#                              answers (issue 26): the row runs in a network
#                              namespace (spec/support/dns_netns.sh, root)
#                              with the orchestrator's stub as name server;
#                              B alternates a name in /etc/hosts and one the
#                              stub answers
# Each attack runs twice: B on a loop thread of its own (what two sessions
# get: proxies spread over the pool of loop threads), and B on A's loop
# (what sessions past the pool's size get: only the per-pass byte budget
# between them). Goal (issue 20): B's p50 within 2x its quiet p50 and its
# max under 20 ms. Every load is bounded (COUNT connections, the agent ends
# after HOLD s, the orchestrator after 60 s); unix sockets and loopback.
#
# usage: bench/noisy.sh [--out FILE]   (QUICK=1: 30 exchanges of B per row,
#        else 100; NOISY_ROWS="bulk:64 pipe:1024 dns:8": only those attacks;
#        NOISY_SHARE=0: no shared-loop rows; NOISY_BASE=DIR: a third row per
#        attack with DIR/isolation.so, another build, e.g. one from before)
set -uo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

out_arg "$@"
if [ -n "$QUICK" ]; then B_N=${B_N:-30}; else B_N=${B_N:-100}; fi
ROWS=${NOISY_ROWS:-bulk:64 bulk:512 pipe:1024 pipe:2048 dns:8}
SHARE_ROWS=${NOISY_SHARE:-1}
OUT=${OUT:-$REPO/bench/results/bench-$(date +%F).md}
# The hold covers the quiet series, B's series and a margin.
HOLD=$(((B_N * 60 + 999) / 1000 + 8))

if [ ! -f "$REPO/build/isolation.so" ]; then
    echo "noisy.sh: build first (make)" >&2; exit 2
fi
# put_section, from the shared harness (sourced, read-only)
# shellcheck source=/dev/null
. "$SHARED/bench/lib.sh" || { echo "noisy.sh: no shared harness at $SHARED/bench (set SHARED=...)" >&2; exit 2; }
command -v lua5.4 >/dev/null || { echo "noisy.sh: lua5.4 missing" >&2; exit 2; }

load() { cut -d' ' -f1-3 /proc/loadavg; }

BASE=${NOISY_BASE:-}
[ -z "$BASE" ] || [ -f "$BASE/isolation.so" ] || { echo "noisy.sh: no $BASE/isolation.so" >&2; exit 2; }

# run MODE COUNT SHARE [SO_DIR]: the orchestrator's "key value" lines
# (MODE dns: the orchestrator's slowdns, in a network namespace of its own)
run() {
    local dir out mode=$1 wrap=
    dir=$(mktemp -d)
    if [ "$mode" = dns ]; then
        mode=slowdns
        mkdir "$dir/ns"
        wrap="spec/support/dns_netns.sh $dir/ns"
    fi
    # shellcheck disable=SC2086 # wrap: words
    out=$(cd "$REPO" && FLOOD_B_N=$B_N FLOOD_HOLD_S=$HOLD FLOOD_SHARE=$3 \
        LUA_PATH="lua/?.lua;spec/?.lua;;" LUA_CPATH="${4:-build}/?.so;;" \
        timeout 90 $wrap lua5.4 spec/support/flood_orchestrator.lua "$dir" "$mode" "$2" $(($2 * 2 + 64)) 2>&1)
    rm -rf "$dir"
    printf '%s\n' "$out"
}
val() { sed -n "s/^$2 //p" <<<"$1" | head -1; }

label() {
    case $1 in
        bulk:*) printf '%s bulk tunnels' "${1#bulk:}" ;;
        pipe:1024) printf '1,024 connections x 30 pipelined GETs' ;;
        pipe:2048) printf '2,048 connections x 30 pipelined GETs' ;;
        pipe:*) printf '%s connections x 30 pipelined GETs' "${1#pipe:}" ;;
        dns:*) printf '%s new names a second, name server never answers' "${1#dns:}" ;;
    esac
}

TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
log "noisy neighbour (B: $B_N exchanges per row) -> $OUT"
{
    echo "## Noisy neighbour: session B while session A floods its own proxy"
    echo
    echo "$(date -u '+%F %H:%M UTC'), $(nproc) CPUs, ${QUICK:+QUICK, }B: $B_N sequential CONNECT+echo"
    echo "exchanges 20 ms apart per row, before (quiet) and during A's flood, both"
    echo "proxies in one orchestrator process (thread mode, as the session manager"
    echo "runs them); A's agent a process of its own. Load average (1, 5, 15 min)"
    echo "at the start: $(load). Goal: B's p50 within 2x its quiet p50, max under 20 ms."
    echo
    echo "| A does | B's loop | B quiet p50 ms | B p50 ms | B max ms | p50 / quiet | B ok | A MB/s | goal | load avg after |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$TMP"
rc=0
for row in $ROWS; do
    for share in 0 $([ "$SHARE_ROWS" = 1 ] && echo 1) ${BASE:+base}; do
        mode=${row%%:*} count=${row#*:}
        case $share in
            1) where="A's (shared)" ;;
            base) where="base build's" ;;
            *) where="its own" ;;
        esac
        log "  A: $(label "$row"); B on $where loop"
        if [ "$share" = base ]; then r=$(run "$mode" "$count" 0 "$BASE"); else r=$(run "$mode" "$count" "$share"); fi
        q=$(val "$r" quiet_p50_ms) p=$(val "$r" b_p50_ms) m=$(val "$r" b_max_ms)
        ok=$(val "$r" b_ok) mb=$(val "$r" a_mb_per_s)
        if [ -z "$p" ] || [ -z "$q" ]; then
            log "    no result: $(tail -3 <<<"$r" | tr '\n' ' ')"
            printf '| %s | %s | - | - | - | - | - | - | failed | %s |\n' "$(label "$row")" "$where" "$(load)" >>"$TMP"
            rc=1
            continue
        fi
        goal=$(awk -v q="$q" -v p="$p" -v m="$m" 'BEGIN { print (p <= 2 * q && m < 20) ? "met" : "missed" }')
        [ "$mode" = bulk ] || mb=-
        printf '| %s | %s | %s | %s | %s | %s | %s/%s | %s | %s | %s |\n' "$(label "$row")" "$where" \
            "$q" "$p" "$m" "$(ratio "$p" "$q")" "$ok" "$B_N" "$mb" "$goal" "$(load)" >>"$TMP"
        log "    quiet p50 $q ms; under load p50 $p ms, max $m ms ($goal)"
    done
done
{
    echo
    echo "Quiet p50: B's own, measured in the same orchestrator just before A's"
    echo "flood starts; \"its own\" loop: B on a different loop thread of the pool"
    echo "(2 sessions, 2 CPUs); \"A's (shared)\": filler proxies took the pool's other"
    echo "loops first, so B shares A's loop thread (only the per-pass byte budget"
    base_note=
    [ -n "$BASE" ] && base_note="; \"base build's\": the same with $BASE/isolation.so"
    echo "between them)$base_note."
    echo "The machine is shared: compare rows of one run."
} >>"$TMP"
put_section "$OUT" noisy-neighbour "$TMP"
log "results in $OUT"
exit $rc
