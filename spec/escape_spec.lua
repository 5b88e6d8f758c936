-- Escapes tried from a shell inside a whole deny sandbox (`isolate` and a
-- session manager's local bwrap launch), as the launching root: each test
-- names the attack and asserts what the user relies on.
local uv = require("luv")
local helpers = require("helpers")
local glue = require("support.glue")
local policy = require("isolation.policy")
local session = require("isolation.session")

local shq = helpers.shquote

local ISOLATE = shq(require("support.cli").ISOLATE)

-- Every descriptor of every process the sandbox shows, as "pid fd target"
-- lines, written to `out` from inside.
local LIST_FDS = "for p in /proc/[0-9]*; do for f in $p/fd/*; do "
  .. "printf '%s %s %s\\n' \"${p#/proc/}\" \"${f##*/}\" \"$(readlink \"$f\")\"; done; done"

local function project(network)
  local p = { id = "p" }
  assert(policy.patch_project(p, { isolation = { mode = "bwrap", network = network } }))
  return p
end

-- A manager whose launcher runs the line the way the project's own glue
-- does (io.popen, sh -c, setsid): a child of this process, so that every
-- descriptor this process holds without close-on-exec reaches the line.
local function manager(root, extra)
  local o = {
    runtime_dir = root .. "/run",
    launcher = function(cmdline) return glue.start(cmdline, root .. "/launch.log") end,
    alive = glue.alive,
    stop = glue.stop,
  }
  for k, v in pairs(extra or {}) do o[k] = v end
  return assert(session.manager(o))
end

local function wait_file(path, secs)
  return glue.wait(function() return helpers.exists(path) end, secs or 30)
end

describe("escape: descriptors inherited from the launcher", function()
  local root
  before_each(function()
    root = helpers.tmpdir()
    assert(uv.fs_mkdir(root .. "/wd", 448))
  end)
  after_each(function() helpers.rmtree(root) end)

  for _, network in ipairs({ "deny", "allow" }) do
    it("session manager, network " .. network .. ": an orchestrator's descriptor without close-on-exec (its own "
      .. "log, opened with io.open) is not in any process of the sandbox and cannot be written", function()
      if helpers.skip_without_bwrap() then return end
      local log = root .. "/orchestrator.log"
      local held = assert(io.open(log, "w")) -- io.open: no close-on-exec
      local audit = root .. "/audit.log"
      local mgr = manager(root, { audit_log = audit })
      local done = root .. "/wd/done"
      -- through any descriptor that leads to the orchestrator's log
      local command = "exec >fds.txt; " .. LIST_FDS .. "; exec >/dev/null; for f in /proc/self/fd/*; do case $(readlink $f) in "
        .. "*orchestrator.log) eval \"echo planted >&${f##*/}\";; esac; done; echo ok > done"
      local s, err = mgr:launch({ id = "s1", project = project(network), agent = "claude", workdir = root .. "/wd",
        command = command })
      assert(s, err)
      local finished = wait_file(done)
      held:close()
      mgr:close()
      assert.is_true(finished, tostring(helpers.read(root .. "/launch.log")))
      local fds = helpers.read(root .. "/wd/fds.txt")
      assert.is_nil(fds:find(log, 1, true), fds)
      assert.is_nil(fds:find(audit, 1, true), fds)
      assert.is_nil(fds:find(root .. "/run", 1, true), fds) -- the seccomp filter and the proxy's socket
      assert.equal("", helpers.read(log))
      for line in fds:gmatch("[^\n]+") do
        local fd, target = line:match("^%d+ (%d+) (.*)$")
        -- bwrap's init keeps an eventfd of its own; the shell its listing
        assert.is_true(tonumber(fd) <= 2 or target:find("^anon_inode:%[eventfd%]") ~= nil
          or target:find("^/proc/%d+/fd$") ~= nil or target:find("^socket:") ~= nil
          or target:find("^pipe:") ~= nil, line)
        if target:find("^socket:") then assert.equal("deny", network, line) end -- the bridge's, to its proxy
      end
      -- no pipe but the shell's own: none of this process's
      local own = {}
      for f in io.popen("ls /proc/" .. helpers.pid() .. "/fd"):lines() do
        local t = uv.fs_readlink("/proc/" .. helpers.pid() .. "/fd/" .. f)
        if t and t:find("^pipe:") then own[t] = true end
      end
      for line in fds:gmatch("[^\n]+") do
        local target = line:match("^%d+ %d+ (.*)$")
        assert.is_nil(own[target], line)
      end
    end)
  end

  it("isolate --log and --learn: the audit log, the proxy's listener and isolate's loop are not inside", function()
    if helpers.skip_without_bwrap() then return end
    local audit = root .. "/audit.log"
    for _, opt in ipairs({ "--log " .. shq(audit), "--learn" }) do
      local code, _, err = helpers.run("exec 7>>" .. shq(root .. "/held") .. "; " .. ISOLATE .. " " .. opt .. " --workdir " .. shq(root .. "/wd")
        .. " -- bash -c " .. shq("exec >fds.txt; " .. LIST_FDS .. "; echo planted >&7"))
      assert.equal(1, code, err) -- descriptor 7 is not there
      local fds = helpers.read(root .. "/wd/fds.txt")
      assert.is_nil(fds:find(audit, 1, true), fds)
      assert.is_nil(fds:find(root .. "/held", 1, true), fds)
      assert.is_nil(fds:find("isolate.", 1, true), fds) -- the proxy's socket directory
      assert.is_nil(fds:find("eventpoll", 1, true), fds)
      assert.equal("", helpers.read(root .. "/held") or "")
    end
  end)
end)
