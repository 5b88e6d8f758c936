-- The whole home, and the host's system directories, never reach a sandbox
-- read-write (issue 18.3, 19.4) and a line without a usable HOME runs
-- nothing (issue 11.5). Every way in, tried as a caller and as whatever
-- shell runs the line: the wrap() line's own run-time check (sh and bash,
-- with and without exec, an interactive shell), the pure builders, isolate
-- (after realpath) and the session manager (uv.fs_realpath).
--
-- Attacks tried: a workdir that is $HOME (as given, with a trailing slash,
-- HOME with a trailing slash or a leading //, a symlink to the home, a
-- symlinked HOME); a workdir above it (the parent, the top-level directory
-- of the tree, / through a symlink); a bind or ro_bind of the home ($HOME/
-- alone, $HOME/., $HOME/.., a $HOME/link -> $HOME, a link -> .., an agent
-- config dir that is a symlink to the home, an absolute ro_bind of the
-- parent); a HOME pointed elsewhere while the workdir is the passwd home;
-- HOME unset, empty, relative, /, //, with . or ..; a workdir or bind in
-- or at every system directory, with trailing slashes, and a symlink into
-- /etc/cron.d and /usr/bin.
local uv = require("luv")
local isolation = require("isolation")
local helpers = require("helpers")
local cli = require("support.cli")

local q = helpers.shquote

-- a tree: <t>/home/u (the home, with .ssh), <t>/home/u/proj (a project),
-- links to the home, to its parent, to /, and a stand-in bwrap and docker
-- that record that they ran
local function tree()
  local t = helpers.tmpdir()
  local home = t .. "/home/u"
  assert.are.equal(0, (helpers.run("mkdir -p " .. q(home .. "/proj") .. " " .. q(home .. "/.ssh") .. " "
    .. q(t .. "/bin") .. " " .. q(t .. "/marks") .. " && echo secret > " .. q(home .. "/.ssh/id")
    .. " && ln -s " .. q(home) .. " " .. q(t .. "/homelink")
    .. " && ln -s " .. q(home) .. " " .. q(home .. "/self")
    .. " && ln -s .. " .. q(home .. "/proj/up")
    .. " && ln -s / " .. q(t .. "/rootlink"))))
  for _, name in ipairs({ "bwrap", "docker" }) do
    -- the path is written in: the line starts bwrap with a clean environment
    helpers.write(t .. "/bin/" .. name, "#!/bin/sh\nprintf '%s\\0' \"$0\" \"$@\" > " .. q(t .. "/ran") .. "\n")
    assert(os.execute("chmod +x " .. q(t .. "/bin/" .. name)))
  end
  return { root = t, home = home, proj = home .. "/proj", ran = t .. "/ran", marks = t .. "/marks" }
end

-- Runs the line under `shell` with exactly the environment given (env -i):
-- HOME only when home is a string. Returns status, stderr, and whether the
-- stand-in ran.
local function run_line(t, line, home, shell, use_exec)
  os.remove(t.ran)
  local env = "env -i PATH=" .. q(t.root .. "/bin:/usr/bin:/bin") .. " RAN=" .. q(t.ran)
  if home then env = env .. " HOME=" .. q(home) end
  local code, out, err = helpers.run("cd " .. q(t.marks) .. " && " .. env .. " " .. shell .. " -c "
    .. q((use_exec and "exec " or "") .. line))
  return code, err, helpers.read(t.ran) ~= nil, out
end

local SHELLS = { "/bin/sh", "dash", "bash" }

local function bwrap_line(spec)
  spec.config = spec.config or { mode = "bwrap" }
  spec.command = spec.command or "cat ~/.ssh/id; echo x >> ~/.bashrc"
  return assert(isolation.wrap(spec))
end

local function docker_line(spec)
  spec.config = { mode = "docker" }
  return bwrap_line(spec)
end

