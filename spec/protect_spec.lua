-- Protected paths (issue 13) and the agent's own config (issue 18.4): the
-- pure builders' mounts, and attacks from a shell inside a real bwrap
-- sandbox against a real git checkout and a throwaway HOME. After each
-- attack the host's copy is byte-for-byte unchanged and nothing new that a
-- host program runs exists, or the end-of-session check moved it aside.
local isolation = require("isolation")
local protect = require("isolation.protect")
local helpers = require("helpers")
local support = require("support.launch")

local q = helpers.shquote

local function uv_lstat(path)
  return require("luv").fs_lstat(path)
end

local index_of = require("support.tables").index_of

local function bwrap(spec)
  spec.config = spec.config or { mode = "bwrap", network = "allow" }
  spec.command = spec.command or "true"
  return assert(isolation.bwrap_argv(spec))
end

-- the index of `flag path path` in argv, or nil
local function mount_at(argv, flag, path, from)
  local i = from or 1
  while true do
    i = index_of(argv, flag, i)
    if not i then return nil end
    if argv[i + 1] == path and argv[i + 2] == path then return i end
    i = i + 1
  end
end

describe("protect (pure builders)", function()
  it("isolation.PROTECTED holds at least the paths the contract names", function()
    for _, p in ipairs({ ".git/hooks", ".git/config", ".git/info", ".gitmodules", ".vscode", ".idea",
      ".claude/settings.json", ".claude/settings.local.json", ".claude/commands", ".claude/agents",
      ".mcp.json", ".codex", ".gemini" }) do
      assert.truthy(index_of(isolation.PROTECTED, p), p)
    end
  end)

  it("binds each default read-only (--ro-bind-try) after the workdir, and pins each parent first", function()
    local argv = bwrap({ workdir = "/w" })
    local wd = mount_at(argv, "--bind", "/w")
    local pin = mount_at(argv, "--bind-try", "/w/.git")
    local hooks = mount_at(argv, "--ro-bind-try", "/w/.git/hooks")
    assert.truthy(wd and pin and hooks)
    assert.is_true(wd < pin and pin < hooks)
    assert.truthy(mount_at(argv, "--bind-try", "/w/.claude"))
    for _, p in ipairs(isolation.PROTECTED) do
      assert.truthy(mount_at(argv, "--ro-bind-try", "/w/" .. p), p)
    end
  end)

  it("protect = {} turns it off; a given list replaces the default", function()
    local argv = bwrap({ workdir = "/w", protect = {} })
    assert.is_nil(index_of(argv, "--ro-bind-try", 1) and mount_at(argv, "--ro-bind-try", "/w/.git/hooks"))
    argv = bwrap({ workdir = "/w/", protect = { "tools/run.sh/" } })
    assert.truthy(mount_at(argv, "--ro-bind-try", "/w/tools/run.sh"))
    assert.truthy(mount_at(argv, "--bind-try", "/w/tools"))
    assert.is_nil(mount_at(argv, "--ro-bind-try", "/w/.git/hooks"))
  end)

  it("a protected path at the same path as a read-write bind stays read-only (it comes last)", function()
    local argv = bwrap({ workdir = "/w", binds = { "/w", "/w/.vscode" } })
    local rw = assert(mount_at(argv, "--bind", "/w/.vscode"))
    local ro = assert(mount_at(argv, "--ro-bind-try", "/w/.vscode"))
    assert.is_true(rw < ro)
    local rwwd = assert(mount_at(argv, "--bind", "/w", mount_at(argv, "--bind", "/w") + 1))
    assert.is_true(rwwd < mount_at(argv, "--ro-bind-try", "/w/.git/hooks"))
  end)

  it("refuses a bad protect value, naming the field, the value and what is accepted", function()
    local bad = {
      { { "/etc/passwd" }, "protect%[1%] must be a path relative to the workdir" },
      { { "../x" }, "protect%[1%] must not contain %. or %.%. components" },
      { { "a/../../x" }, "must not contain %. or %.%. components" },
      { { "./x" }, "must not contain %. or %.%. components" },
      { { "" }, "protect%[1%] must not be empty" },
      { { "a//b" }, "empty component" },
      { { "a\0b" }, "must not contain NUL bytes" },
      { { 7 }, "protect%[1%] must be a string %(got number 7%)" },
      { "x", "protect must be an array of paths relative to the workdir" },
      { { a = "x" }, "not a map" },
    }
    for _, c in ipairs(bad) do
      local argv, err = isolation.bwrap_argv({ config = { mode = "bwrap" }, workdir = "/w", command = "x",
        protect = c[1] })
      assert.is_nil(argv)
      assert.matches(c[2], err)
    end
    local argv, err = isolation.docker_argv({ workdir = "/w", command = "x", protect = { "a:b" } })
    assert.is_nil(argv)
    assert.matches("must not contain ':' in mode docker", err)
    argv, err = isolation.bwrap_argv({ config = { mode = "bwrap" }, workdir = "/w", command = "x",
      agent_config = "ro" })
    assert.is_nil(argv)
    assert.matches('agent_config must be "read%-write".* or "read%-only" %(got "ro"%)', err)
  end)

  it("docker: pins as -v P:P and protected paths as -v P:P:ro, and a duplicate mount point is refused", function()
    local argv = assert(isolation.docker_argv({ workdir = "/w", command = "x" }))
    assert.truthy(index_of(argv, "/w/.git:/w/.git"))
    assert.truthy(index_of(argv, "/w/.git/hooks:/w/.git/hooks:ro"))
    assert.truthy(index_of(argv, "/w/.mcp.json:/w/.mcp.json:ro"))
    local _, err = isolation.docker_argv({ workdir = "/w", command = "x", ro_binds = { "/w/.vscode" } })
    assert.matches("protect %(a protected path%) mounts the same path as ro_binds%[1%]", err)
  end)

  it("dry_run lists each protected path and how it is enforced", function()
    local text = assert(isolation.dry_run({ config = { mode = "bwrap" }, workdir = "/w", command = "x" }))
    assert.matches("protected paths %(read%-only inside", text)
    assert.matches("/w/%.git/hooks  %(%-%-ro%-bind%-try: when present at launch%)", text)
    assert.matches("pinned parents", text)
    assert.matches("isolation%-quarantine", text)
    text = assert(isolation.dry_run({ config = { mode = "docker" }, workdir = "/w", command = "x" }))
    assert.matches("/w/%.vscode  %(%-v %.%.%.:ro%)", text)
    text = assert(isolation.dry_run({ config = { mode = "bwrap" }, workdir = "/w", command = "x", protect = {} }))
    assert.matches("protected paths: none", text)
  end)

  it("agent claude: ~/.claude read-write, its settings, commands, agents, hooks read-only inside", function()
    local argv = bwrap({ workdir = "/w", agent = "claude" })
    local rw = assert(mount_at(argv, "--bind-try", "$HOME/.claude"))
    for _, p in ipairs({ "settings.json", "commands", "agents", "hooks", "plugins", "skills" }) do
      local ro = assert(mount_at(argv, "--ro-bind-try", "$HOME/.claude/" .. p), p)
      assert.is_true(rw < ro)
    end
    assert.truthy(mount_at(argv, "--bind-try", "$HOME/.claude.json"))
    argv = bwrap({ workdir = "/w", agent = "codex" })
    assert.truthy(mount_at(argv, "--ro-bind-try", "$HOME/.codex/config.toml"))
    argv = bwrap({ workdir = "/w", agent = "gemini" })
    assert.truthy(mount_at(argv, "--ro-bind-try", "$HOME/.gemini/settings.json"))
    assert.truthy(mount_at(argv, "--ro-bind-try", "$HOME/.gemini/.env"))
  end)

  it("agent_config = \"read-only\" binds the whole agent config read-only", function()
    local argv = bwrap({ workdir = "/w", agent = "claude", agent_config = "read-only" })
    assert.truthy(mount_at(argv, "--ro-bind-try", "$HOME/.claude"))
    assert.truthy(mount_at(argv, "--ro-bind-try", "$HOME/.claude.json"))
    assert.is_nil(mount_at(argv, "--bind-try", "$HOME/.claude"))
    local text = assert(isolation.dry_run({ config = { mode = "bwrap" }, workdir = "/w", command = "x",
      agent = "claude", agent_config = "read-only" }))
    assert.matches("agent config: read%-only as a whole", text)
  end)
end)

