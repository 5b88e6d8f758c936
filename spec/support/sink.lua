-- The floods' upstream, in the caller's luv loop: a listener on 127.0.0.1
-- that swallows what it gets and, with answer_gets, answers each request
-- head with a 2-byte 200 (pipelined GETs). Used by the flooding agent
-- (flood_client.lua, which loads it with dofile) and by the specs.
--   local srv, port = dofile(here .. "/sink.lua")(uv, true)
return function(uv, answer_gets)
  local srv = uv.new_tcp()
  assert(srv:bind("127.0.0.1", 0))
  assert(srv:listen(1024, function()
    local c = uv.new_tcp()
    srv:accept(c)
    local buf = ""
    c:read_start(function(err, data)
      if err or not data then c:close() return end
      if answer_gets then
        buf = buf .. data
        local n = 0
        buf = buf:gsub(".-\r\n\r\n", function() n = n + 1 return "" end)
        if n > 0 then c:write(string.rep("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", n)) end
      end
    end)
  end))
  return srv, srv:getsockname().port
end
