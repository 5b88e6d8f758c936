-- Helpers for the launch specs: host-side background listeners (started
-- and ended by pid), bounded waits, and running a wrap() line.
local helpers = require("helpers")

local support = {}
local q = helpers.shquote

--- Starts a shell command in the background on the host; returns its pid.
function support.start(cmdline)
  local code, out, err = helpers.run(cmdline .. " >/dev/null 2>&1 & echo $!")
  assert(code == 0, err)
  return assert(tonumber(out:match("%d+")), "no pid")
end

--- Ends a process this spec started, by its pid.
function support.stop(pid)
  if pid then helpers.run("kill " .. pid .. " 2>/dev/null; true") end
end

--- Waits (bounded, 10 s) until `test_expr` (a shell test) holds.
function support.wait_until(test_expr)
  local code = helpers.run("i=0; until " .. test_expr .. "; do i=$((i+1)); "
    .. "[ $i -ge 3000 ] && exit 1; sleep 0.01; done")
  return code == 0
end

--- Runs a wrap() line with /bin/sh under the given HOME.
function support.run_line(line, home)
  return helpers.run("HOME=" .. q(home) .. " /bin/sh -c " .. q(line))
end

return support
