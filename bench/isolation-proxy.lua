-- The project's proxy for the shared benchmark harness (a run.sh `custom:`
-- entry): one isolation.proxy in thread mode (the module's background
-- thread serves it), the allowlist from $BENCH_ALLOW (space separated host
-- patterns), its address printed on stdout, until SIGTERM or SIGINT.
--
--   lua5.4 bench/isolation-proxy.lua --unix /tmp/p.sock
--   lua5.4 bench/isolation-proxy.lua --listen 127.0.0.1:18140
--   ... [--luv]    drive it from luv's loop on this thread instead
--   ... [--accept-listeners N]   take up to N listeners handed over the
--                  unix socket (bridge "pass")
--   ... [--route NAME=URL]   a credential route (bearer, the secret
--                  "bench-secret"); [--upstream-ca FILE] its CA
--
-- Loads the module from the build tree next to this script unless
-- ISOLATION_CPATH says otherwise.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
package.cpath = (os.getenv("ISOLATION_CPATH") or (here .. "/../build/?.so")) .. ";" .. package.cpath

local uv = require("luv")
local isolation = require("isolation")

local function usage(msg)
  io.stderr:write("isolation-proxy.lua: " .. msg .. "\n"
    .. "usage: lua5.4 bench/isolation-proxy.lua (--unix PATH | --listen ADDR) [--luv]\n")
  os.exit(2)
end

local opts = { allow = {} }
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--unix" or a == "--listen" then
    opts[a:sub(3)] = arg[i + 1] or usage(a .. " needs a value")
    i = i + 1
  elseif a == "--luv" then
    opts.loop = uv
  elseif a == "--route" then
    local name, url = (arg[i + 1] or ""):match("^([a-z0-9-]+)=(https://.+)$")
    if not name then usage("--route needs NAME=https://...") end
    opts.routes = opts.routes or {}
    opts.routes[#opts.routes + 1] = { name = name, upstream = url, header = "bearer", value = "bench-secret" }
    i = i + 1
  elseif a == "--upstream-ca" then
    opts.upstream_ca_file = arg[i + 1] or usage(a .. " needs a file")
    i = i + 1
  elseif a == "--accept-listeners" then
    opts.accept_listeners = math.tointeger(tonumber(arg[i + 1] or "")) or usage(a .. " needs a number")
    i = i + 1
  else
    usage("unknown argument " .. a)
  end
  i = i + 1
end
if not opts.unix and not opts.listen then usage("give --unix PATH or --listen ADDR") end
for pattern in (os.getenv("BENCH_ALLOW") or ""):gmatch("%S+") do
  opts.allow[#opts.allow + 1] = pattern
end
-- The harness's upstreams are on loopback: admitted by the IP patterns of
-- BENCH_ALLOW, as the API's private-address rule wants.

local proxy, err = isolation.proxy(opts)
if not proxy then
  io.stderr:write("isolation-proxy.lua: " .. tostring(err) .. "\n")
  os.exit(1)
end
io.stdout:write(proxy:address(), "\n")
io.stdout:flush()

local function stop()
  proxy:close()
  uv.stop()
end
for _, name in ipairs({ "sigterm", "sigint" }) do
  local s = uv.new_signal()
  s:start(name, stop)
end
uv.run()
proxy:close()
os.exit(0)
