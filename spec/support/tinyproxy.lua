-- tinyproxy (Debian) as a parent proxy for the specs: started on loopback
-- with a config of its own in the test's directory (a free port, Listen
-- 127.0.0.1, ConnectPort for the given ports only, optionally a filter file
-- that admits only the given hosts, its own log, no daemon: -d), stopped by
-- the test.
--
--   local tp, why = require("support.tinyproxy").start(dir, { port }, { "^localhost$" })
--   if not tp then return pending(why) end
--   tp.url, tp.port, tp.text() (its log so far), tp.stop()
local helpers = require("helpers")
local cli = require("support.cli")

local M = {}

local free_port = require("support.proxy").closed_port
M.free_port = free_port

local started = 0

--- Starts tinyproxy admitting CONNECT to `ports` and, when `filter` is
--- given, only the hosts it matches (extended regular expressions); `extra`
--- more config lines (BasicAuth USER PASSWORD); nil and the reason when it
--- cannot run here.
function M.start(dir, ports, filter, extra)
  local bin = helpers.run("command -v tinyproxy")
  if bin ~= 0 then return nil, "tinyproxy is not installed (make deps installs it)" end
  local port = free_port()
  started = started + 1 -- a log of its own: the last one's says it started
  local log = dir .. "/tinyproxy-" .. started .. ".log"
  local conf = {
    "Port " .. port, "Listen 127.0.0.1", "Timeout 30", 'LogFile "' .. log .. '"', "LogLevel Info",
    "MaxClients 32", "Allow 127.0.0.1", "DisableViaHeader Yes", 'PidFile "' .. dir .. '/tinyproxy.pid"',
  }
  if filter then
    helpers.write(dir .. "/filter", table.concat(filter, "\n") .. "\n")
    for _, l in ipairs({ 'Filter "' .. dir .. '/filter"', "FilterType ere", "FilterDefaultDeny Yes" }) do
      conf[#conf + 1] = l
    end
  end
  for _, p in ipairs(ports) do conf[#conf + 1] = "ConnectPort " .. p end
  for _, l in ipairs(extra or {}) do conf[#conf + 1] = l end
  helpers.write(dir .. "/tinyproxy.conf", table.concat(conf, "\n") .. "\n")
  local p = cli.spawn({ "tinyproxy", "-d", "-c", dir .. "/tinyproxy.conf" })
  local function listening()
    local f = io.open(log, "rb")
    local s = f and f:read("a") or ""
    if f then f:close() end
    return s:find("Accepting connections", 1, true) ~= nil or p.status ~= nil
  end
  cli.wait_for(listening, 10)
  if p.status ~= nil or not listening() then
    if p.status == nil then p.kill("sigkill") end
    p.wait(5)
    return nil, "tinyproxy did not start: " .. p.err .. (helpers.read(log) or "")
  end
  local t = { port = port, log = log, url = "http://127.0.0.1:" .. port }
  function t.text() return helpers.read(log) or "" end
  function t.stop()
    if p.status == nil then p.kill("sigterm") end
    p.wait(10)
  end
  return t
end

return M
