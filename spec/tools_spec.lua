-- Programs installed under $HOME run inside (isolation.tools, API.md "The
-- agent's tools and hosts"). Each case makes a fake install under a HOME of
-- its own, laid out as the manager lays it out (a versioned directory, the
-- shims or links the manager makes), with a script as the program that
-- prints its own path and version, then runs `isolate -- PROGRAM` in a real
-- bwrap sandbox: the $HOME program runs, nothing else of $HOME is there, the
-- bound tree is read-only and a credentials file in it cannot be read
-- (covered by the host's /dev/null on a nodev mount: EACCES).
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")
local launchers = require("support.launchers")
local tools = require("isolation.tools")

local function write(path, text, mode)
  assert(os.execute("mkdir -p " .. helpers.shquote(path:match("^(.*)/[^/]*$"))))
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  if mode then assert(uv.fs_chmod(path, mode)) end
end

local function link(target, path)
  assert(os.execute("mkdir -p " .. helpers.shquote(path:match("^(.*)/[^/]*$"))))
  assert(uv.fs_symlink(target, path))
end

-- A fake program: `--version`/`-V` print NAME, its own path and VERSION;
-- `-e SCRIPT` runs SCRIPT with sh (so that a case can look around inside
-- while the program that was detected is the command).
local function program(path, name, version)
  write(path, table.concat({
    "#!/bin/sh",
    'case "$1" in',
    '  --version|-V) echo "' .. name .. ' $0 ' .. version .. '" ;;',
    '  -e) shift; exec /bin/sh -c "$1" ;;',
    "esac",
  }, "\n") .. "\n", tonumber("755", 8))
end

local SECRET = "npm_SECRET_TOKEN_1234"

-- A fresh directory with an empty home/ and work/ in it (mode 0700).
local function home_and_work()
  local top = helpers.tmpdir()
  local home, work = top .. "/home", top .. "/work"
  assert(uv.fs_mkdir(home, 448))
  assert(uv.fs_mkdir(work, 448))
  return top, home, work
end
local SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

describe("tools under $HOME", function()
  local top, home, work
  before_each(function()
    top, home, work = home_and_work()
    -- what must never show: a key outside every tool
    write(home .. "/.ssh/id_ed25519", "PRIVATE KEY\n")
  end)
  after_each(function() helpers.rmtree(top) end)

  local function isolate(args, path)
    local argv = { "--network", "none", "--workdir", work }
    for _, a in ipairs(args) do argv[#argv + 1] = a end
    return cli.isolate(argv, { env = { "HOME=" .. home, "PATH=" .. path }, cwd = work })
  end

  local function nvm()
    local v = home .. "/.nvm/versions/node/v22.1.0"
    program(v .. "/bin/node", "node", "v22.1.0")
    program(v .. "/bin/pnpm", "pnpm", "9.1.0") -- a global of this node: not on the system
    link("../lib/node_modules/npm/bin/npm-cli.js", v .. "/bin/npm")
    write(v .. "/lib/node_modules/npm/bin/npm-cli.js", "#!/usr/bin/env node\n", tonumber("755", 8))
    write(v .. "/etc/npmrc", "//registry.example.com/:_authToken=" .. SECRET .. "\n")
    write(v .. "/lib/node_modules/x/.git-credentials", "https://u:" .. SECRET .. "@example.com\n")
    program(home .. "/.nvm/versions/node/v20.0.0/bin/node", "node", "v20.0.0")
    write(home .. "/.nvm/nvm.sh", "# nvm itself\n")
    return v, v .. "/bin:" .. SYSTEM_PATH
  end

  it("nvm: node --version runs the version on PATH; only it is there, read-only, credentials empty", function()
    if helpers.skip_without_bwrap() then return end
    local v, path = nvm()
    local status, out, err = isolate({ "--", "node", "--version" }, path)
    assert.are.equal(0, status, err)
    assert.are.equal("node " .. v .. "/bin/node v22.1.0\n", out)
    status, out, err = isolate({ "--", "node", "-e", "ls -A $HOME; ls -A $HOME/.nvm; ls $HOME/.nvm/versions/node;"
      .. " cat " .. v .. "/etc/npmrc " .. v .. "/lib/node_modules/x/.git-credentials; echo end;"
      .. " touch " .. v .. "/bin/new 2>/dev/null && echo WROTE; cat $HOME/.ssh/id_ed25519 2>/dev/null" }, path)
    assert.are.equal(1, status, err) -- the last cat fails: no ~/.ssh
    assert.are.equal(".nvm\nversions\nv22.1.0\nend\n", out)
    assert.falsy((out .. err):find(SECRET, 1, true))
    assert.truthy(err:find("etc/npmrc: Permission denied", 1, true), err)
    assert.truthy(err:find(".git-credentials: Permission denied", 1, true), err)
  end)

  it("--dry-run lists the tools, the PATH and the covered credentials; --json's argv binds them", function()
    local v, path = nvm()
    local status, out, err = isolate({ "--dry-run", "--", "node", "--version" }, path)
    assert.are.equal(0, status, err)
    assert.truthy(out:find("tools (read-only at the same path; isolation.tools):\n  " .. v .. "  (nvm)\n", 1, true),
      out)
    assert.truthy(out:find("  PATH inside starts with: " .. v .. "/bin\n", 1, true), out)
    assert.truthy(out:find("credentials covered (/dev/null): " .. v .. "/etc/npmrc", 1, true), out)
    assert.truthy(out:find("read-only  " .. v .. " -> " .. v .. "  (tools, a program's installation)", 1, true), out)
    status, out = isolate({ "--dry-run", "--json", "--", "node" }, path)
    assert.are.equal(0, status)
    assert.truthy(out:find('"--ro-bind", "' .. v .. '", "' .. v .. '"', 1, true), out)
    assert.truthy(out:find('"--ro-bind", "/dev/null", "' .. v .. '/etc/npmrc"', 1, true), out)
  end)

  it("--no-tools: the program is not found inside; --tool and --no-tools together are refused", function()
    if helpers.skip_without_bwrap() then return end
    local _, path = nvm()
    local status, out, err = isolate({ "--", "pnpm", "--version" }, path)
    assert.are.equal(0, status, err)
    assert.are.equal("pnpm " .. home .. "/.nvm/versions/node/v22.1.0/bin/pnpm 9.1.0\n", out)
    status, out, err = isolate({ "--no-tools", "--", "pnpm", "--version" }, path)
    assert.are.equal(127, status, out .. err)
    assert.truthy(err:find("pnpm", 1, true), err)
    status, out, err = isolate({ "--no-tools", "--tool", home .. "/.nvm/versions/node/v22.1.0", "--", "true" }, path)
    assert.are.equal(2, status, out)
    assert.are.equal("isolate: --tool and --no-tools contradict each other\n", err)
  end)

  it("pyenv: python3 -V directly and through the shim (.python-version, PYENV_VERSION, ~/.pyenv/version)",
    function()
      if helpers.skip_without_bwrap() then return end
      local root = home .. "/.pyenv"
      for _, ver in ipairs({ "3.11.7", "3.12.1", "3.10.2" }) do
        program(root .. "/versions/" .. ver .. "/bin/python3", "Python", ver)
      end
      write(root .. "/versions/3.11.7/lib/python3.11/site-packages/pkg/.pypirc", "password: " .. SECRET .. "\n")
      -- pyenv's shims are bash scripts that run `pyenv exec`
      write(root .. "/shims/python3", '#!/usr/bin/env bash\nset -e\nexport PYENV_ROOT="' .. root
        .. '"\nexec "' .. root .. '/libexec/pyenv" exec "python3" "$@"\n', tonumber("755", 8))
      write(root .. "/version", "3.11.7\n")
      -- directly
      local status, out, err = isolate({ "--", "python3", "-V" }, root .. "/versions/3.10.2/bin:" .. SYSTEM_PATH)
      assert.are.equal(0, status, err)
      assert.are.equal("Python " .. root .. "/versions/3.10.2/bin/python3 3.10.2\n", out)
      -- the shim: the global version file
      local shims = root .. "/shims:" .. SYSTEM_PATH
      status, out, err = isolate({ "--", "python3", "-V" }, shims)
      assert.are.equal(0, status, err)
      assert.are.equal("Python " .. root .. "/versions/3.11.7/bin/python3 3.11.7\n", out)
      status, out, err = isolate({ "--", "python3", "-e", "ls -A $HOME/.pyenv $HOME/.pyenv/versions;"
        .. " cat $HOME/.pyenv/versions/3.11.7/lib/python3.11/site-packages/pkg/.pypirc" }, shims)
      -- the mask is the host's /dev/null on a nodev mount: it cannot even be opened
      assert.are.equal(1, status, out .. err)
      assert.are.equal(root .. ":\nversions\n\n" .. root .. "/versions:\n3.11.7\n", out)
      assert.truthy(err:find(".pypirc: Permission denied", 1, true), err)
      -- the workdir's .python-version wins over the global one, PYENV_VERSION over both
      write(work .. "/.python-version", "3.12\n")
      status, out, err = isolate({ "--", "python3", "-V" }, shims)
      assert.are.equal(0, status, err)
      assert.are.equal("Python " .. root .. "/versions/3.12.1/bin/python3 3.12.1\n", out)
      status, out, err = cli.isolate({ "--network", "none", "--workdir", work, "--", "python3", "-V" },
        { env = { "HOME=" .. home, "PATH=" .. shims, "PYENV_VERSION=3.10.2" }, cwd = work })
      assert.are.equal(0, status, err)
      assert.are.equal("Python " .. root .. "/versions/3.10.2/bin/python3 3.10.2\n", out)
    end)

  it("rustup: cargo --version through ~/.cargo/bin runs the default toolchain; ~/.cargo's credentials,"
    .. " registry and the other toolchains are not there", function()
    if helpers.skip_without_bwrap() then return end
    local rustup = home .. "/.rustup"
    local tc = rustup .. "/toolchains/stable-x86_64-unknown-linux-gnu"
    program(tc .. "/bin/cargo", "cargo", "1.83.0")
    program(rustup .. "/toolchains/nightly-x86_64-unknown-linux-gnu/bin/cargo", "cargo", "1.85.0-nightly")
    write(rustup .. "/settings.toml", 'version = "12"\nprofile = "default"\ndefault_toolchain = "stable-x86_64-'
      .. 'unknown-linux-gnu"\n')
    write(rustup .. "/downloads/partial", "x")
    -- the proxy: rustup reads settings.toml and runs the toolchain's program
    write(home .. "/.cargo/bin/cargo", table.concat({
      "#!/bin/sh",
      "tc=$(sed -n 's/^default_toolchain = \"\\(.*\\)\"$/\\1/p' \"$HOME/.rustup/settings.toml\")",
      'exec "$HOME/.rustup/toolchains/$tc/bin/$(basename "$0")" "$@"',
    }, "\n") .. "\n", tonumber("755", 8))
    write(home .. "/.cargo/credentials.toml", '[registry]\ntoken = "' .. SECRET .. '"\n')
    write(home .. "/.cargo/registry/cache/x.crate", "crate")
    local path = home .. "/.cargo/bin:" .. SYSTEM_PATH
    local status, out, err = isolate({ "--", "cargo", "--version" }, path)
    assert.are.equal(0, status, err)
    assert.are.equal("cargo " .. tc .. "/bin/cargo 1.83.0\n", out)
    status, out = isolate({ "--dry-run", "--", "cargo" }, path)
    assert.are.equal(0, status)
    local listed = out:match("tools %b()[^\n]*\n(.-)\n[^ ]")
    assert.are.equal("  " .. home .. "/.cargo/bin  (cargo)\n  " .. tc .. "  (rustup toolchain for " .. home
      .. "/.cargo/bin/cargo)\n  " .. rustup .. "/settings.toml  (rustup settings)\n  PATH inside starts with: "
      .. home .. "/.cargo/bin", listed)
  end)

  it("claude's native install: --agent claude -- claude --version runs ~/.local/bin/claude's version", function()
    if helpers.skip_without_bwrap() then return end
    local versions = home .. "/.local/share/claude/versions"
    program(versions .. "/2.0.64", "claude", "2.0.64 (Claude Code)")
    program(versions .. "/2.0.50", "claude", "2.0.50 (Claude Code)")
    link(versions .. "/2.0.64", home .. "/.local/bin/claude")
    write(home .. "/.local/share/keyrings/login.keyring", SECRET)
    assert(uv.fs_mkdir(home .. "/.claude", 448))
    local path = home .. "/.local/bin:" .. SYSTEM_PATH
    local status, out, err = isolate({ "--agent", "claude", "--", "claude", "--version" }, path)
    assert.are.equal(0, status, err)
    assert.are.equal("claude " .. home .. "/.local/bin/claude 2.0.64 (Claude Code)\n", out)
    status, out, err = isolate({ "--agent", "claude", "--", "claude", "-e",
      "ls -A $HOME $HOME/.local $HOME/.local/share $HOME/.local/share/claude/versions" }, path)
    assert.are.equal(0, status, err)
    assert.are.equal(home .. ":\n.claude\n.local\n\n" .. home .. "/.local:\nbin\nshare\n\n" .. home
      .. "/.local/share:\nclaude\n\n" .. versions .. ":\n2.0.64\n", out)
  end)

  it("npm -g under nvm: --agent codex -- codex runs the package's script with that version's node", function()
    if helpers.skip_without_bwrap() then return end
    local v = home .. "/.nvm/versions/node/v22.1.0"
    -- node: runs a script by printing what it was given
    write(v .. "/bin/node", '#!/bin/sh\necho "node $0 ran $*"\n', tonumber("755", 8))
    write(v .. "/lib/node_modules/@openai/codex/bin/codex.js", "#!/usr/bin/env node\n", tonumber("755", 8))
    link("../lib/node_modules/@openai/codex/bin/codex.js", v .. "/bin/codex")
    local status, out, err = isolate({ "--agent", "codex", "--", "codex", "--version" }, v .. "/bin:" .. SYSTEM_PATH)
    assert.are.equal(0, status, err)
    assert.are.equal("node " .. v .. "/bin/node ran " .. v .. "/bin/codex --version\n", out)
  end)

  it("a program of ~/bin and of a directory of PATH that is $HOME itself: that file alone", function()
    if helpers.skip_without_bwrap() then return end
    program(home .. "/bin/mytool", "mytool", "1.0")
    program(home .. "/hometool", "hometool", "2.0")
    write(home .. "/notes.txt", "private notes\n")
    local status, out, err = isolate({ "--", "mytool", "-e", "ls -A $HOME $HOME/bin" },
      home .. "/bin:" .. SYSTEM_PATH)
    assert.are.equal(0, status, err)
    assert.are.equal(home .. ":\nbin\n\n" .. home .. "/bin:\nmytool\n", out)
    status, out, err = isolate({ "--", "hometool", "-e", "ls -A $HOME" }, home .. ":" .. SYSTEM_PATH)
    assert.are.equal(0, status, err)
    assert.are.equal("hometool\n", out)
  end)

  it("attacks: a tool that is ~ or ~/.ssh (or a link to them), a program linked into ~/.ssh, a missing tool",
    function()
      link(home, home .. "/dotlink")
      link(home .. "/.ssh", home .. "/keys")
      link(home .. "/.ssh/id_ed25519", home .. "/bin/sneaky")
      assert(uv.fs_chmod(home .. "/.ssh/id_ed25519", tonumber("755", 8)))
      local cases = {
        { { "--tool", home }, "is $HOME" },
        { { "--tool", home .. "/dotlink" }, "is $HOME" },
        { { "--tool", home .. "/.ssh" }, "which holds credentials" },
        { { "--tool", home .. "/keys" }, "which holds credentials" },
        { { "--tool", home .. "/.ssh/id_ed25519" }, "which holds credentials" },
        { { "--tool", home .. "/missing" }, "no such file or directory" },
        { { "--tool", "" }, "needs a non-empty value" },
      }
      for _, c in ipairs(cases) do
        local args = c[1]
        args[#args + 1] = "--"
        args[#args + 1] = "true"
        local status, out, err = isolate(args, SYSTEM_PATH)
        assert.are.equal(2, status, table.concat(args, " ") .. ": " .. out .. err)
        assert.truthy(err:find(c[2], 1, true), err)
        assert.are.equal(1, select(2, err:gsub("\n", "")), err)
      end
      local status, _, err = isolate({ "--", "sneaky" }, home .. "/bin:" .. SYSTEM_PATH)
      assert.are.equal(2, status)
      assert.truthy(err:find("which holds credentials", 1, true), err)
      -- docker cannot take --tool
      status, _, err = isolate({ "--mode", "docker", "--tool", home .. "/bin", "--dry-run", "--", "true" },
        SYSTEM_PATH)
      assert.are.equal(2, status)
      assert.truthy(err:find("--tool works with --mode bwrap only", 1, true), err)
    end)

  it("--tool DIR binds more: its bin first on PATH; credential stores inside it are covered", function()
    if helpers.skip_without_bwrap() then return end
    local dir = home .. "/opt/tool-1.2"
    program(dir .. "/bin/tool12", "tool12", "1.2")
    write(dir .. "/.ssh/id_rsa", SECRET)
    write(dir .. "/share/.netrc", "machine example.com password " .. SECRET .. "\n")
    local status, out, err = isolate({ "--tool", dir, "--", "bash", "-c",
      "tool12 --version; cat " .. dir .. "/share/.netrc; ls -A " .. dir .. "/.ssh; echo end" }, SYSTEM_PATH)
    assert.are.equal(0, status, err)
    assert.are.equal("tool12 " .. dir .. "/bin/tool12 1.2\nend\n", out)
  end)

  it("a real npm install -g under a prefix inside HOME (a local package, no registry) runs", function()
    if helpers.skip_without_bwrap() then return end
    local npm = tools.which("npm", os.getenv("PATH"))
    local node = tools.which("node", os.getenv("PATH"))
    if not (npm and node) then return pending("npm and node are not installed here") end
    local pkg = top .. "/pkg"
    write(pkg .. "/package.json", '{"name": "tiny-tool", "version": "1.0.0", "bin": {"tiny-tool": "cli.js"}}\n')
    write(pkg .. "/cli.js", '#!/usr/bin/env node\nconsole.log("tiny-tool " + __filename + " 1.0.0")\n',
      tonumber("755", 8))
    local prefix = home .. "/.npm-global"
    local code, out, err = helpers.run("cd " .. helpers.shquote(pkg) .. " && HOME=" .. helpers.shquote(home)
      .. " npm_config_cache=" .. helpers.shquote(top .. "/cache") .. " npm pack --silent >/dev/null && HOME="
      .. helpers.shquote(home) .. " npm_config_cache=" .. helpers.shquote(top .. "/cache")
      .. " npm install -g --offline --no-audit --no-fund --prefix " .. helpers.shquote(prefix)
      .. " ./tiny-tool-1.0.0.tgz")
    assert.are.equal(0, code, out .. err)
    write(prefix .. "/etc/npmrc", "//registry.example.com/:_authToken=" .. SECRET .. "\n")
    local status
    status, out, err = isolate({ "--", "tiny-tool" }, prefix .. "/bin:" .. SYSTEM_PATH)
    assert.are.equal(0, status, err)
    assert.are.equal("tiny-tool " .. prefix .. "/lib/node_modules/tiny-tool/cli.js 1.0.0\n", out)
    status, out = isolate({ "--dry-run", "--", "tiny-tool" }, prefix .. "/bin:" .. SYSTEM_PATH)
    assert.are.equal(0, status)
    assert.truthy(out:find("credentials covered (/dev/null): " .. prefix .. "/etc/npmrc", 1, true), out)
  end)
end)

describe("tools through the session manager", function()
  local session = require("isolation.session")

  it("the command's program under $HOME runs; tools = false binds none", function()
    if helpers.skip_without_bwrap() then return end
    local top, home, work = home_and_work()
    local v = home .. "/.nvm/versions/node/v22.1.0"
    program(v .. "/bin/node", "node", "v22.1.0")
    program(v .. "/bin/pnpm", "pnpm", "9.1.0")
    local old_home, old_path = os.getenv("HOME"), os.getenv("PATH")
    uv.os_setenv("HOME", home)
    uv.os_setenv("PATH", v .. "/bin:" .. old_path)
    local exited = {}
    local ok, err = pcall(function()
      local mgr = assert(session.manager(launchers.bash(exited, {
        runtime_dir = top .. "/run", loop = uv, poll_interval = 0.05,
      })))
      local s = assert(mgr:launch({ id = "n", isolation = { mode = "bwrap", network = "none" }, workdir = work,
        command = "node --version > out.txt 2>&1" }))
      assert.is_true(cli.wait_for(function() return s.state == "ended" end, 30))
      assert.are.equal(0, exited.n)
      assert.are.equal("node " .. v .. "/bin/node v22.1.0\n", helpers.read(work .. "/out.txt"))
      s = assert(mgr:launch({ id = "m", isolation = { mode = "bwrap", network = "none" }, workdir = work,
        command = "pnpm --version > out2.txt 2>&1", tools = false }))
      assert.is_true(cli.wait_for(function() return s.state == "ended" end, 30))
      assert.are.equal(127, exited.m)
      local bad, err = mgr:launch({ id = "b", isolation = { mode = "bwrap", network = "none" }, workdir = work,
        command = "true", tools = { home .. "/.ssh" } })
      assert.is_nil(bad)
      assert.truthy(err:find("tools[1]", 1, true) and err:find("no such file or directory", 1, true), err)
      bad, err = mgr:launch({ id = "c", isolation = { mode = "bwrap", network = "none" }, workdir = work,
        command = "true", tools = "yes" })
      assert.is_nil(bad)
      assert.truthy(err:find("tools must be an array of paths", 1, true), err)
      mgr:close()
    end)
    uv.os_setenv("HOME", old_home)
    uv.os_setenv("PATH", old_path)
    helpers.rmtree(top)
    assert(ok, err)
  end)
end)

-- The other layouts, through tools.plan (what isolate and the session
-- manager bind), each laid out as its manager lays it out.
describe("tools.plan: the layouts of fnm, volta, rbenv, asdf, mise, bun, deno, pipx", function()
  local top, home, work
  before_each(function()
    top, home, work = home_and_work()
  end)
  after_each(function() helpers.rmtree(top) end)

  local function plan(program_name, path, env)
    env = env or {}
    return tools.plan({ home = home, cwd = work, path = path .. ":" .. SYSTEM_PATH, program = program_name,
      getenv = function(n) return env[n] end })
  end

  it("fnm: the installation of a version, also through its alias and multishell links", function()
    local inst = home .. "/.local/share/fnm/node-versions/v20.11.0/installation"
    program(inst .. "/bin/node", "node", "v20.11.0")
    link(home .. "/.local/share/fnm/node-versions/v20.11.0/installation", home .. "/.local/share/fnm/aliases/default")
    link(home .. "/.local/share/fnm/aliases/default", top .. "/fnm_multishells_1234")
    local p = assert(plan("node", top .. "/fnm_multishells_1234/bin"))
    assert.are.same({ inst }, p.tools)
    assert.are.same({ inst .. "/bin" }, p.bins)
  end)

  it("volta: the shim runs the platform's node, a package's shim its image and its node", function()
    local v = home .. "/.volta"
    link("volta-shim", v .. "/bin/node")
    link("volta-shim", v .. "/bin/tiny")
    program(v .. "/bin/volta-shim", "volta-shim", "2.0.1")
    program(v .. "/tools/image/node/20.11.0/bin/node", "node", "v20.11.0")
    program(v .. "/tools/image/node/18.19.0/bin/node", "node", "v18.19.0")
    write(v .. "/tools/user/platform.json", '{"node": {"runtime": "20.11.0", "npm": null}}')
    write(v .. "/tools/user/bins/tiny.json", '{"name": "tiny", "package": "tiny", "version": "1.0.0",'
      .. ' "platform": {"node": "18.19.0"}}')
    program(v .. "/tools/image/packages/tiny/bin/tiny", "tiny", "1.0.0")
    local p = assert(plan("node", v .. "/bin"))
    assert.are.same({ v .. "/tools/image/node/20.11.0" }, p.tools)
    assert.are.same({ v .. "/tools/image/node/20.11.0/bin" }, p.bins)
    p = assert(plan("tiny", v .. "/bin"))
    assert.are.same({ v .. "/tools/image/packages/tiny", v .. "/tools/image/node/18.19.0" }, p.tools)
  end)

  -- rbenv's layout in home: versions 3.3.0 and 3.2.2, a shim; its root
  local function rbenv()
    local r = home .. "/.rbenv"
    program(r .. "/versions/3.3.0/bin/ruby", "ruby", "3.3.0")
    program(r .. "/versions/3.2.2/bin/ruby", "ruby", "3.2.2")
    write(r .. "/shims/ruby", "#!/usr/bin/env bash\nexec rbenv exec ruby \"$@\"\n", tonumber("755", 8))
    return r
  end

  it("a FIFO where a version file is read counts as no file: plan does not wait for a writer", function()
    -- before: version files were opened without O_NONBLOCK, and a FIFO at
    -- ~/.rbenv/version held the plan (isolate's launch) until some writer
    -- came; now every read goes through hostpaths.read_regular
    local r = rbenv()
    local q = helpers.shquote
    -- the plan in a child under a time bound: a wait would hold this process
    local script = 'package.path = "lua/?.lua;" .. package.path; package.cpath = "build/?.so;" .. package.cpath;'
      .. ' local p, err = require("isolation.tools").plan({ home = ' .. string.format("%q", home) .. ', cwd = '
      .. string.format("%q", work) .. ', path = ' .. string.format("%q", r .. "/shims:" .. SYSTEM_PATH)
      .. ', program = "ruby", getenv = function() return nil end });'
      .. ' io.write(p and table.concat(p.tools, ",") or ("nil " .. tostring(err)))'
    local function child()
      return helpers.run("cd " .. q(cli.ROOT) .. " && timeout 10 lua5.4 -e " .. q(script))
    end
    local want_code, want = child() -- the control: no version file
    assert.are.equal(0, want_code, want)
    assert(os.execute("mkfifo " .. q(r .. "/version")))
    local code, out, err = child()
    assert.are.equal(0, code, "the plan waited on the FIFO: " .. err)
    assert.are.equal(want, out)
  end)

  it("rbenv: the shim's version from .ruby-version, RBENV_VERSION", function()
    local r = rbenv()
    write(r .. "/version", "3.2.2\n")
    write(work .. "/.ruby-version", "3.3.0\n")
    assert.are.same({ r .. "/versions/3.3.0" }, assert(plan("ruby", r .. "/shims")).tools)
    assert.are.same({ r .. "/versions/3.2.2" }, assert(plan("ruby", r .. "/shims", { RBENV_VERSION = "3.2.2" })).tools)
  end)

  it("asdf: the version the shim names and .tool-versions picks; mise: the only install, else a question", function()
    local a = home .. "/.asdf"
    program(a .. "/installs/nodejs/20.1.0/bin/node", "node", "20.1.0")
    program(a .. "/installs/nodejs/18.0.0/bin/node", "node", "18.0.0")
    write(a .. "/shims/node", "#!/usr/bin/env bash\n# asdf-plugin: nodejs 18.0.0\n# asdf-plugin: nodejs 20.1.0\n"
      .. 'exec asdf exec "node" "$@"\n', tonumber("755", 8))
    write(work .. "/.tool-versions", "nodejs 20.1.0\n")
    assert.are.same({ a .. "/installs/nodejs/20.1.0" }, assert(plan("node", a .. "/shims")).tools)
    local m = home .. "/.local/share/mise"
    program(m .. "/installs/python/3.12.1/bin/python3", "python3", "3.12.1")
    link(home .. "/.local/bin/mise", m .. "/shims/python3")
    program(home .. "/.local/bin/mise", "mise", "2024.12.0")
    assert.are.same({ m .. "/installs/python/3.12.1" }, assert(plan("python3", m .. "/shims")).tools)
    program(m .. "/installs/python/3.11.0/bin/python3", "python3", "3.11.0")
    local ok, err = plan("python3", m .. "/shims")
    assert.is_nil(ok)
    assert.truthy(err:find("mise shim", 1, true) and err:find("--tool", 1, true), err)
  end)

  it("bun, deno: their bin; pipx: the venv and its pyenv interpreter", function()
    program(home .. "/.bun/bin/bun", "bun", "1.1.0")
    link("../install/global/node_modules/tiny/cli.js", home .. "/.bun/bin/tiny")
    write(home .. "/.bun/install/global/node_modules/tiny/cli.js", "#!/usr/bin/env bun\n", tonumber("755", 8))
    write(home .. "/.bun/install/global/bunfig.toml", 'token = "' .. SECRET .. '"\n')
    local p = assert(plan("tiny", home .. "/.bun/bin"))
    assert.are.same({ home .. "/.bun/install/global", home .. "/.bun/bin" }, p.tools)
    assert.are.same({ home .. "/.bun/install/global/bunfig.toml" }, p.mask_files)
    program(home .. "/.deno/bin/deno", "deno", "2.0.0")
    assert.are.same({ home .. "/.deno/bin" }, assert(plan("deno", home .. "/.deno/bin")).tools)
    local py = home .. "/.pyenv/versions/3.12.1"
    program(py .. "/bin/python3", "python3", "3.12.1")
    local venv = home .. "/.local/share/pipx/venvs/black"
    write(venv .. "/pyvenv.cfg", "home = " .. py .. "/bin\nversion = 3.12.1\n")
    link(py .. "/bin/python3", venv .. "/bin/python")
    write(venv .. "/bin/black", "#!" .. venv .. "/bin/python\n", tonumber("755", 8))
    link(venv .. "/bin/black", home .. "/.local/bin/black")
    p = assert(plan("black", home .. "/.local/bin"))
    assert.are.same({ venv, home .. "/.local/bin/black", py }, p.tools)
  end)

  it("a tree too big to walk, or with more credential names than can be covered, is refused", function()
    local dir = home .. "/opt/big"
    for i = 1, 3 do write(dir .. "/p" .. i .. "/.npmrc", "x") end
    local walk_max, mask_max = tools.WALK_MAX, tools.MASK_MAX
    tools.MASK_MAX = 2
    local ok, err = tools.plan({ home = home, cwd = work, given = { dir } })
    tools.MASK_MAX = mask_max
    assert.is_nil(ok)
    assert.truthy(err:find("hold 3 files and 0 directories named like credentials", 1, true), err)
    tools.WALK_MAX = 4
    ok, err = tools.plan({ home = home, cwd = work, given = { dir } })
    tools.WALK_MAX = walk_max
    assert.is_nil(ok)
    assert.truthy(err:find("has more than 4 entries: it is not bound unchecked", 1, true), err)
    assert.are.equal(3, #assert(tools.plan({ home = home, cwd = work, given = { dir } })).mask_files)
  end)

  it("the builders: tools is an array of paths (absolute or $HOME/), bound read-only; docker -v :ro", function()
    local isolation = require("isolation")
    local s = { config = { mode = "bwrap", network = "allow" }, workdir = work, command = "true",
      tools = { "$HOME/.nvm/versions/node/v22" } }
    local argv = assert(isolation.bwrap_argv(s))
    assert.truthy(table.concat(argv, " "):find("--ro-bind $HOME/.nvm/versions/node/v22 $HOME/.nvm/versions/node/v22",
      1, true))
    s.tools = { "rel/dir" }
    local ok, err = isolation.argv(s)
    assert.is_nil(ok)
    assert.are.equal('isolation: tools[1] must be an absolute path or start with $HOME/ (got "rel/dir")', err)
    s.tools = { "/" }
    assert.is_nil(isolation.argv(s))
    s.config = { mode = "docker", network = "allow", docker_image = "debian" }
    s.tools = { "/opt/t" }
    argv = assert(isolation.docker_argv(s))
    assert.truthy(table.concat(argv, " "):find("-v /opt/t:/opt/t:ro", 1, true), table.concat(argv, " "))
  end)
end)
