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
#   deny-pass-noreap  deny-pass with reap = false: the line without the
#                  reaper in front (isolation-bridge --reap 5 --), which ends
#                  the sandbox by its PID namespace; deny-pass minus this row
#                  is what ending by namespace adds to a launch and its end
#   reap-true      isolation-bridge --reap 5 -- true: the reaper's own cost
#                  (its fork, the subreaper's scan of /proc at the end)
#   bare-pass      bwrap (the shared harness's profile) + --unshare-net + the
#                  pass starter (both listeners handed to the real proxy),
#                  which execs /bin/true: what bridge pass adds to a bare
#                  bwrap, without the line's guards, env -i or bash
# The deny-pass line taken apart (isolation.argv of the same spec, the
# pieces cut out of it), to say where its time goes:
#   guards-true      its bwrap alone: every mount, mask and namespace of the
#                    line, /bin/true as the command (no env -i, no shell)
#   guards-bash      the same, the command run by `bash -c -- true` as the
#                    line runs every command
#   env-guards-bash  the same behind the line's `env -i NAME=value...`
#   argv-pass        the whole argv (env -i, bwrap, the pass starter, bash):
#                    the line without its run-time HOME check
#   (deny-pass is argv-pass behind that check)
#   isolate-none     `isolate --network none -- true`, the whole command
#   isolate-deny     `isolate -- true` (deny, pass, its own proxy): what a
#                    user waits for, over the line's own cost
# Not run unless named in STARTUP_NAMES:
#   fork-argv-pass   argv-pass behind a substitution that only prints `env`:
#                    the HOME check's fork without its checks
# and what each group of guards-true costs (guards-true without it, the
# rest unchanged):
#   no-procmasks     the /proc masks (read-only binds, /dev/null over files)
#   no-protect       the protect binds under the workdir
#   no-userns        --unshare-user --disable-userns
#   no-disableuserns --disable-userns only (its nested user namespace)
#   no-capdrop       --cap-drop ALL
#   no-sockbinds     the proxy socket's and the bridge program's binds
# Each wrap line runs from a script file through `sh` (the line needs a
# shell: $HOME tokens); the sh row is that shell's own cost.
#
# --interleave: instead of hyperfine (every run of one row, then the next
# row), bench/interleave.c runs each row once in turn, RUNS times, so that
# a neighbour's burst of load lands on every row alike (median, quartiles,
# min); for the rows' differences on a shared machine.
#
# usage: bench/startup.sh [--runs N] [--out FILE] [--interleave]
set -uo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

