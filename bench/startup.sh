#!/usr/bin/env bash
# bench/startup.sh - start cost of a network-deny bwrap launch with each
# bridge, measured with hyperfine next to the shared startup.sh rows
# (bwrap-socat-ready is the seed's relay, waited for by polling).
#
#   bwrap-net      the shared harness's bwrap profile + --unshare-net, /bin/true
#                  (this run's reference)
#   deny-socat     isolation.wrap{bridge = "socat"}, command `true`
#   deny-builtin   isolation.wrap{bridge = "builtin"}, command `true`
#   deny-pass      isolation.wrap{bridge = "pass"}, command `true`, against a
#                  real proxy (bench/isolation-proxy.lua --accept-listeners):
#                  the handover needs one that answers
#   bare-builtin   bwrap (the shared harness's profile) + --unshare-net +
#                  isolation-bridge, then `exec true`: the bridge's own cost
#                  without the launch script's extras
# Each wrap line runs from a script file through `sh` (the line needs a
# shell: $HOME tokens); the sh row is that shell's own cost.
#
# usage: bench/startup.sh [--runs N] [--out FILE]
set -uo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

RUNS=40
OUT=
while [ $# -gt 0 ]; do
    case $1 in
        --runs) RUNS=$2; shift ;;
        --out) OUT=$2; shift ;;
        *) sed -n '2,19p' "$0"; exit 2 ;;
    esac
    shift
done
command -v hyperfine >/dev/null || { echo "startup.sh: hyperfine missing (run the harness's setup.sh)" >&2; exit 2; }
[ -n "$OUT" ] && { harness_ready || exit 2; }

WORK=$(mktemp -d /tmp/isolation-startup.XXXXXX)
LISTENER=
cleanup() {
    [ -n "$LISTENER" ] && kill "$LISTENER" 2>/dev/null && wait "$LISTENER" 2>/dev/null
    [ -n "${PASS_PROXY:-}" ] && kill "$PASS_PROXY" 2>/dev/null && wait "$PASS_PROXY" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# a real listening unix socket stands in for the proxy's
socat "UNIX-LISTEN:$WORK/proxy.sock,fork" /dev/null 2>/dev/null &
LISTENER=$!
for _ in $(seq 50); do [ -S "$WORK/proxy.sock" ] && break; sleep 0.1; done
mkdir -p "$WORK/work"
# each launch's listener is let go when its sandbox ends: 64 leave room
lua5.4 "$REPO/bench/isolation-proxy.lua" --unix "$WORK/pass.sock" --accept-listeners 64 >/dev/null 2>&1 &
PASS_PROXY=$!
for _ in $(seq 50); do [ -S "$WORK/pass.sock" ] && break; sleep 0.1; done

BRIDGE=$REPO/build/isolation-bridge
for bridge in socat builtin pass; do
    sock=$WORK/proxy.sock
    [ "$bridge" = pass ] && sock=$WORK/pass.sock
    WORKDIR=$WORK/work SOCK=$sock BRIDGE_KIND=$bridge \
    LUA_CPATH="$REPO/build/?.so;;" lua5.4 -e '
        local isolation = require("isolation")
        local line, err = isolation.wrap({
          config = { mode = "bwrap", network = "deny" }, agent = "bench",
          workdir = os.getenv("WORKDIR"), command = "true",
          proxy_socket = os.getenv("SOCK"), bridge = os.getenv("BRIDGE_KIND"),
        })
        if not line then io.stderr:write(tostring(err), "\n") os.exit(1) end
        print(line)' >"$WORK/deny-$bridge.sh" || echo "exit 1" >"$WORK/deny-$bridge.sh"
done
BW="bwrap --ro-bind /usr /usr --ro-bind /etc /etc --ro-bind-try /bin /bin --ro-bind-try /lib /lib \
--ro-bind-try /lib64 /lib64 --ro-bind-try /sbin /sbin --dev /dev --proc /proc --tmpfs /tmp \
--unshare-pid --unshare-ipc --unshare-uts --die-with-parent"
echo "$BW --unshare-net --bind $WORK/proxy.sock /run/isolation/proxy.sock --ro-bind $BRIDGE $BRIDGE -- \
bash -c '$BRIDGE 3128 /run/isolation/proxy.sock && exec true'" >"$WORK/bare-builtin.sh"
echo "exec true" >"$WORK/sh.sh"
echo "$BW --unshare-net -- /bin/true" >"$WORK/bwrap-net.sh"

read -ra NAMES <<<"${STARTUP_NAMES:-sh bwrap-net bare-builtin deny-socat deny-builtin deny-pass}"
{
    echo "## Deny launch start cost"
    echo
    echo "Run $(date '+%F %T %Z') on $(nproc) cores, $RUNS runs after 3 warm-ups, $(hyperfine --version)," \
         "load average before: $(cut -d' ' -f1-3 /proc/loadavg). Compare with bwrap-net and"\
         "bwrap-socat-ready in the shared table."
    echo
    echo "| name | median ms | mean ms | min ms | max ms |"
    echo "|---|---:|---:|---:|---:|"
} >"$WORK/section.md"
for name in "${NAMES[@]}"; do
    log "startup: $name"
    if hyperfine -N --warmup 3 --runs "$RUNS" --time-unit millisecond --export-json "$WORK/$name.json" \
        "sh $WORK/$name.sh" >/dev/null 2>"$WORK/$name.err"; then
        res=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]
print("| %.2f | %.2f | %.2f | %.2f |" % tuple(1e3*r[k] for k in ("median","mean","min","max")))' "$WORK/$name.json")
    else
        res="| failed: $(head -c 200 "$WORK/$name.err" | tr '\n|' '  ') | - | - | - |"
    fi
    echo "| $name $res" >>"$WORK/section.md"
done
{
    echo
    echo "deny-*: the whole launch line isolation.wrap builds (bwrap, binds, the script that starts the"
    echo "bridge and waits until it listens, the proxy variables, exec of the command), run by sh."
} >>"$WORK/section.md"
cat "$WORK/section.md"
if [ -n "$OUT" ]; then
    put_section "$OUT" bridge-startup "$WORK/section.md"
    log "startup: results written to $OUT"
fi
