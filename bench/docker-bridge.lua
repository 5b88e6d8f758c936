-- bench/docker-bridge.lua [ROUNDS]: bridge pass against builtin under docker
-- deny, in real containers (the specs' private dockerd, spec/support/
-- containers.lua; images imported from this machine's files, nothing
-- pulled). Run from the repository root as root, after `make` and after
-- bench/bench.sh made the harness (/tmp/isolation-bench/harness: loadgen,
-- the nginx config):
--
--   lua5.4 bench/docker-bridge.lua 3
--
-- Per round, interleaved (the order turns each round): a docker deny launch
-- of `true` with each bridge and with network none (wall time of the whole
-- `docker run` line), and the harness's loadgen inside a deny container
-- through each bridge to a proxy on this machine (bench/isolation-proxy.lua,
-- accept_listeners 64) and nginx on the host's loopback: p50 of 1000
-- sequential tunnels, tunnels/s at c=32 for 4 s. Prints each run and the
-- medians, and the load average.
package.path = "lua/?.lua;spec/?.lua;" .. package.path
package.cpath = "build/?.so;" .. package.cpath
local isolation = require("isolation")
local helpers = require("helpers")
local containers = require("support.containers")
local uv = require("luv")

local shq = helpers.shquote
local ROUNDS = tonumber(arg[1] or "3")
local H = os.getenv("HARNESS") or "/tmp/isolation-bench/harness"
local LG = H .. "/loadgen"
local NP = tonumber(os.getenv("NGINX_PORT") or "18180")

local function sh(cmd) assert(os.execute(cmd), cmd) end

local dir = helpers.tmpdir()
sh("mkdir -p -m 0700 " .. shq(dir .. "/run") .. " && mkdir -p " .. shq(dir .. "/home/work") .. " "
  .. shq(dir .. "/nginx/www") .. " " .. shq(dir .. "/nginx/tmp") .. " && chmod 0755 " .. shq(dir) .. " "
  .. shq(dir .. "/nginx") .. " " .. shq(dir .. "/nginx/www"))
sh("sed -e 's|@NGINX_PORT@|" .. NP .. "|g; s|@BLAST_PORT@|0|g; s|@PROXY_PORT@|0|g; s|@DIR@|" .. dir
  .. "/nginx|g' " .. shq(H .. "/conf/nginx.conf") .. " >" .. shq(dir .. "/nginx/nginx.conf"))
sh("head -c 100 /dev/zero | tr '\\0' s >" .. shq(dir .. "/nginx/www/small"))
sh("nginx -p " .. shq(dir .. "/nginx/") .. " -c " .. shq(dir .. "/nginx/nginx.conf") .. " -e "
  .. shq(dir .. "/nginx/error.log") .. " >/dev/null 2>&1 &")
local sock = dir .. "/run/proxy.sock"
sh("BENCH_ALLOW=127.0.0.1:" .. NP .. " LUA_CPATH='build/?.so;;' lua5.4 bench/isolation-proxy.lua --unix "
  .. shq(sock) .. " --accept-listeners 64 >" .. shq(dir .. "/proxy.log") .. " 2>&1 & echo $! >"
  .. shq(dir .. "/proxy.pid"))
sh("sleep 1")

local eng = assert(containers.docker())
local function stop()
  os.execute("kill $(cat " .. shq(dir .. "/proxy.pid") .. ") $(cat " .. shq(dir .. "/nginx/nginx.pid")
    .. ") 2>/dev/null")
  eng:stop()
  helpers.rmtree(dir)
end

local ok, err = pcall(function()
  containers.image(eng, "isolation-bench-lg", { "bash", LG })
  local bridge = (select(2, helpers.run("realpath build/isolation-bridge")):gsub("%s+$", ""))
  local function line(b, command)
    local deny = b ~= "none"
    return assert(isolation.wrap({
      config = { mode = "docker", network = deny and "deny" or "none", docker_image = "isolation-bench-lg" },
      workdir = dir .. "/home/work", proxy_socket = deny and sock or nil, bridge_path = deny and bridge or nil,
      bridge = deny and b or nil, tty = false, protect = {}, command = command,
    }))
  end
  local function run(l)
    local t0 = uv.hrtime()
    local code, out, e = helpers.run("env " .. eng.env .. " HOME=" .. shq(dir .. "/home") .. " sh -c " .. shq(l))
    assert(code == 0, e .. out)
    return (uv.hrtime() - t0) / 1e6, out
  end
  local tunnels = LG .. " connect-latency --proxy tcp:127.0.0.1:3128 --target 127.0.0.1:" .. NP
    .. " --path /small -n 1000 -w 0.3; " .. LG .. " connect-rate --proxy tcp:127.0.0.1:3128 --target 127.0.0.1:"
    .. NP .. " --path /small -c 32 -t 4 -w 0.5"
  local r = {}
  for _, b in ipairs({ "builtin", "pass", "none" }) do r[b] = { launch = {}, p50 = {}, rate = {} } end
  run(line("builtin", "true")) -- warm-up
  local order = { "builtin", "pass", "none" }
  for _ = 1, ROUNDS do
    for _, b in ipairs(order) do
      for _ = 1, 3 do table.insert(r[b].launch, (run(line(b, "true")))) end
      if b ~= "none" then
        local _, out = run(line(b, tunnels))
        local p50 = tonumber(out:match("mode=connect%-latency.-p50_us=([%d.]+)"))
        local rate = tonumber(out:match("mode=connect%-rate.-rate_per_s=([%d.]+)"))
        assert(p50 and rate, out)
        table.insert(r[b].p50, p50)
        table.insert(r[b].rate, rate)
        print(string.format("%-8s p50_us=%.1f rate_per_s=%.0f", b, p50, rate))
      end
    end
    order = { order[2], order[3], order[1] }
  end
  local function median(a)
    table.sort(a)
    local n = #a
    if n == 0 then return 0 / 0 end
    return n % 2 == 1 and a[(n + 1) / 2] or (a[n / 2] + a[n / 2 + 1]) / 2
  end
  for _, b in ipairs({ "builtin", "pass", "none" }) do
    print(string.format("%-8s launch of true: median %.1f ms (%d runs); tunnels: p50 %.1f us, %.0f/s at c=32",
      b, median(r[b].launch), #r[b].launch, median(r[b].p50), median(r[b].rate)))
  end
  print("loadavg " .. io.open("/proc/loadavg"):read("l"))
end)
stop()
assert(ok, err)
