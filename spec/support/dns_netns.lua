-- Runs a Lua script in a network namespace with a name server of the
-- spec's (spec/support/dns_netns.sh, dns_stub.lua): the module's lookups
-- meet a name server that never answers, and nothing leaves loopback.
--   local netns = require("support.dns_netns")
--   local why = netns.unavailable()     -- nil, or why this machine cannot
--   local r = netns.run({ "spec/support/dns_child.lua", "bound" },
--     { DNS_NETNS_OPTIONS = "timeout:3 attempts:1" }, 60)
--   r.key ("key value" lines; numbers as numbers), r.text (all output)
local helpers = require("helpers")

local M = {}
local shq = helpers.shquote
local SCRIPT = "spec/support/dns_netns.sh"

local probed
--- nil when a namespace with its own resolv.conf can be made here, else
--- the reason (for pending).
function M.unavailable()
  if probed == nil then
    local dir = helpers.tmpdir()
    local code, out, err = helpers.run(SCRIPT .. " " .. shq(dir) .. " true")
    helpers.rmtree(dir)
    probed = false
    if code ~= 0 then
      probed = "no network namespace with its own resolv.conf here (root, unshare, ip and mount --bind needed): "
        .. (err .. out):gsub("%s+$", ""):sub(1, 200)
    end
  end
  return probed or nil
end

--- Runs lua5.4 ARGV... inside the namespace (the environment passed on:
--- the sanitizer run's preload reaches the module), with env's variables,
--- for at most `timeout` seconds.
function M.run(argv, env, timeout)
  local dir = helpers.tmpdir()
  local vars = ""
  for k, v in pairs(env or {}) do vars = vars .. k .. "=" .. shq(v) .. " " end
  local words = {}
  for i, a in ipairs(argv) do words[i] = shq(a) end
  local cmd = vars .. "LUA_PATH=" .. shq("lua/?.lua;spec/?.lua;;") .. " LUA_CPATH="
    .. shq((os.getenv("ISOLATION_CPATH") or "build/?.so") .. ";;")
    .. " timeout " .. (timeout or 60) .. " " .. SCRIPT .. " " .. shq(dir) .. " lua5.4 "
    .. table.concat(words, " ") .. " 2>&1"
  local pipe = io.popen(cmd)
  local text = pipe:read("a")
  pipe:close()
  helpers.rmtree(dir)
  local r = { text = text }
  for k, v in text:gmatch("([%w_%.%-]+) ([^\n]*)\n") do r[k] = tonumber(v) or v end
  return r
end

return M