describe("protect in a real bwrap sandbox", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end

  local T, home, work
  local GIT = "GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.com GIT_COMMITTER_NAME=a "
    .. "GIT_COMMITTER_EMAIL=a@example.com GIT_CONFIG_NOSYSTEM=1 git"

  local function sh(cmd)
    local code, out, err = helpers.run(cmd)
    assert(code == 0, cmd .. ": " .. err)
    return out
  end

  -- A fresh checkout: hooks, config, a .vscode dir and a .mcp.json file.
  local function fresh_repo(opts)
    opts = opts or {}
    helpers.rmtree(work)
    sh("mkdir -p " .. q(work) .. " && cd " .. q(work) .. " && git init -q . && " .. GIT
      .. " commit -q --allow-empty -m init && mkdir .vscode && printf '{}\\n' > .vscode/tasks.json"
      .. " && printf '{\"mcpServers\":{}}\\n' > .mcp.json && printf 'a\\n' > a.txt && " .. GIT .. " add a.txt && "
      .. GIT .. " commit -q -m a")
    if opts.claude then sh("mkdir -p " .. q(work .. "/.claude") .. " && printf '{}\\n' > "
      .. q(work .. "/.claude/settings.json")) end
  end

  -- Every file, link and directory under the protected places, with its
  -- mode and content hash: the host's copy before and after an attack.
  local function snapshot()
    return sh("cd " .. q(work) .. " && find .git/hooks .git/config .git/info .vscode .mcp.json .claude"
      .. " .git/commondir -xdev 2>/dev/null | sort | while read -r f; do stat -c '%n %F %a %s' \"$f\";"
      .. " [ -f \"$f\" ] && [ ! -L \"$f\" ] && sha256sum \"$f\"; done; true")
  end

  -- Runs cmd in the sandbox as isolate and the session manager do:
  -- prepare, watch, run, check. Returns code, out, err, moved.
  local function attack(cmd, extra)
    local spec = { config = { mode = "bwrap", network = "allow" }, workdir = work,
      command = "export " .. GIT:gsub(" git$", "") .. "; " .. cmd }
    for k, v in pairs(extra or {}) do spec[k] = v end
    assert(protect.prepare(spec, home))
    local watch = assert(isolation.protect_watch(spec, home))
    local line = assert(isolation.wrap(spec))
    local code, out, err = support.run_line("cd " .. q(work) .. " && " .. line, home)
    local moved = isolation.protect_check(watch, "T")
    return code, out, err, moved
  end

  local function host_git(args)
    return sh("cd " .. q(work) .. " && " .. GIT .. " " .. args)
  end

  setup(function()
    T = helpers.tmpdir()
    home, work = T .. "/home", T .. "/work"
    sh("mkdir -p " .. q(home))
  end)

  teardown(function()
    helpers.rmtree(T)
  end)

  -- the attacks, each against .git/hooks, .git/config, a directory
  -- (.vscode) and a file (.mcp.json) of the other defaults
  local ATTACKS = {
    { "write", "echo evil > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout; echo x > .git/config;"
      .. " echo evil > .vscode/tasks.json; echo evil > .vscode/new.json; echo evil > .mcp.json" },
    { "append", "echo evil >> .git/hooks/pre-commit.sample; echo '[core] fsmonitor = x' >> .git/config;"
      .. " echo evil >> .vscode/tasks.json; echo evil >> .mcp.json" },
    { "truncate", "truncate -s0 .git/hooks/pre-commit.sample .git/config .vscode/tasks.json .mcp.json;"
      .. " : > .git/config" },
    { "rm -rf", "rm -rf .git/hooks .git/config .vscode .mcp.json" },
    { "mv of the path", "mv .git/hooks .git/h2; mv .git/config .git/c2; mv .vscode v2; mv .mcp.json m2;"
      .. " mkdir -p .git/hooks .vscode; echo evil > .git/hooks/post-checkout; echo evil > .vscode/tasks.json" },
    { "mv of the parent (.git, the workdir)", "mv .git .git2 && mkdir -p .git/hooks && cp -r .git2/. .git/;"
      .. " echo evil > .git/hooks/post-checkout; cd .. && mv work work2; mkdir -p work/.vscode;"
      .. " echo evil > work/.vscode/tasks.json" },
    { "rm -rf of the parent", "rm -rf .git; mkdir -p .git/hooks; echo evil > .git/hooks/post-checkout" },
    { "replace by a symlink", "rm -rf .git/hooks; ln -sfn /tmp .git/hooks; ln -sf /tmp/x .git/config;"
      .. " ln -sfn evil .vscode; ln -sf evil .mcp.json; mkdir evil" },
    { "hard link into a writable place, write through it", "ln .git/config c; ln .git/hooks/pre-commit.sample h;"
      .. " ln .vscode/tasks.json t; ln .mcp.json m; echo evil >> c; echo evil >> h; echo evil >> t; echo evil >> m" },
    { "chmod", "chmod 777 .git/config .mcp.json .git/hooks .vscode; chmod +x .git/hooks/pre-commit.sample" },
    { "git config core.fsmonitor", "git config core.fsmonitor 'touch /tmp/pwned'; git config core.hooksPath /tmp" },
    { "git config --local", "git config --local alias.st '!touch pwned'; git config --local core.pager evil" },
    { "git init over it", "git init -q; git init -q --separate-git-dir g2 .; git init -q --template=/tmp ." },
    { "unshare a user and mount namespace and unmount or rebind", "unshare -Urm sh -c 'umount .git/hooks;"
      .. " umount -l .git/config; mount --bind . /mnt && echo evil > /mnt/.git/hooks/post-checkout' 2>/dev/null" },
  }

  for _, a in ipairs(ATTACKS) do
    it("attack '" .. a[1] .. "': the host's protected files are unchanged, nothing new runs", function()
      fresh_repo()
      local before = snapshot()
      local config_before = helpers.read(work .. "/.git/config")
      local _, _, _, moved = attack(a[2])
      assert.are.equal(before, snapshot())
      assert.are.equal(config_before, helpers.read(work .. "/.git/config"))
      assert.are.same({}, moved)
      assert.is_nil(helpers.read(work .. "/.git/hooks/post-checkout"))
      assert.is_nil(helpers.read(T .. "/work2/.vscode/tasks.json"))
    end)
  end

  it("as an ordinary user: unshare -Urm (refused), else umount, umount -l, a non-recursive rebind, a remount rw",
    function()
    local probe = helpers.run("[ \"$(id -u)\" = 0 ] && command -v runuser >/dev/null"
      .. " && runuser -u nobody -- unshare -Ur true")
    if probe ~= 0 then
      pending("needs root (to become nobody) and unprivileged user namespaces")
      return
    end
    local dir = helpers.tmpdir()
    sh("chmod 755 " .. q(dir) .. " && mkdir -p " .. q(dir .. "/home") .. " && cd " .. q(dir)
      .. " && git init -q r && chown -R nobody " .. q(dir))
    local r = dir .. "/r"
    helpers.write(r .. "/try.sh", [[
unshare -Urm true 2>/dev/null; echo "unshare:$?"
unshare -Urm sh -c '
  umount "$1/.git/hooks" 2>/dev/null; echo "umount:$?"
  umount -l "$1/.git/config" 2>/dev/null; echo "lazy:$?"
  mkdir -p /tmp/m && mount --bind "$1" /tmp/m 2>/dev/null; echo "bind:$?"
  mount -o remount,rw,bind "$1/.git/hooks" 2>/dev/null; echo "remount:$?"
  echo evil > "$1/.git/hooks/post-checkout"; echo evil > /tmp/m/.git/hooks/post-checkout
  echo evil >> "$1/.git/config"
' sh "$PWD" 2>/dev/null
]])
    local config = helpers.read(r .. "/.git/config")
    local spec = { config = { mode = "bwrap", network = "allow" }, workdir = r, command = "sh try.sh" }
    local line = assert(isolation.wrap(spec))
    local _, out, err = helpers.run("cd " .. q(r) .. " && runuser -u nobody -- env HOME=" .. q(dir .. "/home")
      .. " sh -c " .. q(line))
    -- Since --disable-userns (and the sandbox filter's unshare rule) no
    -- user namespace can be made inside at all; where one could, each step
    -- must still fail on the locked mounts.
    if not out:find("unshare:[1-9]") then
      for _, step in ipairs({ "umount", "lazy", "bind", "remount" }) do
        assert.matches(step .. ":[1-9]", out, nil, false, err .. out) -- it ran, and failed
      end
    end
    assert.is_nil(helpers.read(r .. "/.git/hooks/post-checkout"))
    assert.are.equal(config, helpers.read(r .. "/.git/config"))
    helpers.rmtree(dir)
  end)

  it("the attack is real: with protect = {} the same write reaches the host", function()
    fresh_repo()
    attack("echo evil > .git/hooks/post-checkout; echo evil >> .mcp.json", { protect = {} })
    assert.are.equal("evil\n", helpers.read(work .. "/.git/hooks/post-checkout"))
    fresh_repo()
    attack("mv .git .git2 && mkdir -p .git/hooks && echo evil > .git/hooks/post-checkout",
      { protect = { ".git/hooks" }, })
    assert.is_nil(helpers.read(work .. "/.git/hooks/post-checkout")) -- pinned: refused
  end)

  it("creating a missing protected path: found at the end, reported, moved aside, nothing deleted", function()
    fresh_repo()
    local code, _, _, moved = attack("mkdir -p .claude && echo '{\"hooks\":{}}' > .claude/settings.json"
      .. " && echo memory > .claude/CLAUDE.md && mkdir -p .claude/commands && echo x > .claude/commands/c.md"
      .. " && echo ../evil > .git/commondir")
    assert.are.equal(0, code)
    local paths = {}
    for _, m in ipairs(moved) do paths[m.path] = m.moved_to end
    assert.are.equal(work .. "/.claude/settings.json.isolation-quarantine-T", paths[work .. "/.claude/settings.json"])
    assert.are.equal(work .. "/.claude/commands.isolation-quarantine-T", paths[work .. "/.claude/commands"])
    assert.are.equal(work .. "/.git/commondir.isolation-quarantine-T", paths[work .. "/.git/commondir"])
    assert.is_nil(helpers.read(work .. "/.claude/settings.json"))
    assert.is_nil(helpers.read(work .. "/.git/commondir"))
    assert.are.equal('{"hooks":{}}\n', helpers.read(work .. "/.claude/settings.json.isolation-quarantine-T"))
    assert.are.equal("x\n", helpers.read(work .. "/.claude/commands.isolation-quarantine-T/c.md"))
    -- the agent's project memory, not in the list, stays where it was written
    assert.are.equal("memory\n", helpers.read(work .. "/.claude/CLAUDE.md"))
    host_git("status --short") -- the repository works on the host
  end)

  it("a symlink made in place of a missing parent is moved aside, not followed", function()
    fresh_repo()
    sh("mkdir -p " .. q(T .. "/victim") .. " && echo mine > " .. q(T .. "/victim/settings.json"))
    local _, _, _, moved = attack("mkdir real && echo evil > real/settings.json && ln -s real .claude"
      .. " && ln -s " .. q(T .. "/victim") .. " .idea.tmp && mv .idea.tmp .idea")
    local paths = {}
    for _, m in ipairs(moved) do paths[m.path] = m.moved_to end
    assert.truthy(paths[work .. "/.claude"])
    assert.truthy(paths[work .. "/.idea"])
    assert.are.equal("mine\n", helpers.read(T .. "/victim/settings.json"))
    assert.are.equal("evil\n", helpers.read(work .. "/real/settings.json")) -- moved nothing it points to
  end)

  it("the end check does not move what existed before or a new quarantine name twice", function()
    fresh_repo()
    sh("mkdir -p " .. q(work .. "/.idea"))
    local _, _, _, moved = attack("true")
    assert.are.same({}, moved)
    local _, _, _, moved2 = attack("echo x > .gitmodules")
    assert.are.equal(1, #moved2)
    local _, _, _, moved3 = attack("echo y > .gitmodules")
    assert.are.equal(work .. "/.gitmodules.isolation-quarantine-T-1", moved3[1].moved_to)
    assert.are.equal("x\n", helpers.read(work .. "/.gitmodules.isolation-quarantine-T"))
  end)

  it("git keeps working inside: add, commit, branch, checkout, stash, log, diff", function()
    fresh_repo({ claude = true })
    local code, out, err = attack("set -e; echo b > b.txt; git add b.txt; git commit -q -m b; git branch topic;"
      .. " git checkout -q topic; echo c >> a.txt; git stash -q; git stash pop -q; git diff --stat;"
      .. " git commit -qam c; git checkout -q -; git log --oneline | wc -l;"
      .. " echo memory > .claude/CLAUDE.md; mkdir -p .claude/notes && echo n > .claude/notes/n.md")
    assert.are.equal(0, code, err)
    assert.matches("a.txt | 1 +", out)
    assert.matches("3\n$", out)
    assert.matches("c\n", host_git("log --oneline topic"))
    assert.are.equal("memory\n", helpers.read(work .. "/.claude/CLAUDE.md"))
    assert.are.equal("n\n", helpers.read(work .. "/.claude/notes/n.md"))
  end)

  it("a .git file (separate git dir inside the workdir): the pointer and the real hooks and config", function()
    helpers.rmtree(work)
    sh("mkdir -p " .. q(work) .. " && cd " .. q(work) .. " && git init -q --separate-git-dir .realgit . && "
      .. GIT .. " commit -q --allow-empty -m init")
    local extra = isolation.protect_git(work)
    assert.truthy(index_of(extra, ".git"))
    assert.truthy(index_of(extra, ".realgit/hooks"))
    assert.truthy(index_of(extra, ".realgit/config"))
    local pointer = helpers.read(work .. "/.git")
    local config = helpers.read(work .. "/.realgit/config")
    local code, out = attack("echo 'gitdir: evil' > .git; echo evil > .realgit/hooks/post-checkout;"
      .. " echo '[core] fsmonitor=x' >> .realgit/config; mv .realgit r2; git log --oneline | wc -l")
    assert.are.equal(0, code)
    assert.matches("1", out) -- git still works
    assert.are.equal(pointer, helpers.read(work .. "/.git"))
    assert.are.equal(config, helpers.read(work .. "/.realgit/config"))
    assert.is_nil(helpers.read(work .. "/.realgit/hooks/post-checkout"))
  end)

  it("a submodule's git dir under .git/modules: its hooks and config are protected", function()
    fresh_repo()
    sh("cd " .. q(work) .. " && mkdir -p .git/modules && git init -q --separate-git-dir .git/modules/sub sub")
    local extra = isolation.protect_git(work)
    assert.truthy(index_of(extra, ".git/modules/sub/hooks"))
    local config = helpers.read(work .. "/.git/modules/sub/config")
    attack("echo evil > .git/modules/sub/hooks/post-checkout; echo '[core] fsmonitor=x' >> .git/modules/sub/config")
    assert.is_nil(helpers.read(work .. "/.git/modules/sub/hooks/post-checkout"))
    assert.are.equal(config, helpers.read(work .. "/.git/modules/sub/config"))
  end)

  it("isolate: --dry-run lists them, the end check reports on stderr, --no-protect turns it off", function()
    local cli = require("support.cli")
    fresh_repo()
    local env = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" .. home }
    local status, out = cli.isolate({ "--network", "allow", "--workdir", work, "--protect", "tools",
      "--dry-run", "--", "true" }, { env = env })
    assert.are.equal(0, status)
    assert.matches("protected paths", out)
    assert.matches(work .. "/tools  (--ro-bind-try", out, 1, true)
    local _, err
    status, _, err = cli.isolate({ "--network", "allow", "--workdir", work, "--", "bash", "-c",
      "echo evil > .git/hooks/post-checkout; mkdir -p .claude && echo x > .claude/settings.json" }, { env = env })
    assert.are.equal(0, status)
    assert.is_nil(helpers.read(work .. "/.git/hooks/post-checkout"))
    assert.matches("isolate: protect: " .. work .. "/.claude/settings.json was created or replaced inside the "
      .. "sandbox (missing before, file after); moved aside to " .. work .. "/.claude/settings.json.isolation-"
      .. "quarantine-", err, 1, true)
    status = cli.isolate({ "--network", "allow", "--workdir", work, "--no-protect", "--", "bash", "-c",
      "echo evil > .git/hooks/post-checkout" }, { env = env })
    assert.are.equal(0, status)
    assert.are.equal("evil\n", helpers.read(work .. "/.git/hooks/post-checkout"))
    status, _, err = cli.isolate({ "--no-protect", "--protect", "x", "--", "true" }, { env = env })
    assert.are.equal(2, status)
    assert.matches("contradict", err)
  end)

  it("the session manager checks at the end: log line, session fields, on_end's third argument", function()
    local session = require("isolation.session")
    fresh_repo()
    local dir = T .. "/run"
    sh("mkdir -p " .. q(dir) .. " && chmod 700 " .. q(dir))
    local logged, ended = {}, nil
    local mgr = assert(session.manager({ runtime_dir = dir,
      launcher = function(cmdline) support.run_line(cmdline, home); return {} end,
      alive = function() return false end,
      on_end = function(s, reason, moved) ended = { s = s, reason = reason, moved = moved } end,
      log = function(l) logged[#logged + 1] = l end }))
    local s = assert(mgr:launch({ id = "p1", workdir = work, isolation = { mode = "bwrap", network = "allow" },
      command = "cd " .. q(work) .. " && echo evil > .git/hooks/post-checkout; echo '{}' > .mcp.json.new;"
        .. " mkdir -p .claude && echo x > .claude/settings.json" }))
    assert.are.equal(1, mgr:poll())
    assert.is_nil(helpers.read(work .. "/.git/hooks/post-checkout"))
    assert.are.equal("exited", ended.reason)
    assert.are.equal(1, #ended.moved)
    assert.are.same(ended.moved, s.protect_moved)
    assert.are.equal(1, ended.moved[1].moved_to:find(work .. "/.claude/settings.json.isolation-quarantine-", 1, true))
    assert.matches('session "p1": protect: .*moved aside', table.concat(logged, "\n"))
    mgr:close()
  end)

  it("a symlinked protected path: the target inside the workdir is read-only, a replaced link moved aside;"
    .. " a target the sandbox does not show is refused before the launch", function()
    fresh_repo()
    sh("cd " .. q(work) .. " && mkdir -p shared && mv .vscode shared/vscode && ln -s shared/vscode .vscode")
    local _, _, _, moved = attack("echo evil > shared/vscode/tasks.json; echo evil > .vscode/tasks.json;"
      .. " rm .vscode && mkdir .vscode && echo evil > .vscode/tasks.json")
    assert.are.equal("{}\n", helpers.read(work .. "/shared/vscode/tasks.json"))
    assert.are.equal(1, #moved)
    assert.are.equal(work .. "/.vscode", moved[1].path)
    assert.is_nil(helpers.read(work .. "/.vscode/tasks.json"))
    helpers.write(T .. "/elsewhere.json", "{}\n")
    sh("cd " .. q(work) .. " && rm -f .mcp.json && ln -s " .. q(T .. "/elsewhere.json") .. " .mcp.json")
    local ok, err = protect.prepare({ config = { mode = "bwrap" }, workdir = work, command = "true" }, home)
    assert.is_nil(ok)
    assert.matches("%.mcp%.json is a symlink to .*, which the sandbox does not show", err)
    assert.truthy(protect.prepare({ config = { mode = "bwrap" }, workdir = work, command = "true",
      ro_binds = { T } }, home))
  end)

  it("core.hooksPath inside the workdir (.githooks, .husky/_): protected, and its creation checked", function()
    fresh_repo()
    sh("cd " .. q(work) .. " && git config core.hooksPath .githooks && mkdir .githooks"
      .. " && printf '#!/bin/sh\\n' > .githooks/pre-commit")
    assert.truthy(index_of(isolation.protect_git(work), ".githooks"))
    local before = helpers.read(work .. "/.githooks/pre-commit")
    attack("echo evil >> .githooks/pre-commit; echo evil > .githooks/post-checkout")
    assert.are.equal(before, helpers.read(work .. "/.githooks/pre-commit"))
    assert.is_nil(helpers.read(work .. "/.githooks/post-checkout"))
    sh("cd " .. q(work) .. " && rm -rf .githooks && git config core.hooksPath 'hooks dir/'")
    assert.truthy(index_of(isolation.protect_git(work), "hooks dir"))
    local _, _, _, moved = attack("mkdir -p 'hooks dir' && echo evil > 'hooks dir/pre-commit'")
    assert.are.equal(1, #moved)
    assert.are.equal(work .. "/hooks dir", moved[1].path)
  end)

  it("a linked worktree outside the workdir: its commondir (which names its config and hooks) is protected", function()
    fresh_repo()
    sh("cd " .. q(work) .. " && git worktree add -q " .. q(T .. "/linked") .. " 2>/dev/null")
    local extra = isolation.protect_git(work)
    assert.truthy(index_of(extra, ".git/worktrees/linked/commondir"))
    local before = helpers.read(work .. "/.git/worktrees/linked/commondir")
    attack("mkdir -p evil && cp -r .git/config .git/objects .git/refs .git/HEAD evil/ 2>/dev/null;"
      .. " echo " .. q(work .. "/evil") .. " > .git/worktrees/linked/commondir;"
      .. " echo '[core] fsmonitor = x' > .git/worktrees/linked/config.worktree")
    assert.are.equal(before, helpers.read(work .. "/.git/worktrees/linked/commondir"))
    -- config.worktree did not exist: created inside, moved aside at the end
    assert.is_nil(helpers.read(work .. "/.git/worktrees/linked/config.worktree"))
  end)

  it("a workdir that is not a repository: a .git made inside keeps no config or hooks on the host", function()
    helpers.rmtree(work)
    sh("mkdir -p " .. q(work))
    local _, _, _, moved = attack("git init -q . && git config core.fsmonitor 'touch pwned'"
      .. " && echo evil > .git/hooks/post-checkout")
    assert.is_nil(helpers.read(work .. "/.git/config"))
    assert.is_nil(helpers.read(work .. "/.git/hooks/post-checkout"))
    assert.truthy(#moved >= 2)
    sh("cd " .. q(work) .. " && test -z \"$(git config core.fsmonitor)\"")
  end)

  it("the session manager, docker on a remote target: no protected path docker would create there", function()
    local session = require("isolation.session")
    local dir = T .. "/run2"
    sh("mkdir -p " .. q(dir) .. " && chmod 700 " .. q(dir))
    local logged, line = {}, nil
    local mgr = assert(session.manager({ runtime_dir = dir, launcher = function(l) line = l; return {} end,
      log = function(l) logged[#logged + 1] = l end }))
    assert(mgr:launch({ id = "d1", workdir = "/srv/w", isolation = { mode = "docker", network = "allow" },
      command = "true", target = { kind = "ssh", host = "u@h.example.net" } }))
    assert.is_nil(line:find(".git/hooks", 1, true))
    assert.matches("protect: not applied: docker on a remote target", table.concat(logged, "\n"))
    assert(mgr:launch({ id = "d2", workdir = "/srv/w", isolation = { mode = "docker", network = "allow" },
      command = "true", target = { kind = "ssh", host = "u@h.example.net" }, protect = { ".git/hooks" } }))
    assert.truthy(line:find("/srv/w/.git/hooks:/srv/w/.git/hooks:ro", 1, true))
    mgr:close()
  end)

  describe("the agent's own config (throwaway HOME)", function()
    local function fresh_home()
      helpers.rmtree(home)
      sh("mkdir -p " .. q(home .. "/.claude/commands") .. " " .. q(home .. "/.codex") .. " "
        .. q(home .. "/.gemini"))
      helpers.write(home .. "/.claude/settings.json", '{"hooks":{}}\n')
      helpers.write(home .. "/.claude/commands/c.md", "c\n")
      helpers.write(home .. "/.claude/.credentials.json", '{"token":"old"}\n')
      helpers.write(home .. "/.claude.json", '{"numStartups":1}\n')
      helpers.write(home .. "/.codex/config.toml", "model = \"x\"\n")
      helpers.write(home .. "/.codex/auth.json", "{}\n")
      helpers.write(home .. "/.gemini/settings.json", "{}\n")
      helpers.write(home .. "/.gemini/oauth_creds.json", "{}\n")
    end
    local function home_snapshot()
      return sh("cd " .. q(home) .. " && find .claude/settings.json .claude/commands .claude/agents"
        .. " .codex/config.toml .gemini/settings.json 2>/dev/null | sort | while read -r f; do"
        .. " stat -c '%n %F %a %s' \"$f\"; [ -f \"$f\" ] && sha256sum \"$f\"; done; true")
    end

    local HOME_ATTACKS = {
      { "write, append, truncate", "echo evil > ~/.claude/settings.json; echo evil >> ~/.claude/commands/c.md;"
        .. " truncate -s0 ~/.codex/config.toml; echo '{\"mcpServers\":{\"x\":{}}}' > ~/.gemini/settings.json" },
      { "rm -rf and mv of the path", "rm -rf ~/.claude/commands ~/.claude/settings.json; mv ~/.codex/config.toml"
        .. " ~/.codex/c2; mv ~/.claude/commands ~/.claude/c2; mkdir -p ~/.claude/commands; echo e >"
        .. " ~/.claude/commands/e.md" },
      { "mv of the parent", "mv ~/.claude ~/.claude2; mv ~/.codex ~/.codex2; mkdir -p ~/.claude/commands;"
        .. " echo evil > ~/.claude/settings.json" },
      { "replace by a symlink", "ln -sf /tmp/x ~/.claude/settings.json; ln -sfn /tmp ~/.claude/commands;"
        .. " ln -sf /tmp/y ~/.codex/config.toml" },
      { "hard link and write through it", "ln ~/.claude/settings.json ~/.claude/s; echo evil >> ~/.claude/s;"
        .. " ln ~/.codex/config.toml ~/.codex/c; echo evil >> ~/.codex/c" },
      { "chmod", "chmod 777 ~/.claude/settings.json ~/.claude/commands ~/.codex/config.toml" },
    }
    for _, a in ipairs(HOME_ATTACKS) do
      it("attack '" .. a[1] .. "': the host's agent settings and commands are unchanged", function()
        fresh_repo()
        for _, agent in ipairs({ "claude", "codex", "gemini" }) do
          fresh_home()
          local before = home_snapshot()
          local _, _, _, moved = attack(a[2], { agent = agent })
          assert.are.equal(before, home_snapshot(), agent)
          assert.are.same({}, moved, agent)
        end
      end)
    end

    it("a symlinked settings.json: inside ~/.claude its target is read-only and a replaced link is moved"
      .. " aside; pointing outside (dotfiles), the launch is refused with what to do", function()
      fresh_repo()
      fresh_home()
      sh("cd " .. q(home .. "/.claude") .. " && mkdir -p settings.d && mv settings.json settings.d/s.json"
        .. " && ln -s settings.d/s.json settings.json")
      local _, _, _, moved = attack("echo evil > ~/.claude/settings.d/s.json; rm ~/.claude/settings.json &&"
        .. " echo evil > ~/.claude/settings.json", { agent = "claude" })
      assert.are.equal('{"hooks":{}}\n', helpers.read(home .. "/.claude/settings.d/s.json"))
      assert.are.equal(1, #moved)
      assert.are.equal("symlink:settings.d/s.json", moved[1].was)
      assert.is_nil(uv_lstat(home .. "/.claude/settings.json"))
      fresh_home()
      sh("mkdir -p " .. q(home .. "/dotfiles") .. " && mv " .. q(home .. "/.claude/settings.json") .. " "
        .. q(home .. "/dotfiles/") .. " && ln -s ../dotfiles/settings.json " .. q(home .. "/.claude/settings.json"))
      local spec = { config = { mode = "bwrap", network = "allow" }, workdir = work, command = "true",
        agent = "claude" }
      local ok, err = protect.prepare(spec, home)
      assert.is_nil(ok)
      assert.matches("is a symlink to .*dotfiles/settings.json, which the sandbox does not show", err)
      assert.matches('agent_config = "read%-only"', err)
      spec.agent_config = "read-only"
      assert.truthy(protect.prepare(spec, home))
    end)

    it("creating a missing part that names commands (~/.claude/agents) is moved aside at the end", function()
      fresh_repo()
      fresh_home()
      local _, _, _, moved = attack("mkdir -p ~/.claude/agents && echo evil > ~/.claude/agents/a.md",
        { agent = "claude" })
      assert.are.equal(1, #moved)
      assert.are.equal(home .. "/.claude/agents.isolation-quarantine-T", moved[1].moved_to)
      assert.is_nil(helpers.read(home .. "/.claude/agents/a.md"))
    end)

    it("credentials and state stay writable: a token refresh persists", function()
      fresh_repo()
      fresh_home()
      local code, _, err = attack("echo new > ~/.claude/.credentials.json && echo '{}' > ~/.claude.json"
        .. " && mkdir -p ~/.claude/projects && echo t > ~/.claude/projects/t.jsonl", { agent = "claude" })
      assert.are.equal(0, code, err)
      assert.are.equal("new\n", helpers.read(home .. "/.claude/.credentials.json"))
      assert.are.equal("{}\n", helpers.read(home .. "/.claude.json"))
      code, _, err = attack("echo new > ~/.codex/auth.json && mkdir -p ~/.codex/sessions", { agent = "codex" })
      assert.are.equal(0, code, err)
      assert.are.equal("new\n", helpers.read(home .. "/.codex/auth.json"))
      code, _, err = attack("echo new > ~/.gemini/oauth_creds.json", { agent = "gemini" })
      assert.are.equal(0, code, err)
      assert.are.equal("new\n", helpers.read(home .. "/.gemini/oauth_creds.json"))
    end)

    it("agent_config = \"read-only\": ~/.claude.json (user MCP servers and state) cannot be written", function()
      fresh_repo()
      fresh_home()
      attack("echo '{\"mcpServers\":{\"x\":{\"command\":\"evil\"}}}' > ~/.claude.json;"
        .. " echo new > ~/.claude/.credentials.json", { agent = "claude", agent_config = "read-only" })
      assert.are.equal('{"numStartups":1}\n', helpers.read(home .. "/.claude.json"))
      assert.are.equal('{"token":"old"}\n', helpers.read(home .. "/.claude/.credentials.json"))
    end)
  end)
end)

describe("protect.resolved_homes (the homes no bind may be or contain)", function()
  it("resolves a symlinked $HOME to the directory it names, adds the passwd entry's home once, "
    .. "and keeps that home when $HOME is unset", function()
    local uv = require("luv")
    local dir = helpers.tmpdir()
    local real = assert(uv.fs_realpath(dir))
    assert(uv.fs_mkdir(real .. "/h", 448))
    assert(uv.fs_symlink(real .. "/h", real .. "/link"))
    local pw = assert(uv.os_get_passwd())
    local pw_home = uv.fs_realpath(pw.homedir) or pw.homedir
    local homes = protect.resolved_homes(real .. "/link")
    assert.are.same({ path = real .. "/h", name = "$HOME" }, homes[1])
    assert.are.same({ { path = pw_home, name = "the passwd entry's home" } }, { homes[2] })
    -- the passwd entry's home is named once, even when $HOME is it
    assert.are.equal(1, #protect.resolved_homes(pw.homedir))
    -- no $HOME: the passwd entry's home still counts
    assert.are.same({ { path = pw_home, name = "the passwd entry's home" } }, protect.resolved_homes(nil))
    -- a relative HOME is no home
    assert.are.same({ { path = pw_home, name = "the passwd entry's home" } }, protect.resolved_homes("rel/home"))
    helpers.rmtree(dir)
  end)
end)