RUNS=40
OUT=
INTERLEAVE=
while [ $# -gt 0 ]; do
    case $1 in
        --runs) RUNS=$2; shift ;;
        --out) OUT=$2; shift ;;
        --interleave) INTERLEAVE=1 ;;
        *) sed -n '2,58p' "$0"; exit 2 ;;
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
    if [ -n "${KEEP_WORK:-}" ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
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
for bridge in socat builtin pass pass-noreap; do
    sock=$WORK/proxy.sock
    [ "${bridge%-noreap}" = pass ] && sock=$WORK/pass.sock
    WORKDIR=$WORK/work SOCK=$sock BRIDGE_KIND=${bridge%-noreap} REAP=${bridge#pass-} \
    LUA_CPATH="$REPO/build/?.so;;" lua5.4 -e '
        local isolation = require("isolation")
        local line, err = isolation.wrap({
          config = { mode = "bwrap", network = "deny" }, agent = "bench",
          workdir = os.getenv("WORKDIR"), command = "true",
          proxy_socket = os.getenv("SOCK"), bridge = os.getenv("BRIDGE_KIND"),
          reap = os.getenv("REAP") ~= "noreap",
        })
        if not line then io.stderr:write(tostring(err), "\n") os.exit(1) end
        print(line)' >"$WORK/deny-$bridge.sh" || echo "exit 1" >"$WORK/deny-$bridge.sh"
done
# the pieces of the pass line (see the header); argv's $HOME marker as sh
# would expand it
WORKDIR=$WORK/work SOCK=$WORK/pass.sock OUTDIR=$WORK LUA_CPATH="$REPO/build/?.so;;" lua5.4 -e '
    local isolation = require("isolation")
    local argv = assert(isolation.argv({
      config = { mode = "bwrap", network = "deny" }, agent = "bench",
      workdir = os.getenv("WORKDIR"), command = "true",
      proxy_socket = os.getenv("SOCK"), bridge = "pass",
    }))
    local home = os.getenv("HOME") or "/root"
    -- a kept name ${NAME+NAME=$NAME} stays a run-time token, as the line has it
    local function q(w)
      local n = w:match("^%${([%w_]+)%+[%w_]+=%$[%w_]+}$")
      if n then return "${" .. n .. "+\"" .. n .. "=$" .. n .. "\"}" end
      return "\039" .. w:gsub("%$HOME", home):gsub("\039", "\039\\\039\039") .. "\039"
    end
    local bwrap, stop
    for i, w in ipairs(argv) do
      if w == "bwrap" and not bwrap then bwrap = i end
      if w == "--" and bwrap and not stop then stop = i end
    end
    local function put(name, first, last, tail)
      local words = {}
      for i = first, last do words[#words + 1] = q(argv[i]) end
      local f = assert(io.open(os.getenv("OUTDIR") .. "/" .. name .. ".sh", "w"))
      f:write(table.concat(words, " "), tail and (" " .. tail) or "", "\n")
      f:close()
    end
    put("guards-true", bwrap, stop, "/bin/true")
    put("guards-bash", bwrap, stop, "bash -c -- true")
    put("env-guards-bash", 1, stop, "bash -c -- true")
    put("argv-pass", 1, #argv)
    -- the HOME check reduced to its fork: a substitution that only prints env
    do
      local words = { "\"$(command printf %s env)\"" }
      for i = 2, #argv do words[#words + 1] = q(argv[i]) end
      local f = assert(io.open(os.getenv("OUTDIR") .. "/fork-argv-pass.sh", "w"))
      f:write(table.concat(words, " "), "\n")
      f:close()
    end
    -- guards-true without one group of options each (what that group costs)
    local arity = { ["--ro-bind"] = 2, ["--ro-bind-try"] = 2, ["--bind"] = 2, ["--bind-try"] = 2,
      ["--dev"] = 1, ["--proc"] = 1, ["--tmpfs"] = 1, ["--chdir"] = 1, ["--cap-drop"] = 1, ["--setenv"] = 2 }
    local work = os.getenv("WORKDIR")
    local groups = {
      procmasks = function(o) return o[3] and o[3]:match("^/proc/") end,
      protect = function(o) return o[3] and o[3]:sub(1, #work + 1) == work .. "/" end,
      userns = function(o) return o[1] == "--unshare-user" or o[1] == "--disable-userns" end,
      disableuserns = function(o) return o[1] == "--disable-userns" end,
      capdrop = function(o) return o[1] == "--cap-drop" end,
      sockbinds = function(o) return o[3] == "/run/isolation/proxy.sock" or (o[2] or ""):match("isolation%-bridge$") end,
    }
    for name, drop in pairs(groups) do
      local words, i = { "bwrap" }, bwrap + 1
      while i < stop do
        local o = {}
        for k = i, i + (arity[argv[i]] or 0) do o[#o + 1] = argv[k] end
        if not drop(o) then for _, w in ipairs(o) do words[#words + 1] = q(w) end end
        i = i + #o
      end
      local f = assert(io.open(os.getenv("OUTDIR") .. "/no-" .. name .. ".sh", "w"))
      f:write(table.concat(words, " "), " -- /bin/true\n")
      f:close()
    end' || { echo "startup.sh: the pass line could not be taken apart" >&2; exit 1; }
BW="bwrap --ro-bind /usr /usr --ro-bind /etc /etc --ro-bind-try /bin /bin --ro-bind-try /lib /lib \
--ro-bind-try /lib64 /lib64 --ro-bind-try /sbin /sbin --dev /dev --proc /proc --tmpfs /tmp \
--unshare-pid --unshare-ipc --unshare-uts --die-with-parent"
echo "$BW --unshare-net --bind $WORK/proxy.sock /run/isolation/proxy.sock --ro-bind $BRIDGE $BRIDGE -- \
bash -c '$BRIDGE 3128 /run/isolation/proxy.sock && exec true'" >"$WORK/bare-builtin.sh"
echo "$BW --unshare-net --ro-bind $WORK/pass.sock /run/isolation/proxy.sock --ro-bind $BRIDGE $BRIDGE -- \
$BRIDGE --pass 3128,1080 /run/isolation/proxy.sock /bin/true" >"$WORK/bare-pass.sh"
echo "exec true" >"$WORK/sh.sh"
echo "exec $BRIDGE --reap 5 -- true" >"$WORK/reap-true.sh"
echo "$BW --unshare-net -- /bin/true" >"$WORK/bwrap-net.sh"
# isolate itself, the command line a user types: Lua, the checks before
# the launch, its session manager (isolation.session's launch_spec), the
# line, the end checks and the summary
echo "exec $REPO/bin/isolate --workdir $WORK/work --network none -- true 2>/dev/null" >"$WORK/isolate-none.sh"
echo "exec $REPO/bin/isolate --workdir $WORK/work -- true 2>/dev/null" >"$WORK/isolate-deny.sh"

read -ra NAMES <<<"${STARTUP_NAMES:-sh reap-true bwrap-net bare-builtin bare-pass deny-socat deny-builtin deny-pass deny-pass-noreap guards-true guards-bash env-guards-bash argv-pass isolate-none isolate-deny}"
if [ -n "$INTERLEAVE" ]; then
    cc -std=c11 -Wall -Wextra -Werror -O2 -o "$WORK/interleave" "$REPO/bench/interleave.c" || exit 1
    files=()
    for name in "${NAMES[@]}"; do files+=("$WORK/$name.sh"); done
    log "startup: ${NAMES[*]}, interleaved"
    "$WORK/interleave" "$RUNS" 3 "${files[@]}" >"$WORK/interleave.txt" || exit 1
    ref=$(sed -n "s|^$WORK/bwrap-net.sh median=\([^ ]*\).*|\1|p" "$WORK/interleave.txt")
    {
        echo "## Deny launch start cost, interleaved"
        echo
        echo "Run $(date '+%F %T %Z') on $(nproc) cores, $RUNS interleaved runs after 3 warm-ups" \
             "(bench/interleave.c: each run starts every row once, in turn), load average before:" \
             "$(cut -d' ' -f1-3 /proc/loadavg)."
        echo
        echo "| name | median ms | p25 ms | p75 ms | min ms | median / bwrap-net | failed |"
        echo "|---|---:|---:|---:|---:|---:|---:|"
        for name in "${NAMES[@]}"; do
            l=$(grep "^$WORK/$name.sh " "$WORK/interleave.txt")
            m=$(kv "$l" median)
            echo "| $name | ${m:--} | $(kv "$l" p25) | $(kv "$l" p75) | $(kv "$l" min) | $(ratio "$m" "$ref") | $(kv "$l" failed) |"
        done
    } >"$WORK/section.md"
else
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
fi
{
    echo
    echo "deny-*: the whole launch line isolation.wrap builds (bwrap, binds, the script that starts the"
    echo "bridge and waits until it listens, the proxy variables, exec of the command), run by sh."
} >>"$WORK/section.md"
publish "bridge-startup${INTERLEAVE:+-interleaved}" "$WORK/section.md"
