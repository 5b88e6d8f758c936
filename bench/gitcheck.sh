#!/usr/bin/env bash
# bench/gitcheck.sh - the cost of the end check of git directories
# (lua/isolation/gitcheck.lua, run by isolate and the session manager after
# each session): the walk of a workdir holding a repository of 100,000
# objects (loose, then the same in one pack) and one holding 100 nested
# repositories, each timed as the end of a session that changed nothing
# (start = now) and as one where everything counts as changed (start = 0:
# every ref read, every config parsed). Prints ms (median of RUNS, default
# 5; QUICK=1: 3).
#
# usage: bench/gitcheck.sh [--out FILE]   (GITCHECK_OBJECTS=N: objects in the
#        large repository, default 100000)
set -uo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

out_arg "$@"
RUNS=${RUNS:-5}; [ -n "$QUICK" ] && RUNS=3
N=${GITCHECK_OBJECTS:-100000}
DIR=$(mktemp -d /tmp/isolation-bench-gitcheck.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
GIT="git -c user.email=a@example.com -c user.name=a -c init.defaultBranch=main"

log "gitcheck: a repository of $N objects (fast-import)"
mkdir -p "$DIR/pack" && (cd "$DIR/pack" && $GIT init -q . &&
    # N/2 blobs and N/2 commits, each commit a tree of one blob
    awk -v n="$((N / 3))" 'BEGIN {
        for (i = 1; i <= n; i++) {
            printf "blob\nmark :%d\ndata %d\n%d\n", i, length(i "") + 1, i
            printf "commit refs/heads/main\ncommitter a <a@example.com> %d +0000\ndata 1\nx\n", 1000000000 + i
            printf "M 100644 :%d f\n\n", i
        }
    }' | $GIT fast-import --quiet && $GIT reset -q --hard main) || exit 1
objects=$(git -C "$DIR/pack" count-objects -v | awk '/^in-pack:/ { print $2 }')
log "gitcheck: the same objects loose"
mkdir -p "$DIR/loose" && (cd "$DIR/loose" && $GIT init -q . &&
    $GIT unpack-objects -q < "$(ls "$DIR"/pack/.git/objects/pack/*.pack)" &&
    cp "$DIR/pack/.git/refs/heads/main" .git/refs/heads/main 2>/dev/null ||
    git -C "$DIR/pack" rev-parse main > .git/refs/heads/main) || exit 1
(cd "$DIR/loose" && $GIT reset -q --hard main) || exit 1
loose=$(git -C "$DIR/loose" count-objects -v | awk '/^count:/ { print $2 }')
log "gitcheck: 100 nested repositories"
mkdir -p "$DIR/nested" && (cd "$DIR/nested" && $GIT init -q . &&
    for i in $(seq 100); do
        $GIT init -q "r$i" && echo "$i" > "r$i/f" && $GIT -C "r$i" add f && $GIT -C "r$i" commit -q -m "$i"
    done) || exit 1

measure() { # workdir start -> median ms
    LUA_PATH="$REPO/lua/?.lua;;" LUA_CPATH="$REPO/build/?.so;;" lua5.4 - "$1" "$2" "$RUNS" <<'LUA'
local uv = require("luv")
local gitcheck = require("isolation.gitcheck")
local wd, start, runs = arg[1], arg[2], tonumber(arg[3])
local t = {}
for i = 1, runs do
  local s = start == "now" and (uv.gettimeofday()) or 0
  local t0 = uv.hrtime()
  local moved, failed, _, cut = gitcheck.check(wd, s, "bench" .. i)
  t[i] = (uv.hrtime() - t0) / 1e6
  assert(#moved == 0 and #failed == 0 and not cut, "the bench's repositories must pass")
end
table.sort(t)
print(string.format("%.1f", t[(runs + 1) // 2]))
LUA
}

{
    echo
    echo "## The end check of git directories ($(date +%F), bench/gitcheck.sh, median of $RUNS)"
    echo
    echo "| workdir | nothing changed (ms) | everything counts as changed (ms) |"
    echo "| --- | ---: | ---: |"
    echo "| one repository, $loose loose objects | $(measure "$DIR/loose" now) | $(measure "$DIR/loose" 0) |"
    echo "| one repository, $objects objects in a pack | $(measure "$DIR/pack" now) | $(measure "$DIR/pack" 0) |"
    echo "| 100 nested repositories | $(measure "$DIR/nested" now) | $(measure "$DIR/nested" 0) |"
} | if [ -n "$OUT" ]; then tee -a "$OUT"; else cat; fi
