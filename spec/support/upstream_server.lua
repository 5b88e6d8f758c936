-- Child process of support.upstream: a counting test upstream on loopback.
-- Run as `lua5.4 upstream_server.lua STATSFILE [HOST]`; prints one line
-- "http=PORT raw=PORT pid=PID" on stdout, then serves until SIGTERM/SIGINT.
--
-- http: HTTP/1.1 with keep-alive. GET /small (100 bytes), GET /bytes/N
-- (N pattern bytes: byte i is i % 251), GET /headers (the request head as the
-- body), GET /close (answers with Connection: close), HEAD of any of those,
-- POST/PUT anything (echoes the body; Content-Length or chunked), anything
-- else 404.
-- raw: one command line per connection: "ECHO" (echo every byte; shut down
-- writing after the client does), "SRC n" (send n pattern bytes, then close),
-- "SINK n" (read n bytes, reply "OK n\n"), "PING" (reply "PONG\n", wait for
-- the next command), "HOLD" (read and discard, never answer).
--
-- The stats file holds one line of counters, rewritten on every accept,
-- close and request and every 50 ms while bytes move:
-- "accepts=A http_accepts=H raw_accepts=R requests=Q bytes_in=I bytes_out=O
--  open=C last=<method path of the last HTTP request>".
local uv = require("luv")

local statsfile, host = arg[1], arg[2] or "127.0.0.1"
assert(statsfile, "usage: upstream_server.lua STATSFILE [HOST]")

local st = { accepts = 0, http_accepts = 0, raw_accepts = 0, requests = 0,
  bytes_in = 0, bytes_out = 0, open = 0, last = "-" }
local dirty = false

local function flush()
  dirty = false
  local tmp = statsfile .. ".tmp"
  local f = io.open(tmp, "wb")
  if not f then return end
  f:write(string.format(
    "accepts=%d http_accepts=%d raw_accepts=%d requests=%d bytes_in=%d bytes_out=%d open=%d last=%s\n",
    st.accepts, st.http_accepts, st.raw_accepts, st.requests, st.bytes_in, st.bytes_out, st.open, st.last))
  f:close()
  os.rename(tmp, statsfile)
end

local ticker = uv.new_timer()
ticker:start(50, 50, function() if dirty then flush() end end)

