#!/usr/bin/env lua5.4
-- A scripted launch policy (`lua5.4 examples/policy.lua` from the repo root):
-- a project default, per-launch overrides, the target check, and one run.
-- It prints what it decided for each launch and why.

do -- from a checkout: the module is in build/, the Lua glue in lua/
  local root = (arg and arg[0] or ""):match("^(.*)/examples/[^/]+$") or "."
  package.cpath = root .. "/build/?.so;" .. package.cpath
  package.path = root .. "/lua/?.lua;" .. package.path
end

local isolation = require("isolation")
local policy = require("isolation.policy")

-- The project's default, set the way PATCH /api/projects/{id} would.
local project = { id = "demo" }
assert(policy.patch_project(project,
  '{"isolation": {"mode": "bwrap", "network": "deny", "allow_hosts": ["docs.example.com"]}}'))
print("project default: " .. project.default_isolation_json)

-- Launch requests as POST /api/sessions bodies would carry them.
local launches = {
  { name = "fresh launch", target = "local", body = '{"agent": "claude"}' },
  { name = "explicit opt-out", target = "local", body = '{"isolation": {"mode": ""}}' },
  { name = "deny on an ssh host", target = "ssh", body = '{"isolation": null}' },
  { name = "bwrap allow on ssh", target = "ssh", body = '{"isolation": {"mode": "bwrap"}}' },
  { name = "typo in the override", target = "local", body = '{"isolation": {"mode": "bwrap", "netwrk": "deny"}}' },
}

local runnable
for _, l in ipairs(launches) do
  local cfg, err = policy.session_isolation(project, l.body)
  local verdict
  if not cfg then
    verdict = "refused: " .. err
  else
    local ok, why = isolation.validate_for_target(cfg, l.target)
    local what = policy.badge(cfg) or "no isolation"
    if ok then
      verdict = "runs with " .. what
      if cfg.mode == "bwrap" and cfg.network == "allow" and not runnable then runnable = cfg end
    else
      verdict = what .. " refused for target " .. l.target .. ": " .. why
    end
  end
  print(string.format("%-22s %-5s -> %s", l.name, l.target, verdict))
end

-- A continuation keeps what it was launched with, whatever the default says now.
local saved = policy.encode_launch({ profile_name = "default", isolation = policy.session_isolation(project) })
assert(policy.patch_project(project, '{"isolation": null}'))
print("continuation after the default was cleared -> " .. policy.badge(policy.for_continuation(saved, project)))

-- Run one of the accepted launches for real: a workdir the sandbox can write,
-- and a look at what it cannot see.
local code, out
if runnable then
  local workdir = os.tmpname()
  os.remove(workdir)
  os.execute("mkdir -p " .. workdir)
  local line = isolation.wrap({
    config = runnable, agent = "example", workdir = workdir,
    command = "echo written-inside > result.txt; ls /home 2>/dev/null | wc -l; ls ~ | wc -l",
  })
  local p = io.popen("env -u LD_PRELOAD " .. line .. " 2>&1")
  out = p:read("a")
  local _, _, c = p:close()
  code = c
  local f = io.open(workdir .. "/result.txt")
  local written = f and f:read("l")
  if f then f:close() end
  os.execute("rm -rf " .. workdir)
  if code == 0 then
    print("ran " .. policy.badge(runnable) .. ": the sandbox wrote " .. tostring(written)
      .. " into its workdir; entries it sees in /home and in $HOME: " .. out:gsub("\n", " "))
  else
    print("bwrap could not run here (exit " .. tostring(code) .. "): " .. out:gsub("\n", " "))
  end
end