-- the line refuses under every shell, with and without exec: one line on
-- stderr starting "isolation: " and matching `want`, the stand-in never ran
local function assert_refused(t, line, home, want)
  for _, shell in ipairs(SHELLS) do
    for _, use_exec in ipairs({ false, true }) do
      local code, err, ran = run_line(t, line, home, shell, use_exec)
      local what = shell .. (use_exec and " exec" or "") .. " HOME=" .. tostring(home) .. ": " .. err
      assert.is_false(ran, what)
      assert.are_not.equal(0, code, what)
      assert.truthy(err:find("^isolation: ") and err:find(want, 1, true), what)
      assert.are.equal(1, select(2, err:gsub("\n", "")), what)
    end
  end
  local _, listing = helpers.run("ls -A " .. q(t.marks))
  assert.are.equal("", listing)
end

local function assert_runs(t, line, home)
  for _, shell in ipairs(SHELLS) do
    for _, use_exec in ipairs({ false, true }) do
      local code, err, ran = run_line(t, line, home, shell, use_exec)
      assert.are.equal(0, code, shell .. ": " .. err)
      assert.is_true(ran, shell .. ": " .. err)
    end
  end
end

describe("a wrap() line at run time", function()
  local t
  before_each(function() t = tree() end)
  after_each(function() helpers.rmtree(t.root) end)

  it("without a usable HOME (unset, empty, relative, /, //, . or ..) refuses and runs nothing, bwrap and docker",
    function()
      for _, make in ipairs({ bwrap_line, docker_line }) do
        local line = make({ workdir = t.proj })
        assert_refused(t, line, false, "HOME is unset, empty or relative")
        assert_refused(t, line, "", "HOME is unset, empty or relative")
        assert_refused(t, line, "home/u", "HOME is unset, empty or relative (got HOME=\"home/u\")")
        assert_refused(t, line, "/", "HOME must be an absolute path other than /")
        assert_refused(t, line, "//", "resolves to /")
        assert_refused(t, line, t.home .. "/.", "without . or ..")
        assert_refused(t, line, t.proj .. "/..", "without . or ..")
        assert_refused(t, line, t.home .. "/../u", "without . or ..")
      end
    end)

  it("runs the argv when HOME is usable and the workdir inside it (HOME with a trailing slash, //, a symlink)",
    function()
      for _, make in ipairs({ bwrap_line, docker_line }) do
        local line = make({ workdir = t.proj, binds = { "$HOME/proj" }, ro_binds = { t.proj .. "/x/" } })
        for _, home in ipairs({ t.home, t.home .. "/", "/" .. t.home, t.root .. "/homelink" }) do
          assert_runs(t, line, home)
        end
        -- a HOME that does not exist has nothing to expose
        assert_runs(t, line, t.root .. "/nowhere")
      end
    end)

  it("works under a caller's set -eu, with binds that do not exist (the check's own statuses stay 0)", function()
    local line = bwrap_line({ workdir = t.proj, binds = { t.root .. "/none" }, ro_binds = { "$HOME/none" } })
    for _, shell in ipairs(SHELLS) do
      assert.is_true(select(3, run_line(t, "set -eu; " .. line, t.home, shell)), shell)
      local code, err, ran = run_line(t, "set -eu; " .. bwrap_line({ workdir = t.home }), t.home, shell)
      assert.is_false(ran, shell)
      assert.are_not.equal(0, code)
      assert.truthy(err:find("isolation: workdir", 1, true), err)
    end
  end)

  it("refuses a workdir that is $HOME: as given, trailing slashes, a symlink to it, a symlinked HOME", function()
    for _, make in ipairs({ bwrap_line, docker_line }) do
      for _, case in ipairs({
        { t.home, t.home }, { t.home .. "/", t.home }, { t.home, t.home .. "/" }, { t.home, "/" .. t.home },
        { t.root .. "/homelink", t.home }, { t.home, t.root .. "/homelink" }, { t.home .. "/self", t.home },
      }) do
        assert_refused(t, make({ workdir = case[1] }), case[2], "workdir " .. case[1] .. " is $HOME (" .. t.home)
      end
    end
  end)

  it("refuses a workdir above $HOME: the parent, the tree's top, / through a symlink, .. through a symlink", function()
    for _, make in ipairs({ bwrap_line, docker_line }) do
      for _, w in ipairs({ t.root .. "/home", t.root, t.root .. "/rootlink", t.proj .. "/up" }) do
        assert_refused(t, make({ workdir = w }), t.home, "workdir " .. w .. " is $HOME (")
      end
    end
    -- the top-level directory above the home is refused by the builder itself
    local line, err = isolation.wrap({ config = { mode = "bwrap" }, workdir = "/tmp", command = "c" })
    assert.is_nil(line)
    assert.matches("workdir must not be /, a system directory", err)
  end)

  it("refuses a bind or ro_bind that is the home or above it, through $HOME/ links and absolute paths", function()
    for _, make in ipairs({ bwrap_line, docker_line }) do
      for _, case in ipairs({
        { binds = { "$HOME/self" } }, { ro_binds = { "$HOME/self" } }, { binds = { "$HOME/proj/up" } },
        { ro_binds = { t.root .. "/home" } }, { binds = { t.root .. "/homelink" } },
        { ro_binds = { t.proj .. "/x", t.root .. "/rootlink" } },
      }) do
        case.workdir = t.proj
        local field = case.binds and "binds[1]" or (#case.ro_binds == 2 and "ro_binds[2]" or "ro_binds[1]")
        assert_refused(t, make(case), t.home, field .. " ")
      end
    end
  end)

  it("refuses an agent's config directory that is a symlink to the home", function()
    assert.are.equal(0, (helpers.run("ln -s . " .. q(t.home .. "/.claude"))))
    for _, make in ipairs({ bwrap_line, docker_line }) do
      assert_refused(t, make({ workdir = t.proj, agent = "claude" }), t.home,
        "agent config " .. t.home .. "/.claude is")
    end
  end)

  it("refuses $HOME itself as a bind in the builder: $HOME, $HOME/, $HOME/., $HOME/.., //home/u", function()
    for _, p in ipairs({ "$HOME", "$HOME/", "$HOME/.", "$HOME/..", "$HOME/x/..", "//home/u", "/", "/home", "/root" }) do
      for _, field in ipairs({ "binds", "ro_binds" }) do
        for _, mode in ipairs({ "bwrap", "docker" }) do
          local line, err = isolation.wrap({ config = { mode = mode }, workdir = "/srv/w", command = "c",
            [field] = { p } })
          assert.is_nil(line, p)
          assert.truthy(err:find("^isolation: " .. field .. "%[1%] must not") and err:find(p, 1, true), err)
        end
      end
    end
  end)

  it("under real bwrap (sh and bash): the home refused, a project inside it runs and sees an empty home", function()
    if helpers.skip_without_bwrap() then return end
    local cmd = "cat ~/.ssh/id 2>&1; echo x >> ~/.bashrc; echo ran"
    for _, shell in ipairs({ "/bin/sh", "bash" }) do
      for _, w in ipairs({ t.home, t.root .. "/home", t.root .. "/homelink" }) do
        local line = bwrap_line({ workdir = w, command = cmd })
        local code, out, err = helpers.run("env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=" .. q(t.home) .. " "
          .. shell .. " -c " .. q("exec " .. line))
        assert.are_not.equal(0, code)
        assert.are.equal("", out)
        assert.truthy(err:find("^isolation: workdir " .. w:gsub("%p", "%%%0") .. " is %$HOME"), err)
      end
      local line = bwrap_line({ workdir = t.proj, command = cmd })
      local code, out, err = helpers.run("env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=" .. q(t.home) .. " "
        .. shell .. " -c " .. q("exec " .. line))
      assert.are.equal(0, code, err)
      assert.is_nil(out:find("secret", 1, true), out)
      assert.truthy(out:find("ran\n$"), out)
    end
    assert.is_nil(helpers.read(t.home .. "/.bashrc"))
  end)

  it("typed into a real tmux pane (bash -i, dash -i): runs inside the home, refuses the home, the shell lives on",
    function()
      if not os.execute("command -v tmux >/dev/null 2>&1") then return end
      local ok_line = bwrap_line({ workdir = t.proj })
      local bad_line = bwrap_line({ workdir = t.home })
      for _, shell in ipairs({ "bash", "dash" }) do
        local sock = t.root .. "/tmux-" .. shell
        local tm = "tmux -S " .. q(sock) .. " "
        assert.are.equal(0, (helpers.run(tm .. "new-session -d -x 250 -y 50 " .. q("env -i PATH=" .. q(t.root
          .. "/bin:/usr/bin:/bin") .. " RAN=" .. q(t.ran) .. " HOME=" .. q(t.home) .. " TERM=xterm " .. shell
          .. " -i"))))
        local function typed(line, want)
          os.remove(t.ran)
          helpers.run(tm .. "send-keys -l " .. q(line) .. " && " .. tm .. "send-keys Enter")
          assert.truthy(cli.wait_for(function()
            local _, pane = helpers.run(tm .. "capture-pane -p -J")
            return pane:find(want, 1, true) ~= nil
          end, 10), shell .. ": no " .. want)
        end
        typed(ok_line, "$")
        assert.truthy(cli.wait_for(function() return helpers.read(t.ran) ~= nil end, 10), shell .. ": did not run")
        typed(bad_line, "isolation: workdir " .. t.home .. " is $HOME")
        assert.is_nil(helpers.read(t.ran))
        typed("echo alive-$((40+2))", "alive-42")
        helpers.run(tm .. "kill-server")
      end
    end)

  it("in an interactive shell, a refusal ends only the line, not the shell", function()
    local line = bwrap_line({ workdir = t.home })
    for _, shell in ipairs({ "bash", "dash" }) do
      os.remove(t.ran)
      local code, out, err = helpers.run("cd " .. q(t.marks) .. " && printf '%s\\necho still-here\\n' " .. q(line)
        .. " | env -i PATH=" .. q(t.root .. "/bin:/usr/bin:/bin") .. " RAN=" .. q(t.ran) .. " HOME=" .. q(t.home)
        .. " " .. shell .. " -i 2>&1")
      assert.are.equal(0, code, shell .. ": " .. out .. err)
      assert.truthy(out:find("still-here", 1, true), shell .. ": " .. out)
      assert.truthy(out:find("isolation: workdir", 1, true), shell .. ": " .. out)
      assert.is_nil(helpers.read(t.ran))
    end
  end)
end)

-- every system directory of the contract (README, threat model), as the workdir and as a bind
local SYSTEM_INSIDE = { "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/libexec", "/boot",
  "/dev", "/proc", "/sys", "/run", "/var/run", "/var/spool" }
local SYSTEM_AT = { "/", "/var", "/var/lib", "/opt", "/srv", "/home" }

describe("read-write binds of system directories", function()
  local function refused(spec, field, value)
    local line, err = isolation.wrap(spec)
    assert.is_nil(line, field .. " " .. value)
    assert.truthy(err:find("^isolation: " .. field:gsub("[%[%]]", "%%%0") .. " must not"), err)
    assert.truthy(err:find(value, 1, true), err)
    return err
  end

  it("are refused inside and at each one, as workdir and binds, in every mode; the message says what is accepted",
    function()
      local paths = {}
      for _, d in ipairs(SYSTEM_INSIDE) do
        for _, p in ipairs({ d, d .. "/", d .. "/x", d .. "/x/y/" }) do paths[#paths + 1] = p end
      end
      for _, d in ipairs(SYSTEM_AT) do paths[#paths + 1] = d; paths[#paths + 1] = d .. "/" end
      for _, p in ipairs({ "/etc/ssh", "/etc/cron.d", "/usr/bin", "/var/spool/cron", "/run/dbus", "/libfoo/bar" }) do
        paths[#paths + 1] = p
      end
      for _, mode in ipairs({ "bwrap", "docker", "" }) do
        for _, p in ipairs(paths) do
          if p ~= "//" then
            refused({ config = { mode = mode }, workdir = p, command = "c" }, "workdir", p)
            local err = refused({ config = { mode = mode }, workdir = "/srv/w", binds = { "/srv/a", p },
              command = "c" }, "binds[2]", p)
            if p:find("^/etc/.") then assert.truthy(err:find("accepted: ", 1, true), err) end
          end
        end
      end
    end)

  it("stay possible read-only, and elsewhere read-write (/var/lib/ci/workspace/x, /srv/x, /opt/x, /tmp/x)", function()
    for _, p in ipairs({ "/etc/ssh", "/usr/share/doc", "/var/spool/x", "/run/x", "/lib64/x", "/opt", "/srv" }) do
      assert.truthy(isolation.wrap({ config = { mode = "bwrap" }, workdir = "/srv/w", ro_binds = { p },
        command = "c" }))
    end
    for _, p in ipairs({ "/var/lib/ci/workspace/x", "/srv/x", "/opt/x", "/tmp/x", "/home/u/x", "/var/tmp/x",
      "/media/x", "/mnt/x", "/usrx", "/etcetera/x", "/varx/run" }) do
      for _, mode in ipairs({ "bwrap", "docker", "" }) do
        assert.truthy(isolation.wrap({ config = { mode = mode }, workdir = p, binds = { p .. "/b" }, command = "c" }))
      end
    end
  end)
end)

describe("isolate", function()
  local t
  before_each(function() t = tree() end)
  after_each(function() helpers.rmtree(t.root) end)

  local function isolate(args, opts)
    opts = opts or {}
    local env = { "TMPDIR=" .. t.root .. "/tmp" }
    if opts.home ~= false then env[#env + 1] = "HOME=" .. (opts.home or t.home) end
    if opts.clear then table.insert(env, 1, "-i"); table.insert(env, 2, "PATH=/usr/sbin:/usr/bin:/sbin:/bin") end
    assert(os.execute("mkdir -p " .. q(t.root .. "/tmp")))
    return cli.isolate(args, { env = env, cwd = opts.cwd or t.proj })
  end

  local function assert_usage(want, status, out, err)
    assert.are.equal(2, status, err)
    assert.are.equal("", out)
    assert.truthy(err:find("^isolate: ") and err:find(want, 1, true), err)
    assert.are.equal(1, select(2, err:gsub("\n", "")), err)
  end

  local function assert_untouched()
    assert.is_nil(helpers.read(t.home .. "/.bashrc"))
    local _, listing = helpers.run("ls -A " .. q(t.root .. "/tmp"))
    assert.are.equal("", listing)
  end

  local ATTACK = { "bash", "-c", "cat ~/.ssh/id; echo x >> ~/.bashrc" }
  local function with(args)
    local out = {}
    for _, a in ipairs(args) do out[#out + 1] = a end
    out[#out + 1] = "--"
    for _, a in ipairs(ATTACK) do out[#out + 1] = a end
    return out
  end

  it("refuses `cd ~ && isolate`, a parent, a symlink to the home, exit 2, before anything starts", function()
    for _, mode in ipairs({ "bwrap", "docker" }) do
      assert_usage("the workdir (the current directory) " .. t.home .. " is $HOME",
        isolate(with({ "--mode", mode }), { cwd = t.home }))
      assert_usage("the workdir (the current directory) " .. t.home .. " is $HOME",
        isolate(with({ "--mode", mode }), { cwd = t.home, home = t.home .. "/" }))
      assert_usage("--workdir " .. t.root .. "/home is $HOME (" .. t.home .. ")",
        isolate(with({ "--mode", mode, "--workdir", t.root .. "/home" })))
      assert_usage("--workdir " .. t.root .. " is $HOME", isolate(with({ "--mode", mode, "--workdir", t.root })))
      assert_usage("--workdir " .. t.root .. "/homelink (" .. t.home .. ") is $HOME",
        isolate(with({ "--mode", mode, "--workdir", t.root .. "/homelink" })))
      assert_usage("--workdir " .. t.proj .. "/up (" .. t.home .. ") is $HOME",
        isolate(with({ "--mode", mode, "--workdir", t.proj .. "/up" })))
      -- HOME a symlink: the workdir is its target
      assert_usage("is $HOME (" .. t.home .. ")", isolate(with({ "--mode", mode }), { cwd = t.home,
        home = t.root .. "/homelink" }))
    end
    assert_untouched()
  end)

  it("refuses a bind or ro-bind of the home or above it, through $HOME/ and symlinks", function()
    for _, case in ipairs({
      { "--bind", "$HOME/self" }, { "--ro-bind", "$HOME/self" }, { "--bind", "$HOME/proj/up" },
      { "--ro-bind", t.root .. "/home" }, { "--bind", t.root .. "/rootlink" },
    }) do
      assert_usage(case[1] .. " " .. case[2], isolate(with({ case[1], case[2] })))
    end
    assert_untouched()
  end)

  it("refuses a workdir that is the passwd entry's home even when HOME points elsewhere", function()
    local pw = uv.os_get_passwd()
    local real = uv.fs_realpath(pw.homedir)
    if not real or real == "/" then return end
    local link = t.root .. "/pwhome"
    assert(os.execute("ln -s " .. q(real) .. " " .. q(link)))
    assert_usage("the passwd entry's home (" .. real .. ")", isolate(with({ "--workdir", link })))
  end)

  it("refuses a --workdir or --bind that is a symlink into /etc/cron.d or /usr/bin, naming where it leads", function()
    assert(os.execute("ln -s /etc " .. q(t.proj .. "/etc") .. " && ln -s /usr/bin " .. q(t.proj .. "/ubin")
      .. " && ln -s /usr/share " .. q(t.proj .. "/share")))
    assert_usage("--workdir " .. t.proj .. "/share resolves to /usr/share, which must not be read-write inside",
      isolate(with({ "--workdir", t.proj .. "/share" })))
    assert_usage("the workdir (the current directory) /usr/bin resolves to /usr/bin, which must not be read-write",
      isolate(with({}), { cwd = "/usr/bin" }))
    assert_usage("--bind " .. t.proj .. "/ubin resolves to /usr/bin, which must not be read-write inside",
      isolate(with({ "--bind", t.proj .. "/ubin" })))
    assert_usage("--bind " .. t.proj .. "/etc resolves to /etc, which must not be",
      isolate(with({ "--bind", t.proj .. "/etc" })))
    -- read-only is fine: the dry run shows it
    local status, _, err = isolate({ "--dry-run", "--ro-bind", t.proj .. "/ubin", "--", "true" })
    assert.are.equal(0, status, err)
    assert_untouched()
  end)

  it("with HOME unset or empty (env -i) uses the passwd entry's home; a relative HOME or / exits 125", function()
    local pw = uv.os_get_passwd()
    for _, home in ipairs({ "rel/home", "/", "//", t.home .. "/.." }) do
      local status, out, err = isolate(with({}), { home = home, clear = true })
      assert.are.equal(125, status, err)
      assert.are.equal("", out)
      assert.truthy(err:find("^isolate: HOME "), err)
      assert.are.equal(1, select(2, err:gsub("\n", "")), err)
    end
    assert_untouched()
    if helpers.skip_without_bwrap() then return end
    if not (pw and pw.homedir and pw.homedir:sub(1, 1) == "/" and pw.homedir ~= "/") then return end
    for _, home in ipairs({ false, "" }) do
      local status, out, err = isolate({ "--network", "allow", "--", "sh", "-c", 'echo "$HOME"; ls -A "$HOME"' },
        { home = home, clear = true })
      assert.are.equal(0, status, err)
      assert.are.equal(pw.homedir .. "\n", out)
    end
    assert_untouched()
  end)
end)

describe("session manager", function()
  local t
  before_each(function() t = tree() end)
  after_each(function() helpers.rmtree(t.root) end)

  -- a child orchestrator with a throwaway HOME; prints one line per launch
  local SCRIPT = [[
local session = require("isolation.session")
local cjson = require("cjson")
local launched = 0
local mgr = session.manager{ runtime_dir = arg[1], launcher = function() launched = launched + 1; return {} end,
  alive = function() return true end }
for i, req in ipairs(cjson.decode(arg[2])) do
  req.id = "s" .. i; req.command = "true"
  local s, err = mgr:launch(req)
  io.write(s and "launched" or err, "\n")
end
mgr:close()
io.write("launcher calls: ", launched, "\n")
]]

  local function launches(reqs, home)
    local script = t.root .. "/orchestrator.lua"
    helpers.write(script, SCRIPT)
    local cjson = require("cjson")
    local run = t.root .. "/run"
    local status, stdout, stderr = cli.spawn({ cli.LUA, script, run, cjson.encode(reqs) }, { env = {
      "HOME=" .. home, "LUA_PATH=" .. cli.ROOT .. "/lua/?.lua;;", "LUA_CPATH=" .. cli.ROOT .. "/build/?.so;;" } })
      .wait(30)
    assert.are.equal(0, status, stderr)
    local out = {}
    for l in stdout:gmatch("([^\n]*)\n") do out[#out + 1] = l end
    local _, listing = helpers.run("ls -A " .. q(run) .. " | grep -v -- '-seccomp.bpf$' || true")
    assert.are.equal("", listing)
    return out
  end

  it("refuses the home or above it and symlinks into system directories before anything starts", function()
    -- /etc/cron.d where cron is installed; a system directory either way
    local system_dir = uv.fs_stat("/etc/cron.d") and "/etc/cron.d" or "/usr/share"
    assert(os.execute("ln -s " .. system_dir .. " " .. q(t.proj .. "/cron")))
    local iso = { mode = "bwrap", network = "deny" }
    local reqs = {
      { workdir = t.home }, { workdir = t.root .. "/home" }, { workdir = t.root .. "/homelink" },
      { workdir = t.proj .. "/up" }, { workdir = t.proj, ro_binds = { "$HOME/self" } },
      { workdir = t.proj, binds = { t.root .. "/rootlink" } },
      { workdir = t.proj .. "/cron" }, { workdir = t.proj, binds = { t.proj .. "/cron" } },
      { workdir = t.proj, isolation = { mode = "docker" }, binds = { "$HOME/proj/up" } },
    }
    for _, r in ipairs(reqs) do r.isolation = r.isolation or iso end
    local out = launches(reqs, t.home)
    local want = {
      "workdir \"" .. t.home .. "\" is $HOME", "workdir \"" .. t.root .. "/home\" is $HOME",
      "workdir \"" .. t.root .. "/homelink\" (\"" .. t.home .. "\") is $HOME",
      "workdir \"" .. t.proj .. "/up\" (\"" .. t.home .. "\") is $HOME",
      "ro_binds[1] \"$HOME/self\" (\"" .. t.home .. "\") is $HOME", "binds[1] \"" .. t.root .. "/rootlink\" (\"/\") is",
      "workdir \"" .. t.proj .. "/cron\" resolves to \"" .. system_dir .. "\", which must not be read-write inside",
      "binds[1] \"" .. t.proj .. "/cron\" resolves to \"" .. system_dir .. "\", which must not be read-write inside",
      "binds[1] \"$HOME/proj/up\" (\"" .. t.home .. "\") is $HOME",
    }
    for i, w in ipairs(want) do
      assert.truthy(out[i] and out[i]:find("^isolation: ") and out[i]:find(w, 1, true), tostring(out[i]) .. "\n" .. w)
    end
    assert.are.equal("launcher calls: 0", out[#want + 1])
    -- inside the home, and read-only symlinks into /etc, launch
    out = launches({ { workdir = t.proj, isolation = iso, ro_binds = { t.proj .. "/cron" } } }, t.home)
    assert.are.same({ "launched", "launcher calls: 1" }, out)
  end)
end)
