#!/usr/bin/env lua5.4
-- The scheduler's rule for queued task attempts (`lua5.4 examples/scheduler.lua`
-- from the repo root): the project default applies, except that an attempt
-- inside the sandbox tier gets none, and network deny is clamped to allow
-- (with one log line) because no session manager runs a proxy for it.

do -- from a checkout: the module is in build/, the Lua glue in lua/
  local root = (arg and arg[0] or ""):match("^(.*)/examples/[^/]+$") or "."
  package.cpath = root .. "/build/?.so;" .. package.cpath
  package.path = root .. "/lua/?.lua;" .. package.path
end

local policy = require("isolation.policy")
local scheduler = require("isolation.scheduler")

local function log(line) print("  log: " .. line) end

local defaults = {
  { name = "no default", cfg = nil },
  { name = "bwrap", cfg = { mode = "bwrap" } },
  { name = "bwrap + deny", cfg = { mode = "bwrap", network = "deny", allow_hosts = { "example.com" } } },
  { name = "docker + deny", cfg = { mode = "docker", network = "deny" } },
}
local attempts = {
  { id = "task-1/attempt-1", target = "local" },
  { id = "task-2/attempt-1", target = "sandbox" },
}

for _, d in ipairs(defaults) do
  for _, a in ipairs(attempts) do
    local cfg = assert(scheduler.task_isolation(d.cfg, a, log))
    print(string.format("default %-14s attempt %-17s on %-8s -> %s", d.name, a.id, a.target,
      policy.badge(cfg) or "no isolation"))
  end
end
