-- isolation.cli.config: the --config file (a regular JSON file of at most
-- 1 MiB, read strictly) and the config of a run: the file's keys, the
-- line's options over them, isolate's defaults for the rest.
local uv = require("luv")
local isolation = require("isolation")
local json = require("isolation.json")
local common = require("isolation.cli.common")

local die_usage, pattern_error = common.die_usage, common.pattern_error

local M = {}

-- A config is a few hundred bytes; 1 MiB is far more than any needs.
local CONFIG_MAX_BYTES = 1024 * 1024

local FILE_KINDS = {
  directory = "a directory", char = "a character device", block = "a block device", fifo = "a FIFO",
  socket = "a socket", link = "a symbolic link",
}

-- The text of a --config file: only a regular file, at most
-- CONFIG_MAX_BYTES. /dev/zero would be read until memory runs out and a
-- FIFO would block forever, so the kind is checked before the open (no
-- device is opened at all) and again on the open descriptor (O_NONBLOCK:
-- a FIFO swapped in meanwhile cannot block the open).
local function read_config_text(path)
  local function refuse(why) die_usage("--config " .. path .. ": " .. why) end
  local function check(st)
    if st.type ~= "file" then
      refuse("not a regular file (" .. (FILE_KINDS[st.type] or st.type) .. "); give a JSON file")
    end
    if st.size > CONFIG_MAX_BYTES then
      refuse(string.format("too large (%d bytes; a config file may hold at most %d)", st.size, CONFIG_MAX_BYTES))
    end
  end
  local st, err = uv.fs_stat(path)
  if not st then refuse("cannot read it (" .. tostring(err) .. ")") end
  check(st)
  local c = uv.constants
  local fd
  fd, err = uv.fs_open(path, c.O_RDONLY | c.O_NONBLOCK | c.O_NOCTTY, 0)
  if not fd then refuse("cannot read it (" .. tostring(err) .. ")") end
  st = uv.fs_fstat(fd)
  if not st then uv.fs_close(fd); refuse("cannot read it") end
  check(st)
  local chunks, total = {}, 0
  while true do
    local data, rerr = uv.fs_read(fd, CONFIG_MAX_BYTES + 1 - total, total)
    if not data then uv.fs_close(fd); refuse("cannot read it (" .. tostring(rerr) .. ")") end
    if data == "" then break end
    chunks[#chunks + 1] = data
    total = total + #data
    if total > CONFIG_MAX_BYTES then -- it grew since the fstat
      uv.fs_close(fd)
      refuse(string.format("too large (more than %d bytes)", CONFIG_MAX_BYTES))
    end
  end
  uv.fs_close(fd)
  return table.concat(chunks)
end

local function read_config_file(path)
  local text = read_config_text(path)
  -- the strict decoder: duplicate keys are errors, and an array is told
  -- from an object (an empty object for allow_hosts is the empty array
  -- lua-cjson writes, and is taken for one)
  local t, jerr = json.decode(text, "--config " .. path)
  if t == nil then die_usage(jerr) end
  if type(t) ~= "table" or getmetatable(t) == json.array_mt then
    die_usage("--config " .. path .. ": must hold a JSON object")
  end
  local cfg = {}
  for k, v in pairs(t) do
    if v ~= json.null then cfg[k] = v end
  end
  if type(cfg.allow_hosts) == "table" then
    local list = {}
    for j, h in ipairs(cfg.allow_hosts) do list[j] = h end
    if next(cfg.allow_hosts) ~= nil and #list == 0 then list = cfg.allow_hosts end -- a map: let config() refuse it
    cfg.allow_hosts = list
  end
  return cfg
end

-- The config: the file's keys, then the line's options over them, then
-- isolate's defaults for what neither gave (bwrap, deny).
local function build_config(o)
  local cfg = o.config and read_config_file(o.config) or {}
  if o.mode then cfg.mode = (o.mode == "none") and "" or o.mode end
  if cfg.mode == nil then cfg.mode = "bwrap" end
  if o.network then
    cfg.network = o.network
  elseif o.mode == "none" then
    cfg.network = "allow"
  elseif cfg.network == nil or cfg.network == "" then
    cfg.network = (cfg.mode == "") and "allow" or "deny"
  end
  if cfg.mode == "" and cfg.network ~= "allow" then
    die_usage("mode none cannot enforce network " .. cfg.network
      .. " (use --mode bwrap, docker or podman, or --network allow)")
  end
  for _, h in ipairs(o.allow_hosts) do
    local ok, err = isolation.config({ mode = "bwrap", network = "deny", allow_hosts = { h } })
    if not ok then die_usage(pattern_error("--allow-host", h, err)) end
  end
  if #o.allow_hosts > 0 and cfg.network ~= "deny" then
    die_usage("--allow-host has no effect here: only --network deny runs the proxy")
  end
  for opt, given in pairs({ ["--allow-private"] = o.allow_private, ["--resolve"] = #o.resolve > 0,
    ["--learn"] = o.learn, ["--log"] = o.log, ["--no-default-hosts"] = o.no_default_hosts,
    ["--upstream-proxy"] = o.upstream_proxy }) do
    if given and cfg.network ~= "deny" then
      die_usage(opt .. " has no effect here: only --network deny runs the proxy")
    end
  end
  if #o.allow_hosts > 0 then
    local list = {}
    for _, h in ipairs(cfg.allow_hosts or {}) do list[#list + 1] = h end
    for _, h in ipairs(o.allow_hosts) do list[#list + 1] = h end
    cfg.allow_hosts = list
  end
  local norm, err = isolation.config(cfg)
  if not norm then die_usage((o.config and ("--config " .. o.config .. ": ") or "") .. tostring(err)) end
  return norm
end

M.read_file, M.build = read_config_file, build_config

return M
