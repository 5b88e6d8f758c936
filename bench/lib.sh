#!/usr/bin/env bash
# bench/lib.sh - shared by the project's bench scripts (sourced, not run).
# The shared harness (../shared/bench) is read-only: it is copied to a
# scratch directory and its C tools are built there.

REPO=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
SHARED=${SHARED:-$REPO/../shared}
BENCH_RUN=${BENCH_RUN:-/tmp/isolation-bench}
HARNESS=$BENCH_RUN/harness
ASRT_DIR=${ASRT_DIR:-/tmp/bench-asrt}
export ASRT_DIR

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

# harness_ready: a writable copy of $SHARED/bench in $HARNESS, tools built.
harness_ready() {
    [ -d "$SHARED/bench" ] || { echo "bench: no shared harness at $SHARED/bench (set SHARED=...)" >&2; return 1; }
    if [ ! -x "$HARNESS/loadgen" ] || [ "$SHARED/bench/run.sh" -nt "$HARNESS/run.sh" ]; then
        rm -rf "$HARNESS"
        mkdir -p "$BENCH_RUN"
        cp -r "$SHARED/bench" "$HARNESS" && chmod -R u+w "$HARNESS" || return 1
    fi
    local b missing=
    for b in nginx tinyproxy squid wrk hyperfine socat bwrap ss python3; do
        command -v "$b" >/dev/null || missing="$missing $b"
    done
    if [ -n "$missing" ]; then
        log "missing:$missing; running the harness's setup.sh"
        "$HARNESS/setup.sh" || return 1
    elif command -v npm >/dev/null && [ ! -d "$ASRT_DIR/node_modules/@anthropic-ai/sandbox-runtime" ]; then
        log "installing ASRT for the asrt rows (setup.sh, no apt)"
        SKIP_APT=1 "$HARNESS/setup.sh" || log "ASRT setup failed: the asrt rows will be skipped"
    fi
    # ASRT's SandboxManager refuses to start without ripgrep (not in setup.sh)
    if command -v node >/dev/null && ! command -v rg >/dev/null; then
        if [ "$(id -u)" = 0 ]; then
            log "installing ripgrep (ASRT needs it)"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ripgrep >/dev/null ||
                log "ripgrep install failed: the asrt rows will be skipped"
        else
            log "ripgrep (rg) missing: the asrt rows will be skipped"
        fi
    fi
    make -s -C "$HARNESS" || return 1
    # shellcheck source=/dev/null
    . "$HARNESS/lib.sh"        # put_section
}

# kv LINE KEY: the value of KEY=... in a loadgen line
kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }

# ratio A B: A/B with two decimals, or -
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) print "-";
        else printf "%.2f", a / b }'
}

# median V...: the median of the numbers given (signed, decimals), or -
median() {
    [ $# -gt 0 ] || { echo -; return; }
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%s%.2f", (m > 0 && v[1] ~ /^[+-]/) ? "+" : "", m }'
}

# listener_pid PORT: pid of the process listening on 127.0.0.1:PORT
listener_pid() {
    ss -Hltnp "sport = :$1" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1
}

port_free() { ! ss -Hltn "sport = :$1" | grep -q .; }

# out_arg "$@": the one option the project's scripts take, --out FILE
# (sets OUT); anything else prints the script's header comment and exits 2.
# QUICK=0 counts as unset.
out_arg() {
    OUT=
    while [ $# -gt 0 ]; do
        case $1 in
            --out) OUT=$2; shift ;;
            *) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 2 ;;
        esac
        shift
    done
    QUICK=${QUICK:-}
    [ "$QUICK" = 0 ] && QUICK=
}

# The processes a script starts go into PIDS; kill_pids (the scripts' EXIT
# trap) ends and reaps them all.
PIDS=()
kill_pids() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    return 0
}

# wait_for CMD...: until CMD succeeds, up to 10 s
wait_for() {
    local _
    for _ in $(seq 100); do "$@" && return 0; sleep 0.1; done
    return 1
}

# raw_details SUMMARY FILE: FILE's lines, folded away under SUMMARY
raw_details() {
    echo "<details><summary>$1</summary>"
    echo
    echo '```'
    cat "$2"
    echo '```'
    echo "</details>"
}

# publish NAME SECTION_FILE: the section on stdout, and in $OUT (when
# given) in place of that file's section NAME
publish() {
    cat "$2"
    if [ -n "$OUT" ]; then
        mkdir -p "$(dirname "$OUT")"
        put_section "$OUT" "$1" "$2"
        log "$1: results written to $OUT"
    fi
}