local block
do
  local t = {}
  for i = 0, 65535 do t[#t + 1] = string.char(i % 251) end
  block = table.concat(t) -- 65536 bytes; 65536 % 251 ~= 0, so slice by offset
end

-- n pattern bytes starting at stream offset off (byte i is i % 251)
local function pattern(off, n)
  local parts = {}
  while n > 0 do
    local start = off % 251
    local take = math.min(n, 65536 - start)
    parts[#parts + 1] = block:sub(start + 1, start + take)
    off, n = off + take, n - take
  end
  return table.concat(parts)
end

local function send(c, data, cb)
  st.bytes_out = st.bytes_out + #data
  dirty = true
  c:write(data, cb)
end

local function finish(c)
  if not c:is_closing() then
    c:close()
    st.open = st.open - 1
    flush()
  end
end

-- Sends n pattern bytes in 64 KiB pieces, never more than 4 pieces queued.
local function source(c, n, done)
  local off = 0
  local inflight = 0
  local function pump()
    while off < n and inflight < 4 do
      local take = math.min(65536, n - off)
      inflight = inflight + 1
      local piece = pattern(off, take)
      off = off + take
      send(c, piece, function(err)
        inflight = inflight - 1
        if err then finish(c) return end
        if off >= n and inflight == 0 then done() else pump() end
      end)
    end
  end
  if n == 0 then done() else pump() end
end

local function respond(c, status, headers, body, close)
  local h = { "HTTP/1.1 " .. status }
  for _, kv in ipairs(headers) do h[#h + 1] = kv end
  if close then h[#h + 1] = "Connection: close" end
  send(c, table.concat(h, "\r\n") .. "\r\n\r\n" .. (body or ""))
end

local function serve_http(c)
  local buf = ""
  local req -- the request whose body is being read
  local busy = false -- a /bytes response is being sent
  local process

  local function after(close)
    if close then
      c:shutdown(function() finish(c) end)
    end
  end

  local function answer(r, body_data)
    st.requests = st.requests + 1
    st.last = r.method .. "_" .. r.path
    flush()
    local close = r.close
    local head_only = r.method == "HEAD"
    local path = r.path
    if r.method == "POST" or r.method == "PUT" then
      respond(c, "200 OK", { "Content-Length: " .. #body_data, "Content-Type: application/octet-stream" },
        body_data, close)
      return after(close)
    end
    if r.method ~= "GET" and r.method ~= "HEAD" then
      respond(c, "405 Method Not Allowed", { "Content-Length: 0" }, "", close)
      return after(close)
    end
    if path == "/small" then
      local body = string.rep("s", 99) .. "\n"
      respond(c, "200 OK", { "Content-Length: 100", "Content-Type: text/plain" }, head_only and "" or body, close)
      return after(close)
    elseif path == "/headers" then
      respond(c, "200 OK", { "Content-Length: " .. #r.head, "Content-Type: text/plain" },
        head_only and "" or r.head, close)
      return after(close)
    elseif path == "/close" then
      respond(c, "200 OK", { "Content-Length: 5" }, head_only and "" or "bye!\n", true)
      return after(true)
    end
    local n = path:match("^/bytes/(%d+)$")
    if n then
      n = tonumber(n)
      respond(c, "200 OK", { "Content-Length: " .. n, "Content-Type: application/octet-stream" }, "", close)
      if head_only then return after(close) end
      busy = true
      c:read_stop()
      source(c, n, function()
        busy = false
        if close then return after(true) end
        c:read_start(function(err, data) process(err, data) end)
        process(nil, "")
      end)
      return
    end
    respond(c, "404 Not Found", { "Content-Length: 10" }, head_only and "" or "not found\n", close)
    return after(close)
  end

  -- Decodes a chunked body from buf; returns body, rest or nil when incomplete.
  local function dechunk(s)
    local pos, out = 1, {}
    while true do
      local line_end = s:find("\r\n", pos, true)
      if not line_end then return nil end
      local size = tonumber(s:sub(pos, line_end - 1):match("^%x+"), 16)
      if not size then return false end
      pos = line_end + 2
      if size == 0 then
        -- trailers until an empty line
        while true do
          local e = s:find("\r\n", pos, true)
          if not e then return nil end
          if e == pos then return table.concat(out), s:sub(e + 2) end
          pos = e + 2
        end
      end
      if #s < pos + size + 1 then return nil end
      out[#out + 1] = s:sub(pos, pos + size - 1)
      pos = pos + size + 2
    end
  end

  process = function(err, data)
    if err or not data then
      return finish(c)
    end
    st.bytes_in = st.bytes_in + #data
    dirty = true
    buf = buf .. data
    while not busy do
      if not req then
        local e = buf:find("\r\n\r\n", 1, true)
        if not e then return end
        local head = buf:sub(1, e + 3)
        buf = buf:sub(e + 4)
        local method, path, ver = head:match("^(%u+) (%S+) HTTP/1%.(%d)\r\n")
        if not method then
          respond(c, "400 Bad Request", { "Content-Length: 0" }, "", true)
          return after(true)
        end
        local lower = head:lower()
        local conn = lower:match("\r\nconnection:%s*([^\r]*)")
        local wants_close = conn and conn:find("close", 1, true) ~= nil
        local wants_keep = conn and conn:find("keep-alive", 1, true) ~= nil
        req = { method = method, path = path, head = head,
          close = wants_close or (ver == "0" and not wants_keep) }
        req.chunked = lower:match("\r\ntransfer%-encoding:%s*chunked") ~= nil
        req.length = tonumber(lower:match("\r\ncontent%-length:%s*(%d+)") or "0")
      end
      local body
      if req.chunked then
        local b, rest = dechunk(buf)
        if b == false then
          respond(c, "400 Bad Request", { "Content-Length: 0" }, "", true)
          return after(true)
        end
        if not b then return end
        body, buf = b, rest
      else
        if #buf < req.length then return end
        body, buf = buf:sub(1, req.length), buf:sub(req.length + 1)
      end
      local r = req
      req = nil
      answer(r, body)
      if r.close or r.path == "/close" then return end
    end
  end
  c:read_start(process)
end

local function serve_raw(c)
  local buf = ""
  local mode -- nil: reading a command line
  local left = 0
  local function on_read(err, data)
    if err or not data then
      if mode == "echo" then
        c:shutdown(function() finish(c) end)
      else
        finish(c)
      end
      return
    end
    st.bytes_in = st.bytes_in + #data
    dirty = true
    if mode == "echo" then return send(c, data) end
    if mode == "hold" then return end
    buf = buf .. data
    while true do
      local e = buf:find("\n", 1, true)
      if not e then return end
      local line = buf:sub(1, e - 1):gsub("\r$", "")
      buf = buf:sub(e + 1)
      if line == "ECHO" then
        mode = "echo"
        if #buf > 0 then send(c, buf) end
        buf = ""
        return
      elseif line == "HOLD" then
        mode = "hold"
        return
      elseif line == "PING" then
        send(c, "PONG\n")
      elseif line:match("^SRC %d+$") then
        c:read_stop()
        source(c, tonumber(line:match("%d+")), function()
          c:shutdown(function() finish(c) end)
        end)
        return
      elseif line:match("^SINK %d+$") then
        mode, left = "sink", tonumber(line:match("%d+"))
        local total = left
        if #buf >= left then
          buf = buf:sub(left + 1)
          send(c, "OK " .. total .. "\n")
          mode, left = nil, 0
        else
          left = left - #buf
          buf = ""
          local function sink_read(err2, d)
            if err2 or not d then return finish(c) end
            st.bytes_in = st.bytes_in + #d
            dirty = true
            if #d < left then left = left - #d return end
            buf = d:sub(left + 1)
            left = 0
            mode = nil
            send(c, "OK " .. total .. "\n")
            c:read_start(on_read)
            on_read(nil, "")
          end
          c:read_start(sink_read)
          return
        end
      else
        send(c, "ERR unknown command\n")
        c:shutdown(function() finish(c) end)
        return
      end
    end
  end
  c:read_start(on_read)
end

local function listen(kind, serve)
  local s = uv.new_tcp()
  assert(s:bind(host, 0))
  assert(s:listen(1024, function(err)
    if err then return end
    local c = uv.new_tcp()
    if not s:accept(c) then c:close() return end
    st.accepts = st.accepts + 1
    st[kind .. "_accepts"] = st[kind .. "_accepts"] + 1
    st.open = st.open + 1
    flush()
    serve(c)
  end))
  return s:getsockname().port
end

local http_port = listen("http", serve_http)
local raw_port = listen("raw", serve_raw)
flush()

local function stop()
  flush()
  os.exit(0, false)
end
local sigterm = uv.new_signal()
sigterm:start("sigterm", stop)
local sigint = uv.new_signal()
sigint:start("sigint", stop)
-- A peer that resets while we write must give EPIPE, not end the server.
local sigpipe = uv.new_signal()
sigpipe:start("sigpipe", function() end)
-- Orphaned (the spec process died): stop too.
local parent = uv.os_getppid()
local watchdog = uv.new_timer()
watchdog:start(500, 500, function()
  if uv.os_getppid() ~= parent then stop() end
end)

io.stdout:write(string.format("http=%d raw=%d pid=%d\n", http_port, raw_port, uv.os_getpid()))
io.stdout:flush()
uv.run()
