-- Nothing the host uses to build or police sandboxes is inside a sandbox's
-- writable places (issue 26.4, issue 27.7; isolation.hostpaths): the audit
-- log, the manager's runtime_dir (filter files, proxy sockets), the bridge
-- program. Each refusal happens before anything starts; the attacks run in
-- real bwrap sandboxes where the defence is more than the refusal.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")
local glue = require("support.glue")
local isolation = require("isolation")
local session = require("isolation.session")
local hostpaths = require("isolation.hostpaths")

local q = helpers.shquote

local exists = helpers.exists

-- isolate.* proxy directories in dir
local function proxy_dirs(dir)
  local n = 0
  for _, name in ipairs(cli.ls(dir)) do
    if name:match("^isolate%.") then n = n + 1 end
  end
  return n
end

describe("hostpaths.resolve", function()
  local root
  before_each(function() root = assert(uv.fs_realpath(helpers.tmpdir())) end)
  after_each(function() helpers.rmtree(root) end)

  it("resolves a path that does not exist yet through its nearest existing parent", function()
    assert(uv.fs_mkdir(root .. "/real", 448))
    assert(uv.fs_symlink(root .. "/real", root .. "/link"))
    assert.equal(root .. "/real/a/b.log", hostpaths.resolve(root .. "/link/a/b.log"))
    assert.equal(root .. "/real", hostpaths.resolve(root .. "/link"))
    assert.is_nil(hostpaths.resolve("relative/x"))
  end)
end)

