-- Wire-level helpers for the strict-parsing and SNI specs, all on one luv
-- loop with the proxy (loop = uv): a capture upstream that records every
-- connection and byte, a raw client that writes exact bytes (optionally in
-- pieces) and reads until the proxy closes, and a ClientHello builder.
local uv = require("luv")

local M = {}

-- The loop drivers are the proxy specs' own.
local client = require("support.proxy")
M.run_until, M.settle = client.run_until, client.settle

--- A TCP upstream on 127.0.0.1 that records connections and bytes. With
--- `http = true` it answers each request head with a small 200.
function M.capture(opts)
  opts = opts or {}
  local cap = { conns = 0, data = "", handles = {} }
  local srv = uv.new_tcp()
  assert(srv:bind("127.0.0.1", 0))
  assert(srv:listen(64, function()
    local c = uv.new_tcp()
    srv:accept(c)
    cap.conns = cap.conns + 1
    cap.handles[#cap.handles + 1] = c
    local pending = ""
    c:read_start(function(err, chunk)
      if err or not chunk then
        if not c:is_closing() then c:close() end
        return
      end
      cap.data = cap.data .. chunk
      if opts.http then
        pending = pending .. chunk
        while pending:find("\r\n\r\n", 1, true) do
          pending = pending:sub(select(2, pending:find("\r\n\r\n", 1, true)) + 1)
          c:write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        end
      end
    end)
  end))
  cap.port = srv:getsockname().port
  cap.server = srv
  function cap.reset()
    cap.conns, cap.data = 0, ""
  end
  function cap.close()
    for _, h in ipairs(cap.handles) do
      if not h:is_closing() then h:close() end
    end
    if not srv:is_closing() then srv:close() end
  end
  return cap
end

--- Connects to 127.0.0.1:port, writes each piece of `pieces` (a string or an
--- array of strings, `gap` seconds apart), and reads until the proxy closes
--- or `timeout`. With `after_status` a function(client), it is called once
--- the first response head has arrived (to send tunnel bytes after 200).
--- Returns {data = everything read, eof = true when the proxy closed}.
function M.exchange(port, pieces, opts)
  opts = opts or {}
  if type(pieces) == "string" then pieces = { pieces } end
  local res = { data = "", eof = false }
  local c = uv.new_tcp()
  local gap = math.floor((opts.gap or 0) * 1000)
  local timer = uv.new_timer()
  local function write_from(i, list, done)
    if i > #list then
      if done then done() end
      return
    end
    c:write(list[i])
    if gap > 0 and i < #list then
      timer:start(gap, 0, function() write_from(i + 1, list, done) end)
    else
      write_from(i + 1, list, done)
    end
  end
  local headed = false
  c:connect("127.0.0.1", port, function(err)
    if err then
      res.err = err
      res.eof = true
      return
    end
    c:read_start(function(rerr, chunk)
      if rerr or not chunk then
        res.eof = true
        if not c:is_closing() then c:close() end
        return
      end
      res.data = res.data .. chunk
      if not headed and res.data:find("\r\n\r\n", 1, true) then
        headed = true
        if opts.after_head then opts.after_head(res, function(list) write_from(1, list) end) end
      end
    end)
    write_from(1, pieces)
  end)
  M.run_until(function() return res.eof or (opts.until_fn and opts.until_fn(res)) end,
    opts.timeout or 10)
  timer:close()
  if not c:is_closing() then c:close() end
  uv.run("nowait")
  res.status = res.data:match("^HTTP/1%.1 (%d%d%d)")
  return res
end

-- ClientHello builder (RFC 8446 4.1.2, RFC 6066 3), like tests/c/hello_builder.h.
local function u16(n) return string.char((n >> 8) & 0xff, n & 0xff) end
local function u24(n) return string.char((n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff) end

--- A ClientHello in TLS records. opts: sni (nil: no server_name),
--- record_size (split the handshake into records of at most that many bytes).
function M.client_hello(opts)
  opts = opts or {}
  local ext = u16(43) .. u16(5) .. string.char(4) .. u16(0x0304) .. u16(0x0303)
  if opts.sni then
    local entry = string.char(0) .. u16(#opts.sni) .. opts.sni
    ext = ext .. u16(0) .. u16(#entry + 2) .. u16(#entry) .. entry
  end
  ext = ext .. u16(10) .. u16(4) .. u16(2) .. u16(0x001d)
  local random = {}
  for i = 1, 32 do random[i] = string.char((i * 37) % 256) end
  local body = u16(0x0303) .. table.concat(random) .. string.char(32) .. string.rep("\xaa", 32)
    .. u16(6) .. u16(0x1301) .. u16(0x1302) .. u16(0x1303)
    .. string.char(1, 0) .. u16(#ext) .. ext
  local hs = string.char(1) .. u24(#body) .. body
  local step = opts.record_size or 16384
  local out = {}
  for off = 1, #hs, step do
    local piece = hs:sub(off, off + step - 1)
    out[#out + 1] = string.char(22, 3, 1) .. u16(#piece) .. piece
  end
  return table.concat(out)
end

--- Splits s into pieces of n bytes.
function M.pieces(s, n)
  local t = {}
  for i = 1, #s, n do t[#t + 1] = s:sub(i, i + n - 1) end
  return t
end

return M
