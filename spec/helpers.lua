-- Shared test helpers: child processes, temporary directories, fd counts,
-- and the probe that decides whether real bwrap sandboxes can run here.
local helpers = {}

-- Child processes must not inherit the sanitizer runtime the spec-asan run
-- preloads into lua5.4: bwrap, bash and curl are not built for it, nor is
-- a plain lua5.4 that loads the normal build.
local SANITIZER_VARS = { "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS" }

--- env(1)'s arguments that drop the sanitizer's variables: a new array,
--- to be put before the child's own argv ({"-u", "LD_PRELOAD", ...}).
function helpers.no_sanitizer_args()
  local args = {}
  for _, name in ipairs(SANITIZER_VARS) do
    args[#args + 1] = "-u"
    args[#args + 1] = name
  end
  return args
end

--- The same as a shell prefix: "env -u LD_PRELOAD ... " before a command.
helpers.NO_SANITIZER = "env " .. table.concat(helpers.no_sanitizer_args(), " ") .. " "
local CHILD_ENV = helpers.NO_SANITIZER

--- Quotes one word for /bin/sh.
function helpers.shquote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

--- A bwrap or docker wrap() line with its run-time check (the first word,
--- a command substitution that prints the program's name) replaced by the
--- quoted name: what the rest of the line looks like to a reader.
function helpers.line_body(line)
  local body = line:gsub('^"%$%(.-[;\n] ?command printf %%s (\'[^\']*\')%)"', "%1", 1)
  return body
end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  os.remove(path)
  return s
end

--- Runs a shell command line; returns exit code (128+n for signal n),
--- stdout and stderr. stdin is /dev/null.
function helpers.run(cmdline)
  local out, err = os.tmpname(), os.tmpname()
  local ok, how, code = os.execute(CHILD_ENV .. "sh -c " .. helpers.shquote(cmdline)
    .. " </dev/null >" .. out .. " 2>" .. err)
  if how == "signal" then code = 128 + code end
  local _ = ok
  return code, slurp(out), slurp(err)
end

--- Makes a fresh directory under /tmp (or under `parent`) and returns its path.
function helpers.tmpdir(parent)
  local code, out = helpers.run("mktemp -d " .. helpers.shquote((parent or "/tmp") .. "/isolation-spec.XXXXXX"))
  assert(code == 0, "mktemp failed")
  return (out:gsub("%s+$", ""))
end

function helpers.rmtree(path)
  assert(path:match("^/tmp/") or path:match("^/var/tmp/") or path:match("/isolation%-spec%."),
    "refusing to remove " .. path)
  helpers.run("rm -rf " .. helpers.shquote(path))
end

function helpers.write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

--- The lines of a JSON Lines file (an audit log), each decoded with
--- lua-cjson; an empty array when the file does not exist.
function helpers.read_json_lines(path)
  local out = {}
  local f = io.open(path, "rb")
  if not f then return out end
  local cjson = require("cjson")
  for l in f:lines() do out[#out + 1] = cjson.decode(l) end
  f:close()
  return out
end

function helpers.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

--- Number of open file descriptors of this process. The listing is written
--- to a file by a child (not read through a pipe, whose ends the child might
--- see in this process while popen is still setting up).
function helpers.fd_count()
  local list = os.tmpname()
  os.execute("ls /proc/" .. helpers.pid() .. "/fd >" .. list)
  local n = 0
  for _ in io.lines(list) do n = n + 1 end
  os.remove(list)
  return n
end

--- Polls pred every 50 ms (luv's sleep: no child) until it is true or
--- `seconds` pass; then pred's last answer.
function helpers.wait_for(pred, seconds)
  local uv = require("luv")
  local deadline = uv.hrtime() + seconds * 1e9
  repeat
    if pred() then return true end
    uv.sleep(50)
  until uv.hrtime() > deadline
  return pred()
end

--- Threads of this process (entries of /proc/self/task).
function helpers.thread_count()
  local uv = require("luv")
  local n, req = 0, assert(uv.fs_scandir("/proc/self/task"))
  while uv.fs_scandir_next(req) do n = n + 1 end
  return n
end

--- thread_count() once it has not changed for 50 ms (at most 2 s). A
--- thread that was just joined can still be listed for a moment: the
--- kernel wakes the joiner before it removes the task, so a count taken
--- right after a proxy's close may hold a thread that is going away.
function helpers.settled_thread_count()
  local uv = require("luv")
  local n, since = helpers.thread_count(), uv.hrtime()
  local deadline = since + 2e9
  while uv.hrtime() - since < 50e6 and uv.hrtime() < deadline do
    uv.sleep(5)
    local m = helpers.thread_count()
    if m ~= n then n, since = m, uv.hrtime() end
  end
  return n
end

--- Does path name anything (a dangling link included)?
function helpers.exists(path)
  return require("luv").fs_lstat(path) ~= nil
end

local pid
--- This Lua process's pid (io.open runs in this process, so /proc/self is us).
function helpers.pid()
  if not pid then
    local f = assert(io.open("/proc/self/stat"))
    pid = tonumber(f:read("l"):match("^%d+"))
    f:close()
  end
  return pid
end

local bwrap_reason
--- True when real bwrap sandboxes (with pid and net namespaces) run here;
--- otherwise false and the reason, which specs print when they skip.
function helpers.bwrap_works()
  if bwrap_reason == nil then
    local code, _, err = helpers.run("bwrap --ro-bind /usr /usr --ro-bind-try /lib /lib "
      .. "--ro-bind-try /lib64 /lib64 --ro-bind-try /bin /bin --proc /proc --dev /dev "
      .. "--unshare-pid --unshare-net -- /bin/true")
    if code == 0 then
      bwrap_reason = false
    else
      bwrap_reason = "bwrap cannot create namespaces here: " .. err
    end
  end
  return not bwrap_reason, bwrap_reason or nil
end

--- Prints why a real-sandbox spec is skipped, then returns true when it must skip.
function helpers.skip_without_bwrap()
  local ok, why = helpers.bwrap_works()
  if not ok then
    io.stderr:write("SKIP (real bwrap): " .. why .. "\n")
    return true
  end
  return false
end

return helpers
