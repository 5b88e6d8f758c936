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
local SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

describe("tools under $HOME", function()
  local top, home, work
  before_each(function()
    top = helpers.tmpdir()
    home, work = top .. "/home", top .. "/work"
    assert(uv.fs_mkdir(home, 448))
    assert(uv.fs_mkdir(work, 448))
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
    local top = helpers.tmpdir()
    local home, work = top .. "/home", top .. "/work"
    assert(uv.fs_mkdir(home, 448))
    assert(uv.fs_mkdir(work, 448))
    local v = home .. "/.nvm/versions/node/v22.1.0"
    program(v .. "/bin/node", "node", "v22.1.0")
    program(v .. "/bin/pnpm", "pnpm", "9.1.0")
    local old_home, old_path = os.getenv("HOME"), os.getenv("PATH")
    uv.os_setenv("HOME", home)
    uv.os_setenv("PATH", v .. "/bin:" .. old_path)
    local exited = {}
    local ok, err = pcall(function()
      local mgr = assert(session.manager({
        runtime_dir = top .. "/run", loop = uv, poll_interval = 0.05,
        launcher = function(cmdline, s)
          return uv.spawn("bash", { args = { "-c", "exec " .. cmdline }, stdio = { nil, nil, nil } },
            function(code, sig) exited[s.id] = sig ~= 0 and 128 + sig or code end)
        end,
        alive = function(_, s) return exited[s.id] == nil end,
        stop = function(handle) handle:kill("sigterm") end,
      }))
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
