-- isolation.limits: which mechanism enforces a launch's limits here, sizes
-- as people write them, and the removal of cgroups a killed launch left.
--
-- The builders are pure: a spec names its mechanism (limits_via) and the
-- line does the rest. isolate and the session manager, which may look at
-- the machine, choose that mechanism here from isolation.preflight's own
-- "limits: *" probes (one detector, not two): the strongest that works and
-- can enforce every limit asked for; none is an error, never a launch
-- without the limit.
local uv = require("luv")

local M = {}

-- Strongest first: a scope systemd watches, then a cgroup the line makes,
-- then per-process rlimits.
M.MECHANISMS = { "systemd", "cgroup", "rlimit" }

local UNITS = { [""] = 1, K = 1024, M = 1024 ^ 2, G = 1024 ^ 3, T = 1024 ^ 4 }

--- "512M", "2G", "1048576" (bytes; K, M, G, T are powers of 1024, a
--- trailing B or iB is allowed) -> bytes, or nil, err naming `field`.
function M.parse_size(text, field)
  field = field or "size"
  local s = type(text) == "string" and text:upper() or ""
  local digits, unit, suffix = s:match("^(%d+)([KMGT]?)(I?B?)$")
  if digits and unit == "" and suffix:find("I") then digits = nil end
  local n = digits and math.tointeger(tonumber(digits) * UNITS[unit])
  if not n or n < 1 then
    return nil, string.format("%s must be a positive size: bytes, or a number with K, M, G or T (512M, 2G)"
      .. " (got %q)", field, tostring(text))
  end
  return n
end

