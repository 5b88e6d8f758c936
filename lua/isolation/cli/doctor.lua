-- isolation.cli.doctor: `isolate doctor`, the preflight table and its
-- verdict.
local isolation = require("isolation")
local textmod = require("isolation.text")
local common = require("isolation.cli.common")

local die_usage = common.die_usage

-- The preflight table; exit 0 when a bwrap launch with the network denied
-- works here, 1 when it does not (the first failed check's fix says why).
local function doctor_main(args)
  if args[1] == "--help" then
    io.stdout:write([[
Usage: isolate doctor [--proc-sys DIR] [--bwrap PATH]

Probes what this machine can do (namespaces, seccomp, the bridges, a real
deny launch, limits, docker, podman) and prints one line per check: ok,
warn (failed, but optional or handled by the defaults: TIOCSTI, which the
seccomp filter refuses; limits; docker, podman) or FAIL (isolate's default
launch needs it), with a fix for each that is not ok. Exits 1 when a check
FAILs, 0 otherwise (warnings included). --proc-sys reads the kernel settings from a copy of
another machine's /proc/sys; --bwrap probes that bwrap.
]])
    return 0
  end
  -- --proc-sys and --bwrap check a diagnosis: another machine's settings
  -- (a copy of its /proc/sys) or another bwrap.
  local opts, i = {}, 1
  while args[i] do
    local a, v = args[i], args[i + 1]
    if a == "--proc-sys" or a == "--bwrap" then
      if not v then die_usage("doctor: " .. a .. " needs a value") end
      opts[a == "--proc-sys" and "proc_sys" or "bwrap"] = v
      i = i + 2
    else
      die_usage("doctor: unexpected argument " .. a .. " (options: --proc-sys DIR, --bwrap PATH)")
    end
  end
  local preflight = require("isolation.preflight")
  local checks = isolation.preflight(opts)
  -- the probes' details quote what bwrap and the kernel said: escaped too
  io.stdout:write(textmod.escape_lines(preflight.format(checks)))
  local works = preflight.deny_works(checks)
  local fails, warns = preflight.counts(checks)
  local function n(k, word) return k .. " " .. word .. (k == 1 and "" or "s") end
  local warned = warns > 0 and (", " .. n(warns, "warning")) or ""
  if not works then
    io.stdout:write("isolate doctor: a bwrap sandbox with the network denied does NOT work here (", n(fails, "check"),
      " failed", warned, ")\n")
  elseif fails > 0 then
    io.stdout:write("isolate doctor: a bwrap sandbox with the network denied works here, but ", n(fails, "check"),
      " failed that isolate's defaults need", warned, "\n")
  else
    io.stdout:write("isolate doctor: a bwrap sandbox with the network denied works here",
      warns > 0 and (" (" .. n(warns, "warning") .. ": optional, or handled by the defaults)") or "", "\n")
  end
  -- a warning is no failure: the status follows the failed checks alone
  return fails > 0 and 1 or 0
end

return doctor_main