describe("isolate: the audit log and the programs out of the sandbox's writable places", function()
  local root, work, tmp, home
  before_each(function()
    root = assert(uv.fs_realpath(helpers.tmpdir()))
    work, tmp, home = root .. "/work", root .. "/tmp", root .. "/home"
    for _, d in ipairs({ work, tmp, home }) do assert(uv.fs_mkdir(d, 448)) end
  end)
  after_each(function() helpers.rmtree(root) end)

  local function isolate(args, cwd)
    return cli.isolate(args, { env = { "TMPDIR=" .. tmp, "HOME=" .. home }, cwd = cwd })
  end

  -- The command would leave this behind if it ran.
  local RAN = { "--", "sh", "-c", "touch ran" }
  local function with_command(args)
    for _, a in ipairs(RAN) do args[#args + 1] = a end
    return args
  end

  local function assert_refused(status, err, what)
    assert.are.equal(2, status, err)
    local lines = select(2, err:gsub("\n", "\n"))
    assert.are.equal(1, lines, err)
    assert.truthy(err:find(what, 1, true), err)
    assert.is_false(exists(work .. "/ran"), "the command ran")
    assert.are.equal(0, proxy_dirs(tmp), "a proxy started")
  end

  it("refuses a relative --log in the workdir (the current directory), before anything starts", function()
    local status, _, err = isolate(with_command({ "--log", "audit.log" }), work)
    assert_refused(status, err, "the workdir (the current directory) \"" .. work .. "\" contains the audit log"
      .. " (--log) \"" .. work .. "/audit.log\"")
    assert.is_false(exists(work .. "/audit.log"))
  end)

  it("refuses a --log under a --bind directory, and one reached through a symbolic link", function()
    local bind = root .. "/cache"
    assert(uv.fs_mkdir(bind, 448))
    local status, _, err = isolate(with_command({ "--workdir", work, "--bind", bind, "--log", bind .. "/logs/a.log" }))
    assert_refused(status, err, "--bind \"" .. bind .. "\" contains the audit log (--log)")
    -- a link outside that leads into the workdir: compared after realpath
    assert(uv.fs_symlink(work, root .. "/logs"))
    status, _, err = isolate(with_command({ "--workdir", work, "--log", root .. "/logs/a.log" }))
    assert_refused(status, err, "(\"" .. work .. "/a.log\")")
    -- the log itself in place of a workdir
    status, _, err = isolate(with_command({ "--workdir", work, "--bind", root .. "/x.log", "--log", root .. "/x.log" }))
    assert.are.equal(2, status, err)
  end)

  it("refuses a workdir that holds the bridge program or the module (the checkout itself)", function()
    if not isolation.BRIDGE then return pending("the bridge program is not built") end
    local status, _, err = isolate({ "--workdir", cli.ROOT, "--", "true" })
    assert.are.equal(2, status, err)
    assert.truthy(err:find("contains the bridge program", 1, true), err)
    -- --network allow and --dry-run too: the reaper runs on the host either way
    status, _, err = isolate({ "--network", "allow", "--dry-run", "--workdir", cli.ROOT .. "/build", "--", "true" })
    assert.are.equal(2, status, err)
    assert.truthy(err:find("contains the bridge program", 1, true), err)
  end)

  it("a log outside still records a denied request, and the sandbox can neither remove nor forge it", function()
    if helpers.skip_without_bwrap() then return end
    local log = root .. "/audit.log"
    local status, out, err = isolate({ "--workdir", work, "--log", log, "--", "sh", "-c",
      "curl -s -o /dev/null -w '%{http_code}\\n' http://denied.example.com/; rm -f " .. q(log) .. " 2>/dev/null; "
        .. "echo '{\"type\":\"allow\",\"host\":\"forged.example.net\"}' > " .. q(log) .. " 2>/dev/null;"
        .. " echo done" })
    assert.are.equal(0, status, err)
    assert.are.equal("403\ndone\n", out)
    local lines = helpers.read_json_lines(log)
    assert.are.equal(1, #lines)
    assert.are.same({ "deny", "not_allowed", "denied.example.com" }, { lines[1].type, lines[1].code, lines[1].host })
    assert.is_nil(helpers.read(log):find("forged", 1, true))
  end)

  it("a TMPDIR inside the workdir: the proxy's directory goes elsewhere, out of the sandbox's sight", function()
    if helpers.skip_without_bwrap() then return end
    local status, out, err = cli.isolate({ "--workdir", work, "--", "sh", "-c",
      "ls -A; curl -s -o /dev/null -w '%{http_code}\\n' http://denied.example.com/" },
      { env = { "TMPDIR=" .. work, "HOME=" .. home } })
    assert.are.equal(0, status, err)
    assert.are.equal("403\n", out) -- nothing listed: no isolate.* directory in the workdir
  end)
end)

describe("session manager: runtime_dir, audit_log and the programs out of the sandbox's writable places", function()
  local root, launched
  before_each(function()
    root = assert(uv.fs_realpath(helpers.tmpdir()))
    launched = 0
  end)
  after_each(function() helpers.rmtree(root) end)

  local function manager(opts)
    opts.launcher = function()
      launched = launched + 1
      return {}
    end
    return assert(session.manager(opts))
  end

  local function refused(mgr, req, what)
    req.id = req.id or "s1"
    req.command = req.command or "true"
    req.isolation = req.isolation or { mode = "bwrap", network = "deny" }
    local s, err = mgr:launch(req)
    assert.is_nil(s)
    assert.truthy(tostring(err):find(what, 1, true), err)
    assert.is_nil(tostring(err):find("\n", 1, true))
    assert.are.equal(0, launched)
    assert.is_nil(mgr:get(req.id))
    assert.same({}, glue.sockets(mgr.runtime_dir))
    local _, listing = helpers.run("ls -A " .. q(mgr.runtime_dir) .. " | grep -v '^w$'")
    assert.are.equal("sandbox-seccomp.bpf\n", listing) -- no session filter either
  end

  it("refuses a workdir holding the audit log", function()
    local work = root .. "/work"
    assert(uv.fs_mkdir(work, 448))
    local mgr = manager({ runtime_dir = root .. "/run", audit_log = work .. "/logs/audit.log" })
    refused(mgr, { workdir = work }, "isolation: workdir \"" .. work .. "\" contains the audit log (audit_log)")
    -- a read-write bind holding it: the same
    assert(uv.fs_mkdir(root .. "/other", 448))
    refused(mgr, { workdir = root .. "/other", binds = { work } }, "binds[1] \"" .. work .. "\" contains the audit log")
    mgr:close()
  end)

  it("refuses a workdir holding runtime_dir (<project>/.isolation/run), and a workdir inside it", function()
    local project = root .. "/project"
    assert(uv.fs_mkdir(project, 448))
    local mgr = manager({ runtime_dir = project .. "/.isolation/run" })
    for _, network in ipairs({ "deny", "allow", "none" }) do
      refused(mgr, { workdir = project, isolation = { mode = "bwrap", network = network } },
        "isolation: workdir \"" .. project .. "\" contains the manager's runtime_dir")
    end
    local inner = mgr.runtime_dir .. "/w"
    assert(uv.fs_mkdir(inner, 448))
    local mgr2 = manager({ runtime_dir = root .. "/run2" })
    assert(uv.fs_mkdir(mgr2.runtime_dir .. "/w", 448))
    refused(mgr2, { workdir = mgr2.runtime_dir .. "/w" }, "lies inside the manager's runtime_dir")
    helpers.rmtree(inner)
    mgr:close()
    mgr2:close()
  end)

  it("refuses a read-write or read-only bind reaching runtime_dir (through a symbolic link too)", function()
    local work = root .. "/work"
    assert(uv.fs_mkdir(work, 448))
    local mgr = manager({ runtime_dir = root .. "/state/run" })
    refused(mgr, { workdir = work, binds = { root .. "/state" } }, "binds[1] \"" .. root .. "/state\" contains")
    refused(mgr, { workdir = work, ro_binds = { root .. "/state" } }, "ro_binds[1] \"" .. root .. "/state\" contains")
    assert(uv.fs_symlink(root .. "/state", root .. "/alias"))
    refused(mgr, { workdir = work, binds = { root .. "/alias" } }, "(\"" .. root .. "/state\") contains")
    -- a sibling is fine
    assert(uv.fs_mkdir(root .. "/cache", 448))
    local s = assert(mgr:launch({ id = "ok", workdir = work, binds = { root .. "/cache" }, command = "true",
      isolation = { mode = "bwrap", network = "deny" } }))
    assert(mgr:kill(s.id))
    mgr:close()
  end)

  it("refuses a workdir holding the bridge program (bridge_path)", function()
    local work = root .. "/work"
    assert(uv.fs_mkdir(work, 448))
    assert(uv.fs_mkdir(work .. "/bin", 448))
    helpers.write(work .. "/bin/isolation-bridge", "#!/bin/sh\n")
    uv.fs_chmod(work .. "/bin/isolation-bridge", 493)
    local mgr = manager({ runtime_dir = root .. "/run" })
    refused(mgr, { workdir = work, bridge_path = work .. "/bin/isolation-bridge", bridge = "builtin" },
      "contains the bridge program")
    mgr:close()
  end)

  -- issue 27.7: a session whose workdir held runtime_dir renamed an
  -- allow-all program over the shared filter, and the next session loaded
  -- it (keyctl succeeded). Now the first launch is refused; and even a
  -- shared file replaced from elsewhere is not what a session loads.
  describe("the attack of issue 27.7", function()
    local ALLOW_ALL = "\6\0\0\0\0\0\255\127" -- BPF_RET|BPF_K SECCOMP_RET_ALLOW
    local PROBE = "keyctl rdescribe @s >/dev/null 2>&1 && echo keyctl:allowed || echo keyctl:refused"

    local function run_line(line, home)
      local code, out = helpers.run("HOME=" .. q(home) .. " bash -c " .. q(line) .. " 2>&1")
      return code, out
    end

    it("renaming an allow-all program over the shared filter from inside fails, and would change nothing", function()
      if helpers.skip_without_bwrap() then return end
      if helpers.run("command -v keyctl >/dev/null") ~= 0 then return pending("keyctl(1) is not installed") end
      local project, home = root .. "/project", root .. "/home"
      assert(uv.fs_mkdir(project, 448))
      assert(uv.fs_mkdir(home, 448))
      local lines = {}
      local mgr = assert(session.manager({ runtime_dir = project .. "/.isolation/run",
        launcher = function(cmdline) lines[#lines + 1] = cmdline return {} end }))
      -- the layout of the attack: refused before anything starts
      local s, err = mgr:launch({ id = "a", workdir = project, isolation = { mode = "bwrap", network = "allow" },
        command = "true" })
      assert.is_nil(s)
      assert.truthy(err:find("contains the manager's runtime_dir", 1, true), err)
      assert.are.equal(0, #lines)
      -- a session of a sibling workdir: the filter's path is not there to rename over
      local work = root .. "/work"
      assert(uv.fs_mkdir(work, 448))
      helpers.write(work .. "/evil.bpf", ALLOW_ALL)
      local shared = mgr.seccomp_file
      s = assert(mgr:launch({ id = "a", workdir = work, isolation = { mode = "bwrap", network = "allow" },
        command = "mv evil.bpf " .. q(shared) .. " 2>&1; echo mv:$?; " .. PROBE }))
      local code, out = run_line(lines[1], home)
      assert.are.equal(0, code, out)
      assert.matches("mv:1\n", out)
      assert.matches("keyctl:refused\n", out)
      assert.are.equal(isolation.sandbox_seccomp_filter(), helpers.read(shared))
      assert(mgr:kill(s.id))
      -- the shared file replaced anyway (as any writer of runtime_dir could):
      -- the next session loads its own copy
      helpers.write(shared .. ".new", ALLOW_ALL)
      assert(uv.fs_rename(shared .. ".new", shared))
      s = assert(mgr:launch({ id = "b", workdir = work, isolation = { mode = "bwrap", network = "allow" },
        command = PROBE }))
      code, out = run_line(lines[2], home)
      assert.are.equal(0, code, out)
      assert.are.equal("keyctl:refused\n", out)
      -- control: the same line made to open the replaced shared file lets keyctl through
      local control = lines[2]:gsub(" 3<'[^']*'$", " 3<" .. q(shared))
      assert.are_not.equal(lines[2], control)
      code, out = run_line(control, home)
      assert.are.equal(0, code, out)
      assert.are.equal("keyctl:allowed\n", out)
      assert(mgr:kill(s.id))
      mgr:close()
    end)
  end)
end)
