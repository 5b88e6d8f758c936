-- Spec helpers of the glue specs: real child processes as session launchers,
-- and HTTP requests sent straight to a session proxy's unix socket.
local uv = require("luv")
local helpers = require("helpers")

local M = {}

local CHILD_ENV = helpers.NO_SANITIZER

--- Starts `cmdline` in the background (its own process, reparented once the
--- shell exits); returns a handle {pid = n}. stdout/stderr go to `logfile`.
function M.start(cmdline, logfile)
  local p = assert(io.popen(CHILD_ENV .. "sh -c " .. helpers.shquote(
    "setsid sh -c " .. helpers.shquote(cmdline) .. " </dev/null >"
    .. helpers.shquote(logfile or "/dev/null") .. " 2>&1 & echo $!"), "r"))
  local pid = tonumber(p:read("l") or "")
  p:close()
  assert(pid, "could not start " .. cmdline)
  return { pid = pid }
end

--- Is the process alive (a zombie counts as dead)?
function M.alive(handle)
  local f = io.open("/proc/" .. handle.pid .. "/stat")
  if not f then return false end
  local stat = f:read("a")
  f:close()
  local state = stat:match("^%d+ %b() (%a)")
  return state ~= nil and state ~= "Z" and state ~= "X"
end

--- Ends the process group the launch started (setsid made it), and waits
--- (bounded). Retried: right after the launch, setsid may not have made the
--- group yet, so the leader itself is killed too.
function M.stop(handle)
  -- /usr/bin/kill: dash's builtin kill does not take a process group.
  M.wait(function()
    os.execute("/usr/bin/kill -s KILL -- -" .. handle.pid .. " " .. handle.pid .. " 2>/dev/null")
    return not M.alive(handle)
  end, 10)
end

--- Sleeps `s` seconds without a loop.
function M.sleep(s)
  os.execute("sleep " .. s)
end

--- Polls pred every 50 ms until it is true or `timeout` seconds pass.
function M.wait(pred, timeout)
  local deadline = uv.hrtime() + (timeout or 10) * 1e9
  while uv.hrtime() < deadline do
    if pred() then return true end
    M.sleep(0.05)
  end
  return pred()
end

--- Runs luv's loop until pred() is true or `timeout` seconds pass.
function M.run_until(pred, timeout)
  local timer = uv.new_timer()
  timer:start(20, 20, function() end)
  local deadline = uv.hrtime() + (timeout or 10) * 1e9
  while not pred() and uv.hrtime() < deadline do
    uv.run("once")
  end
  timer:stop()
  timer:close()
  uv.run("nowait")
  return pred()
end

--- Sends one forward-proxy GET through the proxy at unix socket `path` to
--- `url` on luv's loop; calls done(status_or_nil, err) when the answer's
--- status line has arrived (or the connection failed).
function M.get_via(path, url, done)
  local hostport = url:match("^http://([^/]+)")
  local pipe = uv.new_pipe(false)
  local buf, finished = "", false
  local function finish(status, err)
    if finished then return end
    finished = true
    if not pipe:is_closing() then pipe:close() end
    done(status, err)
  end
  pipe:connect(path, function(err)
    if err then return finish(nil, err) end
    pipe:read_start(function(rerr, chunk)
      if rerr then return finish(nil, rerr) end
      if not chunk then return finish(tonumber(buf:match("^HTTP/1%.%d (%d%d%d)")), "closed: " .. buf) end
      buf = buf .. chunk
      local status = buf:match("^HTTP/1%.%d (%d%d%d) .-\r\n")
      if status then finish(tonumber(status)) end
    end)
    pipe:write("GET " .. url .. " HTTP/1.1\r\nHost: " .. hostport .. "\r\nConnection: close\r\n\r\n")
  end)
end

--- Socket files in dir (names).
function M.sockets(dir)
  local out = {}
  local scan = uv.fs_scandir(dir)
  if not scan then return out end
  while true do
    local name, kind = uv.fs_scandir_next(scan)
    if not name then break end
    if kind == "socket" then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

return M
