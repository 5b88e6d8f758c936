-- session.manager{audit_log = path}: every session proxy appends its lines
-- to the one log, each naming its session id, read back with lua-cjson. The
-- launcher starts nothing (the requests go to the session sockets from
-- here), so this needs no sandbox.
local uv = require("luv")
local helpers = require("helpers")
local glue = require("support.glue")
local upstream = require("support.upstream")
local policy = require("isolation.policy")
local session = require("isolation.session")

local function project_with(default)
  local p = { id = "p" }
  assert(policy.patch_project(p, { isolation = default }))
  return p
end

local function get_via(path, url)
  local status, err, done
  glue.get_via(path, url, function(s, e) status, err, done = s, e, true end)
  glue.run_until(function() return done end, 20)
  return status, err
end

local read_log = helpers.read_json_lines

describe("session.manager audit_log", function()
  local root, work, mgr, up
  before_each(function()
    root = helpers.tmpdir()
    -- beside runtime_dir and the log: a workdir containing either is refused
    work = root .. "/work"
    assert(uv.fs_mkdir(work, 448))
    up = upstream.start()
  end)
  after_each(function()
    if mgr then mgr:close() end
    mgr = nil
    up:stop()
    helpers.rmtree(root)
  end)

  it("appends each session's requests with its id, one line per request", function()
    local log = root .. "/audit.log"
    mgr = assert(session.manager({ runtime_dir = root .. "/run", audit_log = log,
      launcher = function() return {} end }))
    local p = project_with({ mode = "bwrap", network = "deny", allow_hosts = { "127.0.0.1:" .. up.http_port } })
    local a = assert(mgr:launch({ id = "alpha", project = p, workdir = work, command = "true" }))
    local b = assert(mgr:launch({ id = "beta \"two\"", project = p, workdir = work, command = "true" }))
    local url = "http://127.0.0.1:" .. up.http_port .. "/small"
    assert.are.equal(200, get_via(a.proxy_socket, url))
    assert.are.equal(403, get_via(b.proxy_socket, "http://unlisted.example.com/"))
    assert.are.equal(200, get_via(b.proxy_socket, url))
    local lines
    glue.run_until(function()
      lines = read_log(log)
      return #lines >= 3
    end, 10)
    assert.are.equal(3, #lines)
    local seen = {}
    for _, l in ipairs(lines) do seen[#seen + 1] = l.session .. " " .. l.type .. " " .. l.code end
    table.sort(seen)
    assert.are.same({ "alpha allow allowed", "beta \"two\" allow allowed", "beta \"two\" deny not_allowed" }, seen)
    assert.are.equal(384, math.tointeger(uv.fs_stat(log).mode) & 511)
  end)

  it("refuses a relative audit_log, and a launch whose log cannot be opened says why", function()
    local m, err = session.manager({ runtime_dir = root .. "/run", audit_log = "audit.log",
      launcher = function() return {} end })
    assert.is_nil(m)
    assert.truthy(err:find("audit_log must be an absolute path", 1, true), err)
    local target = root .. "/target"
    helpers.write(target, "keep\n")
    local log = root .. "/audit.log"
    assert(uv.fs_symlink(target, log))
    mgr = assert(session.manager({ runtime_dir = root .. "/run", audit_log = log,
      launcher = function() return {} end }))
    local s, lerr = mgr:launch({ id = "x", project = project_with({ mode = "bwrap", network = "deny" }),
      workdir = work, command = "true" })
    assert.is_nil(s)
    assert.truthy(tostring(lerr):find("audit_log " .. log .. ": is a symbolic link", 1, true), lerr)
    assert.are.equal("keep\n", helpers.read(target))
    assert.are.same({}, glue.sockets(root .. "/run"))
  end)
end)