-- Needs a mechanism beyond bwrap's own (tmpfs) and the ones every
-- mechanism shares (nofile by prlimit, time by the line's watchdog).
local function totals(limits)
  local out = {}
  for _, k in ipairs({ "memory", "pids", "cpu" }) do
    if limits[k] ~= nil then out[#out + 1] = k end
  end
  return out
end

--- True when `limits` holds memory, pids or cpu: under bwrap they need a
--- mechanism (choose); the others never do.
function M.needs_mechanism(limits)
  return type(limits) == "table" and #totals(limits) > 0
end

-- Why `via` cannot enforce `key` for this launcher, or nil when it can.
local function cannot(via, key, uid, check)
  if via == "cgroup" and key == "cpu" and check.cpu == false then
    return "no cpu controller in the cgroup found here"
  end
  if via ~= "rlimit" then return nil end
  if key == "cpu" then return "RLIMIT_CPU counts CPU seconds, not cores" end
  if key == "pids" and uid == 0 then
    return "RLIMIT_NPROC does not apply to root (measured: root ran 30 processes under --nproc=10)"
  end
  return nil
end

--- The "limits: *" checks of isolation.preflight, by mechanism name.
function M.probe(opts)
  local preflight = require("isolation.preflight")
  local out = {}
  for _, c in ipairs(preflight.limits_checks(opts)) do
    out[c.name:match("^limits: (%a+)$")] = c
  end
  return out
end

--- Chooses limits_via for `limits` (a launch spec's table): nil when no
--- limit needs one, else the strongest mechanism here that enforces them
--- all, and a line saying so; nil, err naming the limit and each mechanism
--- tried (and why it was not used) when none can.
--- opts: checks (from probe(); probed when absent), uid (default: ours).
function M.choose(limits, opts)
  opts = opts or {}
  if type(limits) ~= "table" then return nil end
  local need = totals(limits)
  if #need == 0 then return nil end
  local checks = opts.checks or M.probe()
  local uid = opts.uid or uv.getuid()
  local tried = {}
  for _, via in ipairs(M.MECHANISMS) do
    local c = checks[via]
    local why = not (c and c.ok) and ("not available: " .. (c and c.detail or "not probed")) or nil
    if not why then
      for _, k in ipairs(need) do
        local no = cannot(via, k, uid, c)
        if no then why = "cannot enforce " .. k .. ": " .. no; break end
      end
    end
    if not why then
      return via, "limits " .. table.concat(need, ", ") .. " enforced by " .. via .. " (" .. c.detail .. ")"
    end
    tried[#tried + 1] = via .. " (" .. why .. ")"
  end
  return nil, "isolation: limits." .. need[1] .. (#need > 1 and (" (with " .. table.concat(need, ", ", 2) .. ")")
    or "") .. " cannot be enforced on this machine; tried " .. table.concat(tried, "; ")
end

local function positive(opt, v, integer)
  local n = tonumber(v)
  if not n or n <= 0 or n ~= n or n == math.huge or (integer and not math.tointeger(n)) then
    return nil, string.format("%s must be a positive %s (got %q)", opt, integer and "integer" or "number", v)
  end
  return integer and math.tointeger(n) or n
end

--- isolate's options (strings: o.memory, o.tmpfs_size, o.pids, o.cpus,
--- o.time) as a launch spec's limits for `mode` ("", "bwrap", "docker")
--- on `target`, with the mechanism chosen here when bwrap needs one:
--- {limits, via, note} (limits nil without any option), or nil, err and
--- the exit status isolate gives it (2: a usage error; 125: no mechanism
--- here can enforce a limit).
function M.from_options(o, mode, target, opts)
  local lim, any = {}, false
  local fields = {
    { "memory", "--memory", "memory", "size" }, { "tmpfs_size", "--tmpfs-size", "tmpfs", "size" },
    { "pids", "--pids", "pids", true }, { "cpus", "--cpus", "cpu", false }, { "time", "--time", "time", true },
  }
  for _, f in ipairs(fields) do
    local v = o[f[1]]
    if v ~= nil then
      local n, err
      if f[4] == "size" then n, err = M.parse_size(v, f[2]) else n, err = positive(f[2], v, f[4]) end
      if not n then return nil, err, 2 end
      lim[f[3]], any = n, true
    end
  end
  if not any then return {} end
  if mode == "" then
    return nil, "--memory, --pids, --tmpfs-size, --cpus and --time need --mode bwrap or docker", 2
  end
  if mode ~= "bwrap" or not M.needs_mechanism(lim) then return { limits = lim } end
  if target ~= "local" then
    return nil, "--memory, --pids and --cpus under bwrap with --target " .. tostring(target)
      .. ": isolate cannot probe which mechanism that machine offers", 2
  end
  local via, why = M.choose(lim, opts)
  if not via then return nil, why, 125 end
  return { limits = lim, via = via, note = why }
end

-- The hierarchies a line's cgroups may be in: v1 memory, pids and cpu, the
-- v2 mount.
local function hierarchies(root)
  local out = {}
  for _, h in ipairs({ "memory", "pids", "cpu", "unified", "" }) do
    local dir = h == "" and root or (root .. "/" .. h)
    local st = uv.fs_stat(dir .. "/cgroup.procs")
    if st then out[#out + 1] = dir end
  end
  return out
end

local MAX_DEPTH = 8

-- The process is gone, or a zombie that nobody has reaped yet.
local function gone(proc, pid)
  local f = io.open(proc .. "/" .. pid .. "/stat")
  if not f then return true end
  local stat = f:read("a") or ""
  f:close()
  return stat:match("%) (%a) ") == "Z" or stat == ""
end

local function sweep(dir, depth, removed, proc)
  local scan = uv.fs_scandir(dir)
  while scan do
    local name, kind = uv.fs_scandir_next(scan)
    if not name then break end
    if kind == "directory" then
      local path = dir .. "/" .. name
      local pid = name:match("^isolation%.(%d+)$")
      if pid then
        -- rmdir refuses a cgroup that holds a process: a live one stays
        if gone(proc, pid) and uv.fs_rmdir(path) then removed[#removed + 1] = path end
      elseif depth < MAX_DEPTH then
        sweep(path, depth + 1, removed, proc)
      end
    end
  end
end

--- Removes the per-sandbox cgroups (isolation.<pid>) whose launching shell
--- is gone: left by a line that was killed (its sandbox died with it, so
--- they are empty). A cgroup that still holds a process is never removed
--- (the kernel refuses). Returns how many were removed and their paths.
--- opts: cgroup_root (default /sys/fs/cgroup), proc (default /proc).
function M.cleanup(opts)
  opts = opts or {}
  local root = opts.cgroup_root or "/sys/fs/cgroup"
  local removed = {}
  for _, dir in ipairs(hierarchies(root)) do
    sweep(dir, 1, removed, opts.proc or "/proc")
  end
  return #removed, removed
end

return M
