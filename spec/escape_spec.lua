-- Escapes tried from a shell inside a whole deny sandbox (`isolate` and a
-- session manager's local bwrap launch), as the launching root: each test
-- names the attack and asserts what the user relies on.
local uv = require("luv")
local helpers = require("helpers")
local glue = require("support.glue")
local launchers = require("support.launchers")
local session = require("isolation.session")

local shq = helpers.shquote

local ISOLATE = shq(require("support.cli").ISOLATE)

-- Every descriptor of every process the sandbox shows, as "pid fd target"
-- lines, written to `out` from inside.
local LIST_FDS = "for p in /proc/[0-9]*; do for f in $p/fd/*; do "
  .. "printf '%s %s %s\\n' \"${p#/proc/}\" \"${f##*/}\" \"$(readlink \"$f\")\"; done; done"

local project = launchers.project

-- A manager whose launcher runs the line the way the project's own glue
-- does (io.popen, sh -c, setsid): a child of this process, so that every
-- descriptor this process holds without close-on-exec reaches the line.
local function manager(root, extra)
  local o = launchers.glue(root, { runtime_dir = root .. "/run", log = function() end })
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
      local command = "exec >fds.txt; " .. LIST_FDS .. "; exec >/dev/null; "
        .. "for f in /proc/self/fd/*; do case $(readlink $f) in "
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
      local code, _, err = helpers.run("exec 7>>" .. shq(root .. "/held") .. "; " .. ISOLATE .. " " .. opt
        .. " --workdir " .. shq(root .. "/wd")
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

describe("escape: what the host runs later", function()
  local root, wd
  local GIT = "git -c user.email=a@example.com -c user.name=a -c init.defaultBranch=main"
  before_each(function()
    root = helpers.tmpdir()
    wd = root .. "/wd"
    assert(uv.fs_mkdir(wd, 448))
    assert.equal(0, (helpers.run("cd " .. shq(wd) .. " && " .. GIT .. " init -q . && " .. GIT
      .. " commit -q --allow-empty -m init")))
  end)
  after_each(function() helpers.rmtree(root) end)

  -- Inside: a payload that would write `marker` (outside the workdir, so
  -- only a run on the host can make it), a nested repository at `sub`
  -- whose config names it as core.fsmonitor, and a gitlink to it in the
  -- workdir's own index, so that a plain `git status` in the workdir runs
  -- git (and the payload) in sub.
  local function plant(make_repo)
    local marker = root .. "/marker"
    return table.concat({
      "printf '#!/bin/sh\\necho ran > %s\\n' " .. shq(marker) .. " > payload.sh", "chmod +x payload.sh",
      make_repo,
      GIT .. " -C sub config core.fsmonitor \"$PWD/payload.sh\"",
      GIT .. " update-index --add --cacheinfo 160000,$(" .. GIT .. " -C sub rev-parse HEAD),sub",
    }, " && "), marker
  end

  local function host_git_status()
    return helpers.run("cd " .. shq(wd) .. " && git status --porcelain")
  end

  -- isolate runs `setup` with the planted fsmonitor; the end check must
  -- report `message` and the host's git status then run nothing. Returns
  -- isolate's stderr.
  local function assert_isolate_moves_aside(setup, message)
    local command, marker = plant(setup)
    local code, _, err = helpers.run(ISOLATE .. " --workdir " .. shq(wd) .. " -- bash -c " .. shq(command))
    assert.equal(0, code, err)
    assert.matches(message, err, 1, true)
    host_git_status()
    assert.is_false(helpers.exists(marker), "the host's git status ran the sandbox's fsmonitor")
    return err
  end

  it("isolate: a nested repository made inside (git init, core.fsmonitor, a gitlink in the workdir's index) is "
    .. "moved aside at the end: `git status` on the host in the workdir runs nothing", function()
    if helpers.skip_without_bwrap() then return end
    local err = assert_isolate_moves_aside("mkdir sub && " .. GIT .. " -C sub init -q && " .. GIT
      .. " -C sub commit -q --allow-empty -m s",
      "git: " .. wd .. "/sub/.git: moved aside to ")
    assert.matches("config (the keys core.fsmonitor removed", err, 1, true)
    -- the config alone: the repository stays, and the original is there to inspect
    assert.equal("directory", uv.fs_lstat(wd .. "/sub/.git").type)
    local q = assert(err:match("moved aside to (%S+/sub/%.git/isolation%-quarantine%-%S+),"))
    assert.matches("fsmonitor", helpers.read(q .. "/%2Fconfig"), 1, true)
  end)

  it("session manager: a nested repository that was there at launch, given a core.fsmonitor inside and committed "
    .. "as a gitlink, is moved aside at the end and named in on_end's list", function()
    if helpers.skip_without_bwrap() then return end
    assert.equal(0, (helpers.run("mkdir " .. shq(wd .. "/sub") .. " && cd " .. shq(wd .. "/sub") .. " && " .. GIT
      .. " init -q && " .. GIT .. " commit -q --allow-empty -m s")))
    local command, marker = plant("true")
    command = command .. " && " .. GIT .. " commit -q -m gitlink && echo ok > done"
    local ended
    local mgr = manager(root, { on_end = function(_, _, moved) ended = moved end })
    local s = assert(mgr:launch({ id = "s1", project = project("deny"), agent = "claude", workdir = wd,
      command = command }))
    assert.is_true(wait_file(wd .. "/done"), tostring(helpers.read(root .. "/launch.log")))
    assert.is_true(glue.wait(function() mgr:poll() return s.state == "ended" end, 10))
    mgr:close()
    host_git_status()
    assert.is_false(helpers.exists(marker), "the host's git status ran the sandbox's fsmonitor")
    assert.equal("directory", uv.fs_lstat(wd .. "/sub/.git").type)
    local paths = {}
    for _, m in ipairs(ended or {}) do paths[#paths + 1] = m.path end
    assert.same({ wd .. "/sub/.git/config" }, paths)
  end)

  it("isolate: a submodule's .git file made inside, pointing at a git directory with core.fsmonitor under "
    .. ".git/modules, is moved aside", function()
    if helpers.skip_without_bwrap() then return end
    assert_isolate_moves_aside("mkdir -p sub .git/modules && " .. GIT .. " init -q --separate-git-dir "
      .. ".git/modules/sub sub && " .. GIT .. " -C sub commit -q --allow-empty -m s",
      "git: " .. wd .. "/.git/modules/sub: moved aside to ")
  end)

  it("isolate: a nested .git made a symlink inside (git follows it to a git directory with core.fsmonitor) is "
    .. "moved aside", function()
    if helpers.skip_without_bwrap() then return end
    assert_isolate_moves_aside("mkdir sub && " .. GIT .. " -C sub init -q && " .. GIT
      .. " -C sub commit -q --allow-empty -m s && mv sub/.git hidden-gd && ln -s ../hidden-gd sub/.git",
      "sub/.git: a .git a symbolic link (git writes a directory or a file), made or changed inside the sandbox")
  end)

  it("isolate: a FIFO as a nested .git, and as the commondir a .git file names, does not hang the end check",
    function()
      if helpers.skip_without_bwrap() then return end
      local started = uv.hrtime()
      local code, _, err = helpers.run("timeout 20 " .. ISOLATE .. " --workdir " .. shq(wd) .. " -- bash -c "
        .. shq("mkdir a b gd && mkfifo a/.git gd/commondir && echo 'gitdir: ../gd' > b/.git"))
      assert.equal(0, code, err)
      assert.is_true((uv.hrtime() - started) / 1e9 < 10)
      assert.matches("a/.git: a .git a FIFO (git writes a directory or a file), made or changed", err, 1, true)
      -- b/.git names a directory without HEAD, which git does not take for a
      -- git directory (and so never reads its commondir): git stops there
      local gcode = helpers.run("cd " .. shq(wd .. "/b") .. " && timeout 10 git status")
      assert.is_true(gcode ~= 0 and gcode ~= 124, tostring(gcode))
    end)

  it("a FIFO left at .git/config, or at the config of the git directory a .git file names (a docker session "
    .. "checks nothing at its end), does not hang the next launch", function()
    if helpers.skip_without_bwrap() then return end
    local other = root .. "/wd2"
    assert.equal(0, (helpers.run("rm -f " .. shq(wd .. "/.git/config") .. " && mkfifo " .. shq(wd .. "/.git/config")
      .. " && mkdir -p " .. shq(other .. "/gd") .. " && echo 'gitdir: gd' > " .. shq(other .. "/.git")
      .. " && mkfifo " .. shq(other .. "/gd/config"))))
    for _, w in ipairs({ wd, other }) do
      local code, out, err = helpers.run("timeout 20 " .. ISOLATE .. " --workdir " .. shq(w) .. " -- echo ran")
      assert.equal(0, code, err)
      assert.equal("ran\n", out)
    end
  end)

  it("isolate: 300 nested repositories made inside with a core.fsmonitor each are all checked, and 21 lines "
    .. "report them", function()
    if helpers.skip_without_bwrap() then return end
    local code, _, err = helpers.run(ISOLATE .. " --workdir " .. shq(wd) .. " -- bash -c "
      .. shq("for i in $(seq 300); do git init -q r$i && git -C r$i config core.fsmonitor x; done"))
    assert.equal(0, code, err)
    local _, nested = err:gsub("isolate: protect: git: ", "")
    assert.equal(21, nested, err)
    assert.matches("git: and 280 more repositories below", err, 1, true)
    for i = 1, 300 do assert.is_nil(helpers.read(wd .. "/r" .. i .. "/.git/config"):find("fsmonitor"), i) end
  end)

  it("session manager: past the walk's bound (directories) the end check fails and on_end gets why", function()
    if helpers.skip_without_bwrap() then return end
    local gitcheck = require("isolation.gitcheck")
    local limit = gitcheck.DIR_LIMIT
    gitcheck.DIR_LIMIT = 50
    local said, why = {}, nil
    local mgr = manager(root, { log = function(l) said[#said + 1] = l end,
      on_end = function(_, _, _, cut) why = cut end })
    local s = assert(mgr:launch({ id = "s1", project = project("none"), agent = "claude", workdir = wd,
      command = "mkdir -p $(seq 100) && echo > done" }))
    local ok = wait_file(wd .. "/done") and glue.wait(function() mgr:poll() return s.state == "ended" end, 10)
    mgr:close()
    gitcheck.DIR_LIMIT = limit
    assert.is_true(ok, tostring(helpers.read(root .. "/launch.log")))
    assert.equal("more than 50 directories below " .. wd, why)
    assert.equal(why, s.end_check_error)
    assert.matches("the end check was cut short (more than 50 directories below " .. wd .. ")",
      table.concat(said, "\n"), 1, true)
  end)

  it("isolate: lefthook's other config names (lefthook-local.yml, merged in and read without a main config; "
    .. ".toml, .json, .config/...) made inside are moved aside; one that was there is read-only", function()
    if helpers.skip_without_bwrap() then return end
    helpers.write(wd .. "/lefthook.yaml", "pre-commit: {}\n")
    local names = { "lefthook-local.yml", ".lefthook-local.yml", "lefthook.toml", ".lefthook.json",
      "lefthook-local.jsonc", ".config/lefthook.yml", ".config/lefthook-local.yml", ".lefthook/pre-commit/x.sh",
      ".lefthook-local/pre-commit/x.sh" }
    local make = {}
    for _, n in ipairs(names) do
      make[#make + 1] = "mkdir -p \"$(dirname " .. n .. ")\" && echo 'pre-commit: {jobs: [{run: id}]}' > " .. n
    end
    local code, _, err = helpers.run(ISOLATE .. " --workdir " .. shq(wd) .. " -- bash -c " .. shq(
      "if echo x >> lefthook.yaml; then echo WROTE >&2; fi; " .. table.concat(make, " && ")))
    assert.equal(0, code, err)
    assert.is_nil(err:find("WROTE", 1, true), err)
    assert.equal("pre-commit: {}\n", helpers.read(wd .. "/lefthook.yaml"))
    for _, n in ipairs(names) do
      local top = n:match("^(%.lefthook[^/]*)/") or n
      assert.is_false(helpers.exists(wd .. "/" .. top), n)
      assert.matches(wd .. "/" .. top .. " was created or replaced inside the sandbox", err, 1, true)
    end
  end)

  it("isolate: a nested repository that was there, only used inside (status, add, commit), stays in place",
    function()
      if helpers.skip_without_bwrap() then return end
      assert.equal(0, (helpers.run("mkdir " .. shq(wd .. "/sub") .. " && cd " .. shq(wd .. "/sub") .. " && " .. GIT
        .. " init -q && " .. GIT .. " commit -q --allow-empty -m s && sleep 0.1")))
      local code, _, err = helpers.run(ISOLATE .. " --workdir " .. shq(wd) .. " -- bash -c " .. shq("cd sub && "
        .. "git status >/dev/null && echo x > f && git add f && " .. GIT .. " commit -q -m f"))
      assert.equal(0, code, err)
      assert.is_nil(err:find("nested repository", 1, true), err)
      assert.equal("directory", uv.fs_lstat(wd .. "/sub/.git").type)
    end)

  it("isolate: a protected path made a symlink to the user's data elsewhere: the end check moves the link, "
    .. "never the data it points at", function()
    if helpers.skip_without_bwrap() then return end
    local data = root .. "/userdata"
    assert(uv.fs_mkdir(data, 448))
    helpers.write(data .. "/settings.json", "mine")
    helpers.write(data .. "/hooks", "mine")
    local code, _, err = helpers.run(ISOLATE .. " --workdir " .. shq(wd) .. " -- bash -c " .. shq(
      "ln -s " .. shq(data) .. " .vscode && ln -s " .. shq(data) .. " .mcp.json && ln -s " .. shq(data)
      .. " .claude"))
    assert.equal(0, code, err)
    assert.equal("mine", helpers.read(data .. "/settings.json"))
    assert.equal("mine", helpers.read(data .. "/hooks"))
    for _, p in ipairs({ ".vscode", ".mcp.json", ".claude" }) do
      assert.is_false(helpers.exists(wd .. "/" .. p), p)
      assert.matches(wd .. "/" .. p .. " was created or replaced inside the sandbox", err, 1, true)
    end
  end)
end)

describe("escape: processes, /proc and the launch line", function()
  local root
  before_each(function()
    root = helpers.tmpdir()
    assert(uv.fs_mkdir(root .. "/wd", 448))
  end)
  after_each(function() helpers.rmtree(root) end)

  local function inside(command, extra)
    return helpers.run(ISOLATE .. " " .. (extra or "") .. " --workdir " .. shq(root .. "/wd") .. " -- bash -c "
      .. shq(command))
  end

  it("every process the sandbox shows (bwrap's init, the bridge's keeper, the shell) has the filter, "
    .. "no_new_privs and no capability: ptracing one of them (allowed: same user) gains nothing", function()
    if helpers.skip_without_bwrap() then return end
    local code, out, err = inside("sleep 0.2; for p in /proc/[0-9]*; do printf '%s %s\\n' \"${p#/proc/}\" "
      .. "\"$(grep -E '^(Seccomp|NoNewPrivs|CapEff|CapPrm|CapBnd):' $p/status | tr -s '\\t\\n' '  ')\"; done")
    assert.equal(0, code, err)
    local n = 0
    for line in out:gmatch("[^\n]+") do
      if line:find("Seccomp", 1, true) then
        n = n + 1
        assert.matches("CapPrm: 0000000000000000 CapEff: 0000000000000000 CapBnd: 0000000000000000 "
          .. "NoNewPrivs: 1 Seccomp: 2", line, 1, true)
      end
    end
    assert.is_true(n >= 3, out) -- init, keeper, shell (and the listing's own)
  end)

  it("a host process (isolate itself, this Lua process) cannot be signalled from inside; SIGKILL to bwrap's "
    .. "init from inside is ignored", function()
    if helpers.skip_without_bwrap() then return end
    local code, out, err = inside("kill -0 " .. helpers.pid() .. " 2>/dev/null && echo reached-host; "
      .. "kill -0 $PPID; kill -KILL 1; sleep 0.2; echo still-here")
    assert.equal(0, code, err)
    assert.is_nil(out:find("reached-host", 1, true), out)
    assert.truthy(out:find("still-here", 1, true), out)
  end)

  it("no file under /proc outside /proc/<pid> and /proc/sys takes a write of its own value (root inside)",
    function()
      if helpers.skip_without_bwrap() then return end
      local code, out, err = inside("for f in $(find /proc -maxdepth 3 \\( -path '/proc/[0-9]*' -o -path /proc/sys "
        .. "-o -path /proc/self -o -path /proc/thread-self \\) -prune -o -type f -print 2>/dev/null); do "
        .. "[ -w \"$f\" ] || continue; v=$(head -c 256 \"$f\" 2>/dev/null | head -n 1); "
        .. "if printf '%s\\n' \"$v\" 2>/dev/null > \"$f\"; then echo \"WROTE $f\"; fi; done 2>/dev/null; echo end")
      assert.equal(0, code, err)
      assert.equal("end\n", out)
    end)

  it("a workdir and a command holding quotes, $(), backquotes, a newline, ^U, ESC and DEL run as given: the "
    .. "sandbox starts there, nothing in them runs outside", function()
    if helpers.skip_without_bwrap() then return end
    -- a payload that would print who ran it (no "/": a file name)
    local name = "w'q\"$(id >&2)`id >&2`\n-x\21\27[2J\127;id >&2; rm -rf ~"
    local wd = root .. "/" .. name
    assert(uv.fs_mkdir(wd, 448))
    local code, out, err = helpers.run(ISOLATE .. " --workdir " .. shq(wd) .. " -- bash -c "
      .. shq("pwd; printf '%s' \"$1\"") .. " x " .. shq("$(id >&2)'\n"))
    assert.equal(0, code, err)
    assert.equal(wd .. "\n$(id >&2)'\n", out)
    assert.is_nil(err:find("uid=", 1, true), err)
  end)
end)

-- The agent writes the workdir, so it can leave a relative symlink where a
-- protected path or a pinned parent (.git, .claude) will be at the next
-- launch. bwrap follows it both ways (the host path as the source, the
-- same path inside as the destination): a pin, bound read-write, turned a
-- host directory the sandbox shows read-only (here under /usr, any path
-- that exists inside: /etc too) writable from inside.
describe("escape: a symlink planted at a protected path for the next launch", function()
  local wd, target
  before_each(function()
    wd = helpers.tmpdir()
    target = "/usr/local/share/isolation-spec-" .. helpers.pid()
    assert(os.execute("mkdir -p " .. shq(target)))
  end)
  after_each(function()
    helpers.rmtree(wd)
    os.remove(target .. "/x")
    assert(uv.fs_rmdir(target))
  end)

  local function rel_to_target()
    local ups = select(2, wd:gsub("/", "/"))
    return ("../"):rep(ups) .. target:sub(2)
  end

  it("isolate: .git as a link out of the workdir (into a directory the sandbox shows read-only) is refused, "
    .. "nothing runs, the host directory stays unwritten", function()
    if helpers.skip_without_bwrap() then return end
    assert(uv.fs_symlink(rel_to_target(), wd .. "/.git"))
    local code, out, err = helpers.run("cd " .. shq(wd) .. " && " .. ISOLATE .. " --network allow -- bash -c "
      .. shq("echo planted > " .. target .. "/x && echo wrote"))
    assert.are_not.equal(0, code)
    assert.falsy(out:find("wrote", 1, true), out)
    assert.matches(".git is a symbolic link to " .. target .. ", outside", err, 1, true)
    assert.is_false(helpers.exists(target .. "/x"), "the sandbox wrote the host's " .. target)
  end)

  it("a bare wrap() line: a protected directory (.vscode) linked out of the workdir is refused by the line "
    .. "itself; a link that stays inside the workdir launches", function()
    if helpers.skip_without_bwrap() then return end
    local isolation = require("isolation")
    assert(uv.fs_symlink(rel_to_target(), wd .. "/.vscode"))
    local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "allow" }, workdir = wd,
      command = "echo ran" }))
    local code, out, err = helpers.run(line)
    assert.are.equal(1, code, err)
    assert.are.equal("", out)
    assert.matches(".vscode is a symbolic link to " .. target .. ", outside", err, 1, true)
    assert(os.remove(wd .. "/.vscode"))
    assert(os.execute("mkdir " .. shq(wd .. "/shared")))
    assert(uv.fs_symlink("shared", wd .. "/.vscode"))
    code, out, err = helpers.run(line)
    assert.are.equal(0, code, err)
    assert.are.equal("ran\n", out)
  end)
end)
