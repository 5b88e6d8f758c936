-- isolation.scheduler: the isolation a queued (background) task attempt gets.
--
-- The project default applies, with two differences from an interactive
-- session: an attempt that already runs inside the sandbox tier gets no
-- isolation (its cloned container already is the isolation), and network
-- deny is clamped to allow, because a queued attempt has no session manager
-- watching its lifecycle to start and tear down the egress proxy.
-- Filesystem/process containment still applies. The clamp is logged, never
-- silent.
local policy = require("isolation.policy")
local textmod = require("isolation.text")

local M = {}

-- One line, whatever the id holds: escaped as every line the manager
-- prints (isolation.text).
local one_line = textmod.escape

-- Only the boolean true and the exact target "sandbox" say so: an attempt
-- decoded from {"in_sandbox": null} (cjson.null is truthy), 0, "false" or
-- "no" gets the project default (fail closed), never no isolation.
local function in_sandbox(attempt)
  if attempt.in_sandbox == true then return true end
  local target = attempt.target
  if type(target) == "table" then target = target.kind end
  return target == "sandbox"
end

--- The config for one task attempt. `project_default` is a config (raw or
--- normalized) or nil; `attempt` a table with `id` and optionally
--- `in_sandbox` and `target`; `log` a function taking one line (stderr when
--- nil). Returns a new normalized config, or nil, err for an invalid default.
function M.task_isolation(project_default, attempt, log)
  if type(attempt) ~= "table" then
    error("bad argument #2 to 'task_isolation' (attempt: table expected, got " .. type(attempt) .. ")", 2)
  end
  if log ~= nil and type(log) ~= "function" then
    error("bad argument #3 to 'task_isolation' (log: function or nil expected, got " .. type(log) .. ")", 2)
  end
  if in_sandbox(attempt) then return policy.effective(nil, nil) end
  local cfg, err = policy.effective(project_default, nil)
  if not cfg then return nil, err end
  if cfg.network == "deny" then
    -- Renormalize as allow: allow_hosts applies only to deny and goes away.
    local raw = { mode = cfg.mode, network = "allow", docker_image = cfg.docker_image }
    cfg, err = policy.effective(raw, nil)
    if not cfg then return nil, err end
    local line = string.format("isolation: task attempt %s: network deny clamped to allow "
      .. "(a queued attempt has no session proxy; %s filesystem/process containment still applies)",
      one_line(attempt.id), cfg.mode)
    if log then
      log(line)
    else
      io.stderr:write(line, "\n")
    end
  end
  return cfg
end

return M
