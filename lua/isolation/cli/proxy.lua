-- isolation.cli.proxy: `isolate proxy`, a proxy in the foreground until
-- SIGINT or SIGTERM: its options, the token of a TCP listener, and the
-- event lines on stderr.
local uv = require("luv")
local isolation = require("isolation")
local common = require("isolation.cli.common")
local args_mod = require("isolation.cli.args")

local die, die_usage, exit_with = common.die, common.die_usage, common.exit_with
local absolute, pattern_error, event_line = common.absolute, common.pattern_error, common.event_line
local did_you_mean = args_mod.did_you_mean

local M = {}

-- The options of `isolate proxy`. The values go to isolation.proxy as
-- they are (--accept-listeners as an integer when it is one): its own
-- messages, told in terms of the options, say what it refuses.
local PROXY_VALUES = { ["--unix"] = "unix", ["--listen"] = "listen", ["--allow"] = "allow",
  ["--accept-listeners"] = "accept_listeners", ["--upstream-proxy"] = "upstream_proxy" }
local PROXY_FLAGS = { ["--allow-private"] = "allow_private", ["--quiet"] = "quiet", ["--no-token"] = "no_token" }

local function parse_proxy(args)
  args = table.move(args, 1, #args, 1, {}) -- a --name=value splits in two
  local o = { allow = {} }
  local i, in_allow = 1, false
  local function value(name)
    i = i + 1
    local v = args[i]
    if v == nil then die_usage(name .. " needs a value") end
    return v
  end
  while i <= #args do
    local a = args[i]
    local name, inline = a:match("^(%-%-[%w-]+)=(.*)$")
    if name then
      if not PROXY_VALUES[name] then die_usage("proxy: " .. name .. " takes no value") end
      a = name
      table.insert(args, i + 1, inline)
    end
    if a == "--help" then io.stdout:write(require("isolation.cli.help")); exit_with(0)
    elseif a == "--allow" then o.allow[#o.allow + 1] = value(a); in_allow = true
    elseif PROXY_VALUES[a] then o[PROXY_VALUES[a]] = value(a); in_allow = false
    elseif PROXY_FLAGS[a] then o[PROXY_FLAGS[a]] = true; in_allow = false
    elseif a:sub(1, 1) == "-" then
      die_usage("proxy: unknown option " .. a .. did_you_mean(a, { PROXY_VALUES, PROXY_FLAGS, { ["--help"] = true } }))
    elseif in_allow then o.allow[#o.allow + 1] = a
    else die_usage("proxy: unexpected argument " .. a .. " (patterns follow --allow)") end
    i = i + 1
  end
  if (o.unix == nil) == (o.listen == nil) then die_usage("proxy: give exactly one of --unix PATH or --listen ADDR") end
  if o.unix and o.unix:sub(1, 1) ~= "/" then o.unix = absolute(o.unix, assert(uv.cwd())) end
  if #o.allow == 0 then die_usage("proxy: --allow PATTERN is required (at least one)") end
  for _, p in ipairs(o.allow) do
    local ok, err = isolation.config({ mode = "bwrap", network = "deny", allow_hosts = { p } })
    if not ok then die_usage("proxy: " .. pattern_error("--allow", p, err)) end
  end
  if o.accept_listeners then
    -- the proxy takes a listener only from a client of its unix socket
    if o.listen then die_usage("proxy: --accept-listeners needs --unix (listeners are handed over a unix socket)") end
    local n = o.accept_listeners:match("^%d+$") and math.tointeger(tonumber(o.accept_listeners))
    o.accept_listeners = n or o.accept_listeners
  end
  return o
end

-- isolation.proxy's message about a value isolate took from the line,
-- told in terms of its option; nil for any other failure (a socket that
-- cannot be bound is not a usage error).
local PROXY_OPTION_OF = { unix = "--unix", listen = "--listen", accept_listeners = "--accept-listeners",
  upstream_proxy = "--upstream-proxy" }
local function proxy_option_error(err)
  local field, rest = tostring(err):match("^isolation: ([%w_]+) (.*)$")
  local opt = field and PROXY_OPTION_OF[field]
  return opt and (opt .. " " .. rest) or nil
end

local function proxy_main(args)
  local o = parse_proxy(args)

  local stderr = io.stderr
  local on_event
  if not o.quiet then
    on_event = function(ev) stderr:write(event_line(ev) .. "\n") end
  end
  -- A TCP port is open to every local user: a token unless refused.
  local token
  if o.listen and not o.no_token then
    local f = io.open("/dev/urandom", "rb")
    local raw = f and f:read(16)
    if f then f:close() end
    if not raw or #raw ~= 16 then die("proxy: cannot read /dev/urandom for the token") end
    token = raw:gsub(".", function(ch) return string.format("%02x", ch:byte()) end)
  end
  local p, err = isolation.proxy({
    allow = o.allow, unix = o.unix, listen = o.listen, allow_private = o.allow_private or nil,
    loop = uv, on_event = on_event, token = token, accept_listeners = o.accept_listeners,
    upstream_proxy = o.upstream_proxy,
  })
  if not p then
    local usage = proxy_option_error(err)
    if usage then die_usage("proxy: " .. usage) end
    die("proxy: " .. tostring(err))
  end
  io.stdout:write(p:address(), "\n")
  if token then io.stdout:write("http://isolation:", token, "@", p:address(), "\n") end
  io.stdout:flush()

  local signals = {}
  local function stop()
    p:close()
    for _, s in ipairs(signals) do if not s:is_closing() then s:close() end end
    uv.stop()
  end
  for _, name in ipairs({ "sigint", "sigterm" }) do
    local s = uv.new_signal()
    s:start(name, stop)
    signals[#signals + 1] = s
  end
  common.run_loop()
  p:close()
  return 0
end

M.parse, M.main = parse_proxy, proxy_main

return M
