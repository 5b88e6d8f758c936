-- A DNS server for a network namespace a spec made (spec/support/dns_netns.sh),
-- in the caller's luv loop, on 127.0.0.1:53 (UDP): it answers the names in
-- `answers` (name -> IPv4 address: that A record; AAAA: no address), and
-- never answers any other name: a dead name server, so that getaddrinfo
-- waits its whole timeout (glibc: 5 s a try, 2 tries). Nothing leaves
-- loopback.
--   local stub = dofile(here .. "/dns_stub.lua")(uv, { ["b.example.net"] = "127.0.0.1" })
--   stub.answered, stub.ignored: queries so far; stub:close()
return function(uv, answers)
  local stub = { answered = 0, ignored = 0 }
  local udp = uv.new_udp()
  assert(udp:bind("127.0.0.1", 53))
  local function name_of(q)
    local labels, i = {}, 13
    while true do
      local n = q:byte(i)
      if not n then return nil end
      if n == 0 then return table.concat(labels, "."):lower(), i + 1 end
      if n >= 64 then return nil end -- compression: not in a question
      labels[#labels + 1] = q:sub(i + 1, i + n)
      i = i + n + 1
    end
  end
  udp:recv_start(function(err, q, addr)
    if err or not q or not addr or #q < 17 then return end
    local name, at = name_of(q)
    local ip = name and answers[name]
    if not ip then
      stub.ignored = stub.ignored + 1
      return
    end
    stub.answered = stub.answered + 1
    local qtype = q:byte(at) * 256 + q:byte(at + 1)
    local question = q:sub(13, at + 3)
    local rd = q:byte(3) & 1
    local an = ""
    if qtype == 1 then
      local a, b, c, d = ip:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
      an = "\192\12" .. string.pack(">I2I2I4I2BBBB", 1, 1, 60, 4, a, b, c, d)
    end
    local head = q:sub(1, 2) .. string.pack(">BBI2I2I2I2", 0x80 | rd, 0x80, 1, an == "" and 0 or 1, 0, 0)
    udp:send(head .. question .. an, addr.ip, addr.port, function() end)
  end)
  function stub.close() if not udp:is_closing() then udp:close() end end
  return stub
end
