-- Spec support for bin/isolate driven for real (bwrap sandboxes, the proxy,
-- loopback upstreams): a test's own TMPDIR and HOME, the loopback HTTP
-- upstreams it started (support.cli's), and the pieces of a run's command
-- line that the isolate specs share: names pinned with --resolve, a
-- command given as `-- sh -c SCRIPT`, curl lines that print a status code.
local helpers = require("helpers")
local cli = require("support.cli")

local M = {}

local Run = {}
Run.__index = Run

--- A new run's state: r.tmp and r.home fresh directories (a HOME of its
--- own: CI may run without one), r.ups the `upstreams` loopback upstreams
--- started (none by default), r.up the first of them.
function M.new(upstreams)
  local r = setmetatable({ tmp = helpers.tmpdir(), home = helpers.tmpdir(), ups = {} }, Run)
  for _ = 1, upstreams or 0 do r:upstream() end
  return r
end

--- Keeps `u` (an upstream started elsewhere: anything with stop()) for
--- close() to stop; without `u`, starts a loopback HTTP upstream
--- (support.cli's). Returns it; r.up is the first.
function Run:upstream(u)
  u = u or cli.upstream()
  self.ups[#self.ups + 1] = u
  self.up = self.up or u
  return u
end

--- Stops the upstreams, removes tmp and home.
function Run:close()
  for _, u in ipairs(self.ups) do u.stop() end
  self.ups, self.up = {}, nil
  helpers.rmtree(self.tmp)
  helpers.rmtree(self.home)
end

--- bin/isolate with `args` and TMPDIR and HOME set to the run's (then
--- opts.env's NAME=VALUE), to completion: status, stdout, stderr.
--- opts.timeout as cli.isolate's.
function Run:isolate(args, opts)
  opts = opts or {}
  local env = { "TMPDIR=" .. self.tmp, "HOME=" .. self.home }
  for _, e in ipairs(opts.env or {}) do env[#env + 1] = e end
  return cli.isolate(args, { env = env, timeout = opts.timeout })
end

--- isolate with the options of `head`, then those of `extra`, then
--- `-- sh -c script`; as isolate().
function Run:sh(head, extra, script, opts)
  local args = {}
  for _, list in ipairs({ head, extra, { "--", "sh", "-c", script } }) do
    for _, a in ipairs(list) do args[#args + 1] = a end
  end
  return self:isolate(args, opts)
end

--- `--resolve NAME:addr` for each of `names` (addr 127.0.0.1 unless
--- given), appended to `into` (a new array when nil); returns it.
function M.resolve(names, addr, into)
  into = into or {}
  for _, n in ipairs(names) do
    into[#into + 1] = "--resolve"
    into[#into + 1] = n .. ":" .. (addr or "127.0.0.1")
  end
  return into
end

--- A shell line (with its "; ") that fetches `url` with curl and prints
--- `label`, a space and the HTTP status; `more` is put before the URL
--- (curl's own options).
function M.curl_code(url, label, more)
  return "curl -s --max-time 20 -o /dev/null -w '" .. label .. " %{http_code}\\n' " .. (more or "") .. url .. "; "
end

return M
