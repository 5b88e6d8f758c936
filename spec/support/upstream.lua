-- A counting test upstream that runs as a separate child process, so that it
-- keeps serving while the spec's Lua thread blocks (os.execute(curl), a
-- blocking wait on a thread-mode proxy). See upstream_server.lua for what it
-- serves.
--
--   local upstream = require("support.upstream")
--   local up = upstream.start()          -- or upstream.start{host = "::1"}
--   up.http_port, up.raw_port, up.host
--   up:stats()                           -- {accepts=, http_accepts=, raw_accepts=,
--                                        --  requests=, bytes_in=, bytes_out=, open=, last=}
--   up:wait(function(s) return s.requests >= 2 end, 5)  -- polls stats; true/false
--   up:stop()                            -- idempotent
local M = {}

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "spec/support"
local SERVER = here .. "/upstream_server.lua"

local function shquote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local Upstream = {}
Upstream.__index = Upstream

--- Starts the child; returns an upstream object (raises when it cannot start).
function M.start(opts)
  opts = opts or {}
  local host = opts.host or "127.0.0.1"
  local statsfile = os.tmpname()
  -- exec: the pid we kill is the server itself. The sanitizer runtime the
  -- spec-asan run preloads must not reach the child.
  local cmd = "exec " .. require("helpers").NO_SANITIZER .. "lua5.4 "
    .. shquote(SERVER) .. " " .. shquote(statsfile) .. " " .. shquote(host) .. " </dev/null"
  local pipe = assert(io.popen(cmd, "r"))
  local line = pipe:read("l")
  if not line then
    pipe:close()
    os.remove(statsfile)
    error("support.upstream: the server did not start")
  end
  local http_port, raw_port, pid = line:match("^http=(%d+) raw=(%d+) pid=(%d+)")
  assert(http_port, "support.upstream: unexpected first line " .. line)
  return setmetatable({
    host = host,
    http_port = tonumber(http_port),
    raw_port = tonumber(raw_port),
    pid = tonumber(pid),
    statsfile = statsfile,
    pipe = pipe,
  }, Upstream)
end

function Upstream:stats()
  local f = io.open(self.statsfile, "rb")
  local s = f and f:read("a") or ""
  if f then f:close() end
  local t = {}
  for k, v in s:gmatch("([%w_]+)=(%S+)") do
    t[k] = tonumber(v) or v
  end
  return t
end

local function sleep(s)
  os.execute("sleep " .. s)
end

--- Polls stats until pred(stats) is true or `timeout` seconds pass.
function Upstream:wait(pred, timeout)
  local deadline = os.time() + (timeout or 5)
  repeat
    if pred(self:stats()) then return true end
    sleep(0.05)
  until os.time() > deadline
  return pred(self:stats())
end

function Upstream:stop()
  if not self.pipe then return end
  os.execute("kill " .. self.pid .. " 2>/dev/null")
  self.pipe:close()
  self.pipe = nil
  os.remove(self.statsfile)
  os.remove(self.statsfile .. ".tmp")
end

Upstream.__gc = Upstream.stop
Upstream.__close = Upstream.stop

return M
