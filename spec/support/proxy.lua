-- Client-side helpers for the proxy specs: raw connections on luv's loop
-- (TCP or unix), run with a deadline. With a thread-mode proxy only these
-- client handles are on luv's loop; in luv mode the proxy runs too.
local uv = require("luv")

local M = {}

--- Runs luv's loop until pred() is true or `timeout` seconds pass.
function M.run_until(pred, timeout)
  if pred() then return true end
  local expired = false
  -- the loop's clock stops while a spec blocks (io.popen, os.execute): a
  -- timer armed on a stale clock would expire at the first run
  uv.update_time()
  local t = uv.new_timer()
  t:start(math.floor((timeout or 5) * 1000), 0, function() expired = true end)
  while not pred() and not expired do
    uv.run("once")
  end
  t:stop()
  t:close()
  uv.run("nowait") -- the timer's close callback (luv crashes on exit otherwise)
  return pred() and true or false
end

--- Lets the loop run for `seconds`.
function M.settle(seconds)
  local done = false
  -- the loop's clock stops while a spec blocks (io.popen, os.execute): a
  -- timer armed on a stale clock would expire at the first run
  uv.update_time()
  local t = uv.new_timer()
  t:start(math.floor(seconds * 1000), 0, function() done = true end)
  while not done do uv.run("once") end
  t:close()
  uv.run("nowait")
end

local Conn = {}
Conn.__index = Conn

--- Connects to "127.0.0.1:PORT", "[::1]:PORT", "unix:/path" or a port
--- number on 127.0.0.1. Returns a connection (raises after `timeout`).
function M.connect(addr, timeout)
  local c = setmetatable({ data = "", nread = 0, eof = false, err = nil,
    connected = false, keep = true }, Conn)
  local done = false
  local function on_connect(err)
    c.err = err
    c.connected = not err
    done = true
  end
  if type(addr) == "number" then addr = "127.0.0.1:" .. addr end
  local path = addr:match("^unix:(.*)$")
  if path then
    c.h = uv.new_pipe(false)
    c.h:connect(path, on_connect)
  else
    local host, port = addr:match("^%[(.*)%]:(%d+)$")
    if not host then host, port = addr:match("^(.*):(%d+)$") end
    c.h = uv.new_tcp()
    c.h:connect(host, tonumber(port), on_connect)
  end
  M.run_until(function() return done end, timeout or 5)
  if not c.connected then
    c:close()
    error("connect " .. addr .. " failed: " .. tostring(c.err or "timeout"))
  end
  c.reader = function(err, chunk)
    if err then
      c.err = err
      c.eof = true
    elseif chunk then
      c.nread = c.nread + #chunk
      if c.keep then c.data = c.data .. chunk end
      if c.on_data then c.on_data(chunk) end
    else
      c.eof = true
    end
  end
  c.h:read_start(c.reader)
  return c
end

--- Stops reading (the kernel buffers fill, then the sender must wait).
function Conn:pause()
  self.h:read_stop()
end

function Conn:resume()
  self.h:read_start(self.reader)
end

function Conn:send(s)
  if self.h:is_closing() then return end
  self.h:write(s)
end

--- Shuts down the writing half.
function Conn:shutdown()
  self.h:shutdown()
end

--- Waits until pred(self) or the timeout; returns whether pred held.
function Conn:wait(pred, timeout)
  return M.run_until(function() return pred(self) end, timeout or 5)
end

--- Waits until `s` appears in the data read (or EOF / timeout).
function Conn:wait_for(s, timeout)
  return self:wait(function(c) return c.data:find(s, 1, true) ~= nil or c.eof end, timeout)
    and self.data:find(s, 1, true) ~= nil
end

function Conn:wait_eof(timeout)
  return self:wait(function(c) return c.eof end, timeout)
end

--- The status code of the first response in the data, as a number.
function Conn:status()
  return tonumber(self.data:match("^HTTP/1%.%d (%d%d%d)"))
end

function Conn:close()
  if self.h and not self.h:is_closing() then
    self.h:close()
    uv.run("nowait")
  end
end

--- Sends raw bytes on a new connection and reads until the proxy closes
--- it (or `timeout`); returns the connection (data, eof, status()).
function M.exchange(addr, raw, timeout)
  local c = M.connect(addr)
  c:send(raw)
  c:wait_eof(timeout or 5)
  c:close()
  return c
end

--- Opens a CONNECT tunnel; returns the connection with the 200 read (and
--- the data after it in c.data), or raises.
function M.tunnel(addr, target, early, timeout)
  local c = M.connect(addr)
  c:send("CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n\r\n" .. (early or ""))
  assert(c:wait_for("\r\n\r\n", timeout), "no answer to CONNECT " .. target .. ": " .. c.data)
  local head, rest = c.data:match("^(.-\r\n\r\n)(.*)$")
  c.head = head
  c.data = rest
  return c
end

--- n pattern bytes from stream offset off: byte i is i % 251 (as
--- support.upstream sends them).
function M.pattern(off, n)
  local t = {}
  local chunk = {}
  for i = 0, 250 do chunk[#chunk + 1] = string.char(i) end
  local cycle = table.concat(chunk)
  local s = cycle:sub(off % 251 + 1) .. cycle:rep(math.ceil(n / 251) + 1)
  t[1] = s:sub(1, n)
  return t[1]
end

--- Open file descriptors of this process (read in-process: /proc/self is
--- this process here, not a child's).
function M.fd_count()
  local n = 0
  local req = assert(uv.fs_scandir("/proc/self/fd"))
  while uv.fs_scandir_next(req) do n = n + 1 end
  return n
end

--- Leaves a socket file at path that nobody listens on.
function M.stale_socket(path)
  -- libuv unlinks a bound pipe's path on close: bind in a child that exits
  -- without closing it.
  local script = string.format("local h = require('luv').new_pipe(false); assert(h:bind(%q)); os.exit(0, false)",
    path)
  local ok = os.execute(require("helpers").NO_SANITIZER .. "lua5.4 -e '" .. script:gsub("'", "'\\''") .. "'")
  assert(ok, "could not leave a stale socket at " .. path)
end

--- A loopback TCP port where nothing listens (bound, then released).
function M.closed_port()
  local h = uv.new_tcp()
  assert(h:bind("127.0.0.1", 0))
  local port = h:getsockname().port
  h:close()
  uv.run("nowait")
  return port
end

--- A loopback port whose dial never completes: a listener in a child
--- process that never accepts, backlog 0, its queue filled by connections
--- of this process, so that the kernel drops further SYNs. Returns the
--- port and a function that closes those connections and ends the child.
function M.stalled_port()
  local script = [[local uv = require("luv"); local s = uv.new_tcp(); assert(s:bind("127.0.0.1", 0));
    assert(s:listen(0, function() end));
    io.stdout:write(s:getsockname().port, " ", uv.os_getpid(), "\n"); io.stdout:flush();
    uv.sleep(15000)]]
  local pipe = io.popen("exec " .. require("helpers").NO_SANITIZER .. "lua5.4 -e '" .. script .. "'")
  local port, pid = pipe:read("l"):match("^(%d+) (%d+)$")
  port = tonumber(port)
  local fillers = {}
  for i = 1, 4 do
    local h = uv.new_tcp()
    h:connect("127.0.0.1", port, function() end)
    fillers[i] = h
  end
  M.settle(0.3)
  return port, function()
    for _, h in ipairs(fillers) do h:close() end
    M.settle(0.05) -- luv frees a closed handle's pending connect only on its loop
    os.execute("kill " .. pid)
    pipe:close()
  end
end

return M
