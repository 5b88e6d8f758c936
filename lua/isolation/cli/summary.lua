-- isolation.cli.summary: what isolate says at the end of a run about the
-- proxy's events: the denials with what admits each, learn mode's
-- options, the hosts admitted but unreachable, the credential routes used
-- and the connections that named no host. A Summary records each event
-- (record) and prints once (print).
local common = require("isolation.cli.common")

local say, host_port, json_array = common.say, common.host_port, common.json_array

local M = {}

-- structured fields only: type, code, host, port and, for a refusal by
-- address, the address and its class in their own fields. Never from a
-- reason: a reason carries text the client chose (a TLS server name), and
-- an agent that could shape a summary line could make it advise the
-- operator to paste `--allow-private` or a wildcard (issue 26, item 3).
-- Each value is checked against the form the proxy gives it before it is
-- printed; anything else prints as "?".

-- A deny event refused for the address its host resolved to (the private
-- address rule), not for its host: the address and its class, else nil.
local function refused_address(ev)
  if ev.code ~= "private_address" then return nil end
  local addr, class = ev.address, ev.address_class
  if type(addr) ~= "string" or not addr:match("^[%x:.]+$") or #addr > 45 then addr = "?" end
  if type(class) ~= "string" or not class:match("^[%a-]+$") or #class > 20 then class = "private" end
  return addr, class
end

-- A host as the proxy gives it (a name it parsed strictly and lowercased,
-- or an IP literal), else "?".
local function safe_host(host)
  host = tostring(host or "")
  if #host <= 253 and host:match("^[%w._:-]+$") then return host end
  return "?"
end

local function safe_port(port)
  return math.type(port) == "integer" and port >= 0 and port <= 65535 and port or nil
end

-- A code as the proxy gives it (a word of [a-z_]), else "?".
local function safe_code(code)
  code = tostring(code or "")
  return code:match("^[%l_]+$") and #code <= 32 and code or "?"
end

-- What each code means, for the summary: fixed text, never the reason.
local CODE_TEXT = {
  own_address = "the address is the proxy's own listener",
  sni_mismatch = "the TLS server name is not the CONNECT host",
  tls_malformed = "a TLS ClientHello the proxy cannot read",
  tls_timeout = "no complete TLS ClientHello in time",
  bad_request = "a malformed request",
  too_large = "a request head too large",
  not_implemented = "a request the proxy does not implement (Upgrade, a SOCKS5 command other than CONNECT)",
  bad_version = "an HTTP version other than 1.0 and 1.1",
  auth_required = "no valid proxy token",
  header_timeout = "the request head did not come in time",
  dns_failed = "the name did not resolve",
  dns_timeout = "the name's lookup timed out",
  connect_failed = "no address could be dialed",
  upstream_proxy_failed = "the parent proxy (--upstream-proxy) could not be reached, refused or failed",
  connect_timeout = "the dial timed out",
  upstream_failed = "the upstream connection broke before a response",
  bad_response = "the upstream's response was malformed",
  upstream_timeout = "the upstream did not answer in time",
  too_many = "the proxy's connection or descriptor limits",
  client_closed = "the client left before the answer",
  bad_handover = "a listener handover the proxy refused",
  internal_error = "out of memory",
}

local function code_text(code)
  return CODE_TEXT[code] or "see --verbose or --log"
end

