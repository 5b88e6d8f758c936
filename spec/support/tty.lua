-- The terminal probe of the TIOCSTI specs (seccomp_spec, session_spec): a
-- perl script that tries TIOCSTI, TIOCSTI with high request bits and
-- TIOCLINUX on its stdin, run at a real terminal made by script(1), and the
-- answers it prints, one "KEY: value" line each.
local luassert = require("luassert")
local helpers = require("helpers")
local cli = require("support.cli")

local M = {}

-- $1: the ioctl syscall number of this machine for the high-bits attempt
-- (perl's own ioctl() truncates the request to 32 bits before the kernel
-- could), or empty to skip it.
local PROBE_PL = [[
my $nr = shift;
my $c = "x";
print "STI: ", (ioctl(STDIN, 0x5412, $c) ? "INJECTED" : "refused: $!"), "\n";
if ($nr) {
  $c = "x";
  print "HIGH: ", (syscall($nr, 0, 0x100005412, $c) == -1 ? "refused: $!" : "INJECTED"), "\n";
} else {
  print "HIGH: skipped\n";
}
$c = "\x0c";
print "LINUX: ", (ioctl(STDIN, 0x541C, $c) ? "accepted" : "refused: $!"), "\n";
]]

local PROBE_SH = [[
export LC_ALL=C
perl probe.pl "$1"
if size=$(stty size); then echo "WINSZ: ok $size"; else echo "WINSZ: failed"; fi
# in a child that inherited what this bash inherited (bash's own 255, the
# script file, is close-on-exec); the glob's directory descriptor is closed
# by the time -e looks
sh -c 'if [ -e /proc/$$/fd/3 ]; then echo "FD3: open"; else echo "FD3: closed"; fi
for f in /proc/$$/fd/*; do n=${f##*/}; [ -e "$f" ] && [ "$n" -gt 2 ] && echo "LEAK: $n"; done'
echo "DONE: ok"
]]

local IOCTL_NR = { x86_64 = 16, aarch64 = 29 }

M.EPERM = "refused: Operation not permitted"

--- uname -m.
function M.machine()
  local _, out = helpers.run("uname -m")
  return (out:gsub("%s+$", ""))
end

--- True when script(1) is there; else prints why the caller skips.
function M.have_script()
  if helpers.run("command -v script") ~= 0 then
    io.stderr:write("SKIP (terminal): script(1) is not installed\n")
    return false
  end
  return true
end

--- Runs `line` (a shell line, run by script's sh: CI has no SHELL, so
--- `exec` what must own the terminal) at a new terminal in `dir`; returns
--- the probe's answers as a table, and the whole output for messages.
function M.at_terminal(line, dir)
  local p = cli.spawn({ "script", "-qec", line, "/dev/null" }, { cwd = dir, env = { "TMPDIR=" .. dir } })
  local status, out, err = p.wait(60)
  out = out:gsub("\r", "")
  local answers = {}
  for key, value in out:gmatch("(%u+%d?): ([^\n]*)") do
    if answers[key] then answers[key] = answers[key] .. "," .. value else answers[key] = value end
  end
  return answers, ("status %s, out %q, err %q"):format(tostring(status), out, err)
end

--- Writes probe.pl and probe.sh into dir; the probe runs as
--- `bash probe.sh <probe_args()>` with dir as its working directory.
function M.write_probe(dir)
  helpers.write(dir .. "/probe.pl", PROBE_PL)
  helpers.write(dir .. "/probe.sh", PROBE_SH)
end

--- The probe's argument: this machine's ioctl number, or "" (said on stderr).
function M.probe_args()
  local nr = IOCTL_NR[M.machine()]
  if not nr then io.stderr:write("SKIP (high-bits request): no ioctl number known for " .. M.machine() .. "\n") end
  return nr and tostring(nr) or ""
end

--- What the filter must give inside a sandbox.
function M.assert_refused(a, all)
  luassert.are.equal(M.EPERM, a.STI, all)
  if a.HIGH ~= "skipped" then luassert.are.equal(M.EPERM, a.HIGH, all) end
  -- EPERM, not what the pty driver says (ENOTTY): the filter answered first
  luassert.are.equal(M.EPERM, a.LINUX, all)
  luassert.truthy((a.WINSZ or ""):match("^ok %d+ %d+$"), all)
  luassert.are.equal("closed", a.FD3, all)
  luassert.are.equal("ok", a.DONE, all)
end

return M
