-- An agent flooding its own session proxy, run as a process of its own
-- (an agent is one): lua5.4 flood_client.lua SOCKET MODE COUNT HOLD
--   silent  COUNT connections that send nothing
--   heads   COUNT connections, each with an unfinished 32,700-byte head
--   bulk    COUNT CONNECT tunnels to a sink in this process, kept full
--   pipe    COUNT connections, each with 30 pipelined GETs, again and again
--   slowdns COUNT CONNECTs a second, each to a new name under example.com
--           (whose lookup the spec's name server never answers), each
--           connection closed once answered
-- Starts on a "go" line on stdin. Prints "held OPEN REFUSED CLOSED" once the connections have had a second
-- to be answered, keeps them HOLD seconds, then prints "done ..." and ends.
local uv = require("luv")

local path, mode, count, hold = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4])
local open, refused, closed = 0, 0, 0
local conns = {}

local sink_port
if mode == "bulk" or mode == "pipe" then
  -- An upstream that swallows tunnels and answers each GET.
  local here = arg[0]:match("^(.*)/[^/]*$") or "."
  sink_port = select(2, dofile(here .. "/sink.lua")(uv, mode == "pipe"))
end

local chunk = string.rep("x", 65536)
local head = "GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-Fill: " .. string.rep("a", 32700 - 60)
local gets
if mode == "pipe" then
  local at = "127.0.0.1:" .. tostring(sink_port)
  local one = "GET http://" .. at .. "/ HTTP/1.1\r\nHost: " .. at .. "\r\n\r\n"
  gets = string.rep(one, 30)
end

local function pump(c)
  if c:is_closing() then return end
  c:write(chunk, function(err) if not err then pump(c) end end)
end

local function start(i)
  local c = uv.new_pipe(false)
  conns[i] = c
  local got, seen, batches = "", 0, 1
  c:connect(path, function(err)
    if err then closed = closed + 1 return end
    open = open + 1
    c:read_start(function(rerr, data)
      if rerr or not data then
        closed = closed + 1
        if not c:is_closing() then c:close() end
        return
      end
      if #got < 64 then
        got = got .. data
        if got:find("^HTTP/1.1 503") and not conns[-i] then
          conns[-i] = true
          refused = refused + 1
        end
        if mode == "bulk" and got:find("^HTTP/1.1 200 Connection established\r\n\r\n") and not conns[-i] then
          conns[-i] = true
          pump(c)
        end
      end
      if mode == "pipe" then
        -- The next 30 once this batch is answered; 20 batches at most.
        got = ""
        local _, n = data:gsub("ok", "")
        seen = seen + n
        if seen >= batches * 30 and batches < 20 then
          batches = batches + 1
          c:write(gets)
        end
      end
    end)
    if mode == "heads" then
      c:write(head)
    elseif mode == "bulk" then
      c:write("CONNECT 127.0.0.1:" .. sink_port .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    elseif mode == "pipe" then
      c:write(gets)
    end
  end)
end

-- slowdns: one CONNECT to a name never asked before, every 1/COUNT s.
local function slow_names()
  local n = 0
  local t = uv.new_timer()
  t:start(0, math.max(1, math.floor(1000 / count)), function()
    n = n + 1
    local c = uv.new_pipe(false)
    c:connect(path, function(err)
      if err then closed = closed + 1 c:close() return end
      open = open + 1
      c:read_start(function(rerr, data)
        if rerr or not data or data:find("\r\n\r\n", 1, true) then
          closed = closed + 1
          if not c:is_closing() then c:close() end
        end
      end)
      local host = "n" .. n .. ".example.com"
      c:write("CONNECT " .. host .. ":443 HTTP/1.1\r\nHost: " .. host .. "\r\n\r\n")
    end)
  end)
end

local function go()
  if mode == "slowdns" then
    slow_names()
  else
    for i = 1, count do start(i) end
  end
  local t = uv.new_timer()
  t:start(1000, 0, function()
  io.stdout:write(string.format("held %d %d %d\n", open, refused, closed))
  io.stdout:flush()
  t:start(hold * 1000, 0, function()
    io.stdout:write(string.format("done %d %d %d\n", open, refused, closed))
    io.stdout:flush()
    os.exit(0)
  end)
  end)
end

local stdin = uv.new_pipe(false)
stdin:open(0)
stdin:read_start(function(err, data)
  if err or not data then os.exit(0) end
  if data:find("go") then
    stdin:read_stop()
    go()
  end
end)
uv.run()
