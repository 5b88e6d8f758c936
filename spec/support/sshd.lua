-- A private sshd for the specs: a loopback port, a host key and an
-- authorized key made for the test in a directory of its own, no password,
-- no PAM, no system sshd touched. Needs root (sshd's privilege separation).
--
--   local sshd = require("support.sshd")
--   local s = sshd.start(dir [, lines])  -- dir: an empty directory of the
--                                  -- spec's; lines: more sshd_config lines
--   s.port, s.key, s.log           -- the client key (0600) and sshd's log
--   s:stop()                       -- idempotent; the spec removes dir
local uv = require("luv")
local helpers = require("helpers")

local q = helpers.shquote
local M = { SSHD = "/usr/sbin/sshd" }

local wait_for = helpers.wait_for

local exists = helpers.exists

--- Why no private sshd can run here, or nil.
function M.unavailable()
  if uv.getuid() ~= 0 then return "needs root (sshd's privilege separation)" end
  if not exists(M.SSHD) then return "needs " .. M.SSHD .. " (openssh-server)" end
  if helpers.run("command -v ssh >/dev/null") ~= 0 then return "needs ssh (openssh-client)" end
  return nil
end

local Sshd = {}
Sshd.__index = Sshd

function Sshd:stop()
  if self.stopped then return end
  self.stopped = true
  local pid = helpers.read(self.dir .. "/sshd.pid")
  if pid and pid:match("^%d+") then
    helpers.run("kill " .. pid:match("^%d+"))
    wait_for(function() return not exists(self.dir .. "/sshd.pid") end, 5)
  end
end

--- Starts sshd on a free loopback port; raises when it cannot.
function M.start(dir, lines)
  assert(os.execute("mkdir -p /run/sshd"))
  local code, _, err = helpers.run("ssh-keygen -q -t ed25519 -N '' -f " .. q(dir .. "/hostkey")
    .. " && ssh-keygen -q -t ed25519 -N '' -f " .. q(dir .. "/key")
    .. " && cp " .. q(dir .. "/key.pub") .. " " .. q(dir .. "/authorized_keys"))
  assert(code == 0, err)
  local config = {
    "HostKey " .. dir .. "/hostkey",
    "AuthorizedKeysFile " .. dir .. "/authorized_keys",
    "PidFile " .. dir .. "/sshd.pid",
    "UsePAM no", "StrictModes no", "ListenAddress 127.0.0.1",
    "PermitRootLogin prohibit-password", "PasswordAuthentication no",
    "KbdInteractiveAuthentication no", "LogLevel VERBOSE",
  }
  for _, l in ipairs(lines or {}) do config[#config + 1] = l end
  config[#config + 1] = ""
  helpers.write(dir .. "/sshd_config", table.concat(config, "\n"))
  local port = require("support.proxy").closed_port()
  code, _, err = helpers.run(M.SSHD .. " -f " .. q(dir .. "/sshd_config") .. " -p " .. port
    .. " -E " .. q(dir .. "/sshd.log"))
  assert(code == 0, err)
  assert(wait_for(function() return exists(dir .. "/sshd.pid") end, 5), "sshd did not start")
  return setmetatable({ dir = dir, port = port, key = dir .. "/key", log = dir .. "/sshd.log" }, Sshd)
end

return M
