-- mgr:launch_spec: a launch spec its caller built (isolate's) run as a
-- session of the manager, through the same lifecycle as launch: the
-- session's own filter file and proxy socket in runtime_dir, the end only
-- once every process of the line is gone, the end checks said with the
-- caller's prefix, and on every refusal nothing left behind.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")
local session = require("isolation.session")

describe("session manager, launch_spec", function()
  local base, work, run, mgr, ended, logged
  before_each(function()
    base = helpers.tmpdir()
    work = base .. "/work"
    run = base .. "/run"
    assert(uv.fs_mkdir(work, 448))
    ended, logged = {}, {}
  end)
  after_each(function()
    if mgr then mgr:close() end
    mgr = nil
    helpers.rmtree(base)
  end)

  local function manager(extra)
    local opts = {
      runtime_dir = run, loop = uv,
      log = function(line) logged[#logged + 1] = line end,
      on_end = function(s, reason)
        ended[s.id] = { reason = reason, left = cli.pgrep(s.mark or "?"), status = s.exit_status }
      end,
    }
    for k, v in pairs(extra or {}) do opts[k] = v end
    mgr = assert(session.manager(opts))
    return mgr
  end

  -- runtime_dir's entries but the manager's shared filter file
  local function session_files()
    local out = {}
    for _, n in ipairs(cli.ls(run)) do
      if n ~= "sandbox-seccomp.bpf" and n ~= "tty-seccomp.bpf" then out[#out + 1] = n end
    end
    table.sort(out)
    return out
  end

  local function deny_spec(command)
    return { config = { mode = "bwrap", network = "deny" }, workdir = work, command = command,
      bridge = "builtin", seccomp_fd = 3 }
  end

  it("runs the spec behind its own proxy and filter file; ends once a setsid'd child ignoring SIGTERM is gone; "
    .. "leaves no file of the session", function()
    if helpers.skip_without_bwrap() then return pending(select(2, helpers.bwrap_works())) end
    local mark = "isolation-launchspec-" .. helpers.pid() .. "-" .. uv.hrtime()
    local events = {}
    manager()
    local spec = deny_spec("curl -s -o /dev/null -w '%{http_code}\\n' http://denied.example.com/ > "
      .. helpers.shquote(work .. "/code") .. "; setsid sh -c 'trap \"\" TERM HUP INT; sleep 3' " .. mark
      .. " </dev/null >/dev/null 2>&1 & exit 4")
    local given = {}
    for k, v in pairs(spec) do given[k] = v end
    local s = assert(mgr:launch_spec("run1", spec, {
      proxy = { allow = { "allowed.example.com" }, loop = uv, on_event = function(ev) events[#events + 1] = ev end },
      log_prefix = "test: " }))
    s.mark = mark
    assert.are.same(given, spec, "launch_spec changed the caller's spec")
    -- while it runs: the socket and the session's own filter copy, which
    -- the line opens (a seccomp_fd given was replaced by it)
    local files = session_files()
    assert.are.equal(2, #files, table.concat(files, " "))
    assert.truthy(files[1]:match("^run1%.%d+%-%x+%.sandbox%-seccomp%.bpf$"), files[1])
    assert.are.equal("run1.sock", files[2])
    assert.truthy(s.cmdline:find(files[1], 1, true), s.cmdline)
    assert.is_true(cli.wait_for(function() return ended.run1 ~= nil end, 60), "the session did not end")
    assert.are.equal(4, ended.run1.status)
    assert.are.same({}, ended.run1.left, "on_end ran while a process of the line was left")
    assert.are.equal("403\n", helpers.read(work .. "/code"))
    -- the denied request's event reached on_event before the proxy closed
    local denied = false
    for _, ev in ipairs(events) do if ev.host == "denied.example.com" then denied = true end end
    assert.is_true(denied)
    assert.are.same({}, session_files())
  end)

  it("says the end check's lines with the caller's prefix", function()
    if helpers.skip_without_bwrap() then return pending(select(2, helpers.bwrap_works())) end
    manager()
    local spec = { config = { mode = "bwrap", network = "none" }, workdir = work,
      command = "mkdir -p .vscode && echo '{}' > .vscode/settings.json" }
    local s = assert(mgr:launch_spec("p", spec, { log_prefix = "test: " }))
    assert.is_true(cli.wait_for(function() return s.state == "ended" end, 60))
    local said = table.concat(logged, "\n")
    assert.truthy(said:find("test: [^\n]*%.vscode"), said)
    assert.is_nil(said:find('session "p"', 1, true), said)
  end)

  describe("refuses, and leaves nothing", function()
    it("a manager with its own launcher", function()
      manager({ launcher = function() return {} end })
      local s, err = mgr:launch_spec("x", deny_spec("true"), {})
      assert.is_nil(s)
      assert.truthy(err:find("needs the default launcher", 1, true), err)
      assert.are.same({}, session_files())
    end)

    it("proxy options the proxy refuses: nil, err, \"proxy\"; no socket, no filter file", function()
      manager()
      local s, err, what = mgr:launch_spec("x", deny_spec("true"), { proxy = { allow = { "bad host name!" } } })
      assert.is_nil(s)
      assert.are.equal("proxy", what)
      assert.truthy(err:find("bad host name!", 1, true), err)
      assert.are.same({}, session_files())
      assert.is_nil(mgr:get("x"))
    end)

    it("a workdir that contains the runtime_dir (the filter files, the sockets)", function()
      run = work .. "/run"
      manager()
      local s, err = mgr:launch_spec("x", deny_spec("true"), { proxy = { allow = { "example.com" }, loop = uv } })
      assert.is_nil(s)
      assert.truthy(err:find("runtime_dir", 1, true), err)
      assert.are.same({}, session_files())
    end)

    it("an id that is running", function()
      if helpers.skip_without_bwrap() then return pending(select(2, helpers.bwrap_works())) end
      manager()
      assert(mgr:launch_spec("dup", { config = { mode = "bwrap", network = "none" }, workdir = work,
        command = "sleep 30" }, {}))
      local s, err = mgr:launch_spec("dup", deny_spec("true"), {})
      assert.is_nil(s)
      assert.truthy(err:find("already running", 1, true), err)
      assert.are.equal(2, #session_files() + 1) -- the running one's filter file alone
    end)

    it("a seccomp kind it does not know", function()
      manager()
      local s, err = mgr:launch_spec("x", deny_spec("true"), { seccomp = "none" })
      assert.is_nil(s)
      assert.truthy(err:find('seccomp must be "sandbox" or "tty"', 1, true), err)
      assert.are.same({}, session_files())
    end)
  end)
end)