-- The exit summary of the denials: hosts not on the allowlist, then
-- allowed hosts refused for their address, each with what would admit it,
-- then requests refused for what they sent (a TLS server name that is not
-- the CONNECT host, a malformed request): no option admits those.
local function print_denials(denied, refused, other, learn)
  local function total(list)
    local n = 0
    for _, d in ipairs(list) do n = n + d.n end
    return n
  end
  local function plural(n, word) return n .. " " .. word .. (n == 1 and "" or "s") end
  if #denied > 0 then
    say(string.format("isolate: the proxy denied %s to %s not on the allowlist"
      .. " (admit one with --allow-host HOST):", plural(total(denied), "request"), plural(#denied, "host")))
    for _, d in ipairs(denied) do say(string.format("isolate:   %s (%d)", d.key, d.n)) end
  end
  if #refused > 0 then
    say(string.format("isolate: the proxy refused %s to %s %s for the address"
      .. " %s to (loopback, link-local, private or reserved; admit the address with an IP/CIDR"
      .. " --allow-host, or every such address with --allow-private):", plural(total(refused), "request"),
      plural(#refused, "host"), learn and "admitted by learn mode or the allowlist" or "on the allowlist",
      #refused == 1 and "it resolves" or "they resolve"))
    for _, d in ipairs(refused) do
      local suggestion = d.addr ~= "?" and d.port and ("; admit with --allow-host " .. host_port(d.addr, d.port))
        or ""
      say(string.format("isolate:   %s -> %s (%s) (%d)%s", d.key, d.addr, d.class, d.n, suggestion))
    end
  end
  if #other > 0 then
    say(string.format("isolate: the proxy refused %s for what %s sent:", plural(total(other), "request"),
      total(other) == 1 and "it" or "they"))
    for _, d in ipairs(other) do
      say(string.format("isolate:   %s (%d): %s: %s", d.key, d.n, d.code, code_text(d.code)))
    end
  end
end

-- Learn mode's result: the host:port of every request the proxy admitted,
-- as --allow-host options and as a --config file's allow_hosts.
-- `unserved`: how many requests the proxy refused or could not serve (the
-- summary lists them), so that a run whose every request was refused is
-- not told it made none. `allow_private`: the run had --allow-private,
-- which admitted names resolving to private addresses; the options keep
-- it, or pasting them would be refused again for the address.
local function print_learned(used, unserved, allow_private)
  if #used == 0 then
    if unserved > 0 then
      say(string.format("isolate: learn mode: nothing to learn: the proxy served none of the"
        .. " command's %d request%s (each is listed in this summary, with the option that admits it where one"
        .. " can)", unserved, unserved == 1 and "" or "s"))
    else
      say("isolate: learn mode: the command made no request through the proxy")
    end
    return
  end
  local opts = {}
  if allow_private then opts[1] = "--allow-private" end
  for _, h in ipairs(used) do opts[#opts + 1] = "--allow-host " .. h end
  say(string.format("isolate: learn mode: the command used %d host%s; these options admit %s:",
    #used, #used == 1 and "" or "s", #used == 1 and "it" or "them"))
  say("isolate:   ", table.concat(opts, " "))
  say(allow_private and "isolate: or, in a --config file (with --allow-private on the line: a config"
    .. " has no key for it):" or "isolate: or, in a --config file:")
  -- the proxy's hosts are ASCII names and addresses: the text is JSON
  say('isolate:   {"allow_hosts": ', tostring(json_array(used, "allow_hosts")), "}")
end

local Summary = {}
Summary.__index = Summary

--- A summary of one run; `learn` and `allow_private` are the run's
--- --learn and --allow-private.
function M.new(learn, allow_private)
  return setmetatable({
    learn = learn, allow_private = allow_private,
    denied = {}, denied_order = {},
    failed = {}, failed_order = {},
    -- errors and refusals of connections that named no host (a message
    -- that is no request, a refused listener handover, a client gone
    -- before its request): by code
    hostless = {}, hostless_order = {},
    route_uses = {}, route_order = {}, -- requests per credential route
    used = {}, used_order = {}, -- learn mode: the host:port of each admitted request
  }, Summary)
end

local function count(map, order, key, fresh)
  if not map[key] then
    order[#order + 1] = key
    map[key] = fresh()
  end
  return map[key]
end

--- Counts one event of the proxy.
function Summary:record(ev)
  local addr, class = refused_address(ev)
  local host, port, code = safe_host(ev.host), safe_port(ev.port), safe_code(ev.code)
  local route = ev.code == "route" and tostring(ev.reason or ""):match("^route ([a-z0-9-]+):")
  if route then
    if not self.route_uses[route] then self.route_order[#self.route_order + 1] = route; self.route_uses[route] = 0 end
    self.route_uses[route] = self.route_uses[route] + 1
  end
  if (ev.type == "report" or ev.type == "allow") and self.learn then
    local key = host_port(host, port)
    if not self.used[key] then
      self.used[key] = true
      self.used_order[#self.used_order + 1] = key
    end
  elseif (ev.type == "error" or ev.type == "deny") and (ev.host or "") == "" then
    local h = count(self.hostless, self.hostless_order, code, function() return { n = 0 } end)
    h.n = h.n + 1
  elseif ev.type == "deny" then
    local key = host_port(host, port)
    -- keyed by host, address and code: a name may resolve to several
    local entry = key .. (addr and (" " .. addr) or "") .. " " .. code
    local d = count(self.denied, self.denied_order, entry, function()
      return { key = key, n = 0, addr = addr, class = class, port = port, code = code }
    end)
    d.n = d.n + 1
  elseif ev.type == "error" then
    local key = host_port(host, port)
    count(self.failed, self.failed_order, key, function()
      return string.format("%s: %s: %s", math.type(ev.status) == "integer" and ev.status or "-", code,
        code_text(code))
    end)
  end
end

--- Prints the summary on stderr; `verbose`: the events were printed as
--- they came, and only learn mode's result and the routes are added.
function Summary:print(verbose)
  if not verbose and #self.denied_order > 0 then
    local not_listed, refused, other = {}, {}, {}
    for _, e in ipairs(self.denied_order) do
      local d = self.denied[e]
      local list = d.addr and refused or ((d.code == "?" or d.code == "not_allowed") and not_listed or other)
      table.insert(list, d)
    end
    print_denials(not_listed, refused, other, self.learn)
  end
  if self.learn then
    local unserved = #self.failed_order
    for _, d in pairs(self.denied) do unserved = unserved + d.n end
    for _, h in pairs(self.hostless) do unserved = unserved + h.n end
    print_learned(self.used_order, unserved, self.allow_private)
  end
  if not verbose and #self.failed_order > 0 then
    say(string.format("isolate: the proxy admitted but could not reach %d host%s:",
      #self.failed_order, #self.failed_order == 1 and "" or "s"))
    for _, k in ipairs(self.failed_order) do
      say(string.format("isolate:   %s (%s)", k, self.failed[k]))
    end
  end
  self:print_routes_and_hostless(verbose)
end

function Summary:print_routes_and_hostless(verbose)
  if #self.route_order > 0 then
    local parts = {}
    for _, r in ipairs(self.route_order) do
      local n = self.route_uses[r]
      parts[#parts + 1] = string.format("%s (%d request%s)", r, n, n == 1 and "" or "s")
    end
    io.stderr:write("isolate: credential routes used: ", table.concat(parts, ", "), "\n")
  end
  if not verbose and #self.hostless_order > 0 then
    say("isolate: the proxy ended connections that named no host:")
    for _, code in ipairs(self.hostless_order) do
      local h = self.hostless[code]
      say(string.format("isolate:   %s (%d): %s", code, h.n, code_text(code)))
    end
  end
end

return M
