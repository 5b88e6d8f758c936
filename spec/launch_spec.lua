-- The argv builders: exact command lines for every agent x network x mode,
-- the mount order that keeps every bind alive, the literal $HOME tokens, and
-- every refusal naming its field.
local isolation = require("isolation")
local helpers = require("helpers")

local SOCK = isolation.SANDBOX_PROXY_SOCKET

local SYSTEM = {
  "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
  "--ro-bind-try", "/bin", "/bin", "--ro-bind-try", "/lib", "/lib",
  "--ro-bind-try", "/lib64", "/lib64", "--ro-bind-try", "/sbin", "/sbin",
  "--dev", "/dev", "--proc", "/proc",
  -- the host's kernel knobs read-only, what it shows beyond the pid namespace masked
  "--ro-bind-try", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
  "--ro-bind-try", "/proc/irq", "/proc/irq", "--ro-bind-try", "/proc/bus", "/proc/bus",
  "--ro-bind-try", "/proc/fs", "/proc/fs", "--ro-bind-try", "/proc/acpi", "/proc/acpi",
  "--ro-bind-try", "/proc/scsi", "/proc/scsi", "--ro-bind-try", "/proc/asound", "/proc/asound",
  "--ro-bind", "/dev/null", "/proc/timer_list", "--ro-bind", "/dev/null", "/proc/interrupts",
  "--ro-bind-try", "/proc/sys/kernel/keys/../../../../dev/null", "/proc/keys",
  "--tmpfs", "/tmp", "--tmpfs", "$HOME",
}
local UNSHARE = { "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent" }
local CAPS = { "--cap-drop", "ALL", "--unshare-user", "--disable-userns" }
local DOCKER_PRIVS = { "--cap-drop", "ALL", "--security-opt", "no-new-privileges" }

local AGENT_BINDS = {
  claude = { "$HOME/.claude", "$HOME/.claude.json" },
  codex = { "$HOME/.codex" },
  gemini = { "$HOME/.gemini", "$HOME/.config/gemini" },
  aider = {},
}

local function concat(...)
  local out = {}
  for _, t in ipairs({ ... }) do
    for _, v in ipairs(t) do out[#out + 1] = v end
  end
  return out
end

local function index_of(argv, ...)
  local seq = { ... }
  for i = 1, #argv - #seq + 1 do
    local ok = true
    for k = 1, #seq do
      if argv[i + k - 1] ~= seq[k] then ok = false break end
    end
    if ok then return i end
  end
  return nil
end

local deep_copy = require("support.tables").deep_copy

-- The names docker passes from the launching shell (-e NAME), PATH aside.
local DOCKER_BASE_ENV = { "LANG", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY",
  "LC_MESSAGES", "LC_PAPER", "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
  "TERM", "COLORTERM", "TZ", "USER", "LOGNAME" }

local function docker_env(agent)
  local out = {}
  for _, list in ipairs({ DOCKER_BASE_ENV, isolation.AGENT_ENV[agent] or {} }) do
    for _, n in ipairs(list) do
      out[#out + 1] = "-e"
      out[#out + 1] = n
    end
  end
  return out
end

-- The parts of each agent's config that name commands: read-only inside.
local AGENT_RO = {
  claude = { "settings.json", "settings.local.json", "commands", "agents", "hooks", "plugins", "skills", "local" },
  codex = { "config.toml", ".env", "prompts", "rules", "skills", "AGENTS.md" },
  gemini = { "settings.json", "commands", "extensions", ".env", "policies", "trustedFolders.json", "skills", "agents",
    "tmp/bin" },
  aider = {},
}
local AGENT_DIR = { claude = "$HOME/.claude/", codex = "$HOME/.codex/", gemini = "$HOME/.gemini/", aider = "" }

-- The default protected paths in the workdir: parents pinned, then the
-- paths read-only, shallower first, each in isolation.PROTECTED's order.
local PROTECT_PINS = { ".git", ".claude" }
local PROTECT_DEFAULT = { ".git/hooks", ".git/config", ".git/info", ".git/commondir", ".gitmodules", ".vscode",
  ".idea", ".claude/settings.json", ".claude/settings.local.json", ".claude/commands", ".claude/agents",
  ".claude/hooks", ".claude/skills", ".mcp.json", ".codex", ".gemini", ".cursor", ".devcontainer",
  ".pre-commit-config.yaml", ".husky", "lefthook.yml", ".lefthook.yml" }

local function protect_bwrap(w)
  local out = {}
  for _, p in ipairs(PROTECT_PINS) do
    for _, e in ipairs({ "--bind-try", w .. "/" .. p, w .. "/" .. p }) do out[#out + 1] = e end
  end
  for depth = 0, 1 do
    for _, p in ipairs(PROTECT_DEFAULT) do
      if select(2, p:gsub("/", "")) == depth then
        for _, e in ipairs({ "--ro-bind-try", w .. "/" .. p, w .. "/" .. p }) do out[#out + 1] = e end
      end
    end
  end
  return out
end

-- argv() of bwrap runs bwrap behind `env -i ...`: the part from "bwrap" on.
local function from_bwrap(argv)
  for i, v in ipairs(argv) do
    if v == "bwrap" then return table.move(argv, i, #argv, 1, {}) end
  end
  return argv
end

local function protect_docker(w)
  local out = {}
  for _, p in ipairs(PROTECT_PINS) do
    out[#out + 1] = "-v"
    out[#out + 1] = w .. "/" .. p .. ":" .. w .. "/" .. p
  end
  for _, p in ipairs(PROTECT_DEFAULT) do
    out[#out + 1] = "-v"
    out[#out + 1] = w .. "/" .. p .. ":" .. w .. "/" .. p .. ":ro"
  end
  return out
end

local function agent_bwrap(agent)
  local out = {}
  for _, p in ipairs(AGENT_BINDS[agent]) do
    out[#out + 1] = "--bind-try"
    out[#out + 1] = p
    out[#out + 1] = p
  end
  for _, p in ipairs(AGENT_RO[agent]) do
    out[#out + 1] = "--ro-bind-try"
    out[#out + 1] = AGENT_DIR[agent] .. p
    out[#out + 1] = AGENT_DIR[agent] .. p
  end
  return out
end

local function agent_docker(agent)
  local out = {}
  for _, p in ipairs(AGENT_BINDS[agent]) do
    out[#out + 1] = "-v"
    out[#out + 1] = p .. ":" .. p
  end
  return out
end

describe("bwrap_argv", function()
  for _, agent in ipairs({ "claude", "codex", "gemini", "aider" }) do
    it(agent .. ", network allow: the exact argv", function()
      local argv = assert(isolation.bwrap_argv({
        config = { mode = "bwrap" }, agent = agent, workdir = "/srv/project", command = "run --it",
      }))
      assert.are.same(concat({ "bwrap" }, SYSTEM, agent_bwrap(agent),
        { "--bind", "/srv/project", "/srv/project" }, protect_bwrap("/srv/project"), { "--chdir", "/srv/project" },
        CAPS, UNSHARE, { "--", "bash", "-c", "--", "run --it" }), argv)
    end)

    it(agent .. ", network deny: the exact argv, socket as a single file, bridge script", function()
      local argv = assert(isolation.bwrap_argv({
        config = { mode = "bwrap", network = "deny" }, agent = agent, workdir = "/srv/project",
        command = "run --it", proxy_socket = "/var/lib/lectern/s1.sock",
      }))
      local script = argv[#argv - 2]
      assert.are.same(concat({ "bwrap" }, SYSTEM, agent_bwrap(agent),
        { "--bind", "/srv/project", "/srv/project" }, protect_bwrap("/srv/project"),
        { "--ro-bind", "/var/lib/lectern/s1.sock", SOCK, "--chdir", "/srv/project", "--cap-drop", "ALL",
          "--unshare-user", "--disable-userns",
          "--unshare-net" },
        UNSHARE, { "--", "bash", "-c", "--", script, "bash", "run --it" }), argv)
      -- listening address first, then the socket
      assert.truthy(script:find("socat TCP-LISTEN:3128,bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:" .. SOCK, 1, true))
      -- waits for the listener in its own /proc/net/tcp: 127.0.0.1:3128 = 0100007F:0C38, state 0A
      assert.truthy(script:find("0100007F:0C38 00000000:0000 0A", 1, true))
      for _, var in ipairs({ "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy" }) do
        assert.truthy(script:find(var .. "=http://127.0.0.1:3128", 1, true), var)
      end
      assert.truthy(script:find("NO_PROXY= no_proxy= ", 1, true))
      -- Node's built-in fetch ignores the proxy variables without it
      assert.truthy(script:find(" NODE_USE_ENV_PROXY=1;", 1, true))
      -- the command is $1, never spliced into the script
      assert.are.equal('exec bash -c -- "$1"', script:sub(-#'exec bash -c -- "$1"'))
      assert.is_nil(script:find("run --it", 1, true))
      -- the bridge starts, then the wait, then the exports, then the command
      local s, w, e, x = script:find("socat", 1, true), script:find("/proc/net/tcp", 1, true),
        script:find("export", 1, true), script:find("exec bash", 1, true)
      assert.is_true(s < w and w < e and e < x)
    end)
  end

  it("uses proxy_port for the bridge, the wait and the variables", function()
    local argv = assert(isolation.bwrap_argv({
      config = { mode = "bwrap", network = "deny" }, workdir = "/w", command = "c",
      proxy_socket = "/p.sock", proxy_port = 18080,
    }))
    local script = argv[#argv - 2]
    assert.truthy(script:find("TCP-LISTEN:18080,", 1, true))
    assert.truthy(script:find("0100007F:46A0 ", 1, true))
    assert.truthy(script:find("HTTPS_PROXY=http://127.0.0.1:18080 ", 1, true))
    assert.is_nil(script:find("3128", 1, true))
    -- an integral float (JSON numbers) is accepted
    assert.truthy(isolation.bwrap_argv({
      config = { mode = "bwrap", network = "deny" }, workdir = "/w", command = "c",
      proxy_socket = "/p.sock", proxy_port = 18080.0,
    }))
  end)

  it("socks_port: a second socat listener, waited for too, and ALL_PROXY at it (socks5h)", function()
    local function script_of(extra)
      local spec = { config = { mode = "bwrap", network = "deny" }, workdir = "/w", command = "c",
        proxy_socket = "/p.sock" }
      for k, v in pairs(extra) do spec[k] = v end
      local argv = assert(isolation.bwrap_argv(spec))
      return argv[#argv - 2]
    end
    -- the default, 1080 = 0x0438
    local script = script_of({})
    assert.truthy(script:find("socat TCP-LISTEN:3128,bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:" .. SOCK
      .. " </dev/null & bridge=$!; socat TCP-LISTEN:1080,bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:" .. SOCK
      .. " </dev/null & socks=$!; ", 1, true), script)
    assert.truthy(script:find("0100007F:0438 00000000:0000 0A", 1, true), script)
    assert.truthy(script:find('! kill -0 "$socks"', 1, true), script)
    assert.truthy(script:find(" ALL_PROXY=socks5h://127.0.0.1:1080 all_proxy=socks5h://127.0.0.1:1080 ", 1, true))
    -- both listen before the exports
    assert.is_true(script:find("0100007F:0438", 1, true) < script:find("export", 1, true))
    -- another port: 19050 = 0x4A6A; the HTTP side unchanged
    script = script_of({ socks_port = 19050, proxy_port = 18080 })
    assert.truthy(script:find("socat TCP-LISTEN:19050,bind=127.0.0.1,reuseaddr,fork ", 1, true), script)
    assert.truthy(script:find("0100007F:4A6A 00000000:0000 0A", 1, true), script)
    assert.truthy(script:find("ALL_PROXY=socks5h://127.0.0.1:19050 all_proxy=socks5h://127.0.0.1:19050 ", 1, true))
    assert.truthy(script:find("HTTPS_PROXY=http://127.0.0.1:18080 ", 1, true))
    assert.is_nil(script:find("1080", 1, true))
    assert.truthy(script_of({ socks_port = 19050.0 }):find("TCP-LISTEN:19050,", 1, true))
    -- dry_run says so
    local text = assert(isolation.dry_run({ config = { mode = "bwrap", network = "deny" }, workdir = "/w",
      command = "c", proxy_socket = "/p.sock", socks_port = 19050 }))
    assert.truthy(text:find("only 127.0.0.1:3128 (HTTP) and 127.0.0.1:19050 (SOCKS5) -> socat", 1, true), text)
    assert.truthy(text:find("\n  ALL_PROXY, all_proxy=socks5h://127.0.0.1:19050 (non-HTTP TCP)\n", 1, true), text)
  end)

  it("socks_port refusals name the field, the value and what is accepted", function()
    local base = { config = { mode = "bwrap", network = "deny" }, workdir = "/w", command = "c",
      proxy_socket = "/p.sock" }
    local function err_of(extra)
      local spec = {}
      for k, v in pairs(base) do spec[k] = v end
      for k, v in pairs(extra) do spec[k] = v end
      local res, err = isolation.bwrap_argv(spec)
      assert.is_nil(res)
      return err
    end
    assert.are.equal("isolation: socks_port must be an integer 1024..65535 (got number 80)",
      err_of({ socks_port = 80 }))
    assert.are.equal('isolation: socks_port must be an integer 1024..65535 (got "1080")',
      err_of({ socks_port = "1080" }))
    assert.are.equal("isolation: socks_port must be an integer 1024..65535 other than proxy_port (3128): both "
      .. "bridge listeners are on 127.0.0.1 (got number 3128)", err_of({ socks_port = 3128 }))
    assert.are.equal("isolation: socks_port must be an integer 1024..65535 other than proxy_port (1080): both "
      .. "bridge listeners are on 127.0.0.1; its default is 1080, give another (got nil)",
      err_of({ proxy_port = 1080 }))
    assert.truthy(isolation.bwrap_argv({ config = base.config, workdir = "/w", command = "c", proxy_socket = "/p.sock",
      proxy_port = 1080, socks_port = 1081 }))
    local _, unknown = isolation.bwrap_argv({ workdir = "/w", command = "c", socksport = 1 })
    assert.truthy(unknown:find("proxy_port, socks_port, binds", 1, true), unknown)
  end)

  it("builtin bridge: bound read-only as a single file, run as $2 with port and socket, no socat", function()
    local argv = assert(isolation.bwrap_argv({
      config = { mode = "bwrap", network = "deny" }, workdir = "/w", command = "c",
      proxy_socket = "/p.sock", bridge = "builtin", bridge_path = "/opt/isolation/isolation-bridge",
    }))
    assert.truthy(index_of(argv, "--ro-bind", "/opt/isolation/isolation-bridge", "/opt/isolation/isolation-bridge"))
    local script = argv[#argv - 3]
    assert.are.same({ "-c", "--", script, "bash", "c", "/opt/isolation/isolation-bridge" },
      { table.unpack(argv, #argv - 5) })
    assert.truthy(script:find('^"%$2" 3128,1080 ' .. SOCK:gsub("%p", "%%%0") .. " "))
    assert.is_nil(script:find("socat", 1, true))
    assert.truthy(script:find("exit 126", 1, true))
    assert.truthy(script:find('exec bash -c -- "$1"', 1, true))
  end)

  it("pass bridge: the same program bound read-only, exec'd with --pass, port, socket and the command", function()
    local argv = assert(isolation.bwrap_argv({
      config = { mode = "bwrap", network = "deny" }, workdir = "/w", command = "c", proxy_port = 18080,
      proxy_socket = "/p.sock", bridge = "pass", bridge_path = "/opt/isolation/isolation-bridge",
    }))
    assert.truthy(index_of(argv, "--ro-bind", "/opt/isolation/isolation-bridge", "/opt/isolation/isolation-bridge"))
    -- no shell before the starter: bwrap sets the proxy variables and execs
    -- it, and it execs the command's bash (the command one argument)
    assert.are.same({ "--", "/opt/isolation/isolation-bridge", "--pass", "18080,1080", SOCK, "bash", "-c", "--", "c" },
      { table.unpack(argv, #argv - 8) })
    local url, socks = "http://127.0.0.1:18080", "socks5h://127.0.0.1:1080"
    for name, value in pairs({ HTTP_PROXY = url, HTTPS_PROXY = url, http_proxy = url, https_proxy = url,
      ALL_PROXY = socks, all_proxy = socks, NO_PROXY = "", no_proxy = "", NODE_USE_ENV_PROXY = "1" }) do
      local at = index_of(argv, "--setenv", name, value)
      assert.truthy(at and at < #argv - 8, name) -- bwrap's option, not the starter's
    end
    for _, word in ipairs(argv) do
      assert.is_nil(word:find("socat", 1, true))
      assert.is_nil(word:find("sleep", 1, true))
    end
    local text = assert(isolation.dry_run({
      config = { mode = "bwrap", network = "deny" }, workdir = "/w", command = "c",
      proxy_socket = "/p.sock", bridge = "pass", bridge_path = "/opt/isolation/isolation-bridge",
    }))
    assert.truthy(text:find("-> pass (the listener handed to the proxy) ->", 1, true), text)
  end)

  it("pass bridge needs the program too, and bridge names the three choices", function()
    local saved = isolation.BRIDGE
    isolation.BRIDGE = nil
    local res, err = isolation.bwrap_argv({ config = { mode = "bwrap", network = "deny" }, workdir = "/w",
      command = "c", proxy_socket = "/p.sock", bridge = "pass" })
    isolation.BRIDGE = saved
    assert.is_nil(res)
    assert.matches('bridge "pass" needs bridge_path', err, 1, true)
    res, err = isolation.bwrap_argv({ config = { mode = "bwrap", network = "deny" }, workdir = "/w",
      command = "c", proxy_socket = "/p.sock", bridge = "relay" })
    assert.is_nil(res)
    assert.matches('bridge must be "socat", "builtin" or "pass" (got "relay")', err, 1, true)
  end)

  it("builtin bridge defaults to isolation.BRIDGE and is refused when there is none", function()
    local spec = { config = { mode = "bwrap", network = "deny" }, workdir = "/w", command = "c",
      proxy_socket = "/p.sock", bridge = "builtin" }
    local saved = isolation.BRIDGE
    isolation.BRIDGE = "/usr/local/libexec/isolation-bridge"
    local argv = assert(isolation.bwrap_argv(spec))
    assert.are.equal("/usr/local/libexec/isolation-bridge", argv[#argv])
    isolation.BRIDGE = nil
    local res, err = isolation.bwrap_argv(spec)
    isolation.BRIDGE = saved
    assert.is_nil(res)
    assert.matches("bridge_path", err, 1, true)
  end)

  it("ca_cert: one read-only file and the six variables", function()
    local argv = assert(isolation.bwrap_argv({ workdir = "/w", command = "c", ca_cert = "/etc/lectern/ca.pem" }))
    assert.truthy(index_of(argv, "--ro-bind", "/etc/lectern/ca.pem", "/etc/lectern/ca.pem"))
    for _, var in ipairs({ "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO",
      "CARGO_HTTP_CAINFO", "CURL_CA_BUNDLE" }) do
      assert.truthy(index_of(argv, "--setenv", var, "/etc/lectern/ca.pem"), var)
    end
    assert.is_true(index_of(argv, "--setenv") < index_of(argv, "--"))
  end)

  it("orders mounts so every bind survives: tmpfs first, parents before children", function()
    local argv = assert(isolation.bwrap_argv({
      agent = "claude", workdir = "/tmp/work/project", command = "c",
      binds = { "$HOME/.cache/pip", "/tmp/shared" },
      ro_binds = { "/tmp/work/project/.git", "$HOME/.gitconfig" },
    }))
    local tmp = index_of(argv, "--tmpfs", "/tmp")
    local home = index_of(argv, "--tmpfs", "$HOME")
    local work = index_of(argv, "--bind", "/tmp/work/project", "/tmp/work/project")
    local git = index_of(argv, "--ro-bind", "/tmp/work/project/.git", "/tmp/work/project/.git")
    local shared = index_of(argv, "--bind", "/tmp/shared", "/tmp/shared")
    local pip = index_of(argv, "--bind", "$HOME/.cache/pip", "$HOME/.cache/pip")
    local gitconfig = index_of(argv, "--ro-bind", "$HOME/.gitconfig", "$HOME/.gitconfig")
    local claude = index_of(argv, "--bind-try", "$HOME/.claude", "$HOME/.claude")
    for _, i in ipairs({ work, git, shared, pip, gitconfig, claude }) do
      assert.is_true(i > tmp and i > home)
    end
    assert.is_true(git > work, "a read-only bind inside the workdir must come after it")
    assert.is_true(index_of(argv, "--chdir", "/tmp/work/project") > git)
  end)

  it("puts a read-only $HOME/ bind after an absolute read-write one, whatever $HOME's depth", function()
    -- /a/b/c/d/ws is deeper than $HOME/ws/.git counted as /home/<user>/ws/.git,
    -- but with HOME=/a/b/c/d the read-only .git is inside it: it must come after
    local spec = { workdir = "/a/b/c/d/ws", command = "c", ro_binds = { "$HOME/ws/.git" },
      binds = { "$HOME/cache" } }
    local argv = assert(isolation.bwrap_argv(spec))
    local work = index_of(argv, "--bind", "/a/b/c/d/ws", "/a/b/c/d/ws")
    local git = index_of(argv, "--ro-bind", "$HOME/ws/.git", "$HOME/ws/.git")
    assert.is_true(git > work)
    -- and an absolute read-only bind after a $HOME/ read-write one
    argv = assert(isolation.bwrap_argv({ workdir = "/w", command = "c", binds = { "$HOME/a/b/c/src" },
      ro_binds = { "/srv/u/src/.git" } }))
    assert.is_true(index_of(argv, "--ro-bind", "/srv/u/src/.git", "/srv/u/src/.git")
      > index_of(argv, "--bind", "$HOME/a/b/c/src", "$HOME/a/b/c/src"))
    -- nesting it can see is still parents first: read-only outside, read-write inside
    argv = assert(isolation.bwrap_argv({ workdir = "/srv/repo/out", command = "c", ro_binds = { "/srv/repo" } }))
    assert.is_true(index_of(argv, "--bind", "/srv/repo/out", "/srv/repo/out")
      > index_of(argv, "--ro-bind", "/srv/repo", "/srv/repo"))
  end)

  it("refuses mounts whose order would depend on where $HOME is, in every builder", function()
    -- /srv/repo (ro) holds /srv/repo/out (rw); $HOME/data (ro) holds
    -- $HOME/data/tmp (rw); each rw must precede the other pair's ro: a cycle
    local spec = { workdir = "/w", command = "c", ro_binds = { "/srv/repo", "$HOME/data" },
      binds = { "/srv/repo/out", "$HOME/data/tmp" } }
    local before = deep_copy(spec)
    for _, f in ipairs({ "bwrap_argv", "argv", "wrap", "dry_run" }) do
      local s = deep_copy(spec)
      s.config = { mode = "bwrap" }
      local out, err = isolation[f](s)
      assert.is_nil(out, f)
      assert.matches("read%-write", err)
      assert.matches("read%-only", err)
      assert.matches("depends on %$HOME", err)
      assert.matches("both as %$HOME/ paths or both as absolute", err)
      assert.truthy(err:find("binds \"", 1, true), err)
    end
    assert.are.same(before, spec)
    -- docker orders its own mounts: the same spec builds there
    local d = deep_copy(spec)
    d.config = { mode = "docker" }
    assert.truthy(isolation.docker_argv(d))
  end)

  it("takes the tier from the builder: bwrap_argv of a docker or empty config still builds bwrap", function()
    local a = assert(isolation.bwrap_argv({ config = { mode = "docker" }, workdir = "/w", command = "c" }))
    local b = assert(isolation.bwrap_argv({ workdir = "/w", command = "c" }))
    assert.are.same(a, b)
    assert.are.equal("bwrap", a[1])
  end)

  it("never binds /, /run, /var/run, the host's /tmp or the whole of $HOME", function()
    for _, agent in ipairs({ "claude", "codex", "gemini", "aider" }) do
      for _, network in ipairs({ "allow", "deny" }) do
        local argv = assert(isolation.bwrap_argv({
          config = { mode = "bwrap", network = network }, agent = agent, workdir = "/tmp/w/p",
          command = "c", proxy_socket = "/run/user/1000/lectern/p.sock", binds = { "/tmp/x" },
        }))
        for i, v in ipairs(argv) do
          if v == "--bind" or v == "--ro-bind" or v == "--bind-try" or v == "--ro-bind-try" or v == "--dev-bind" then
            for _, bad in ipairs({ "/", "/run", "/var/run", "/tmp", "$HOME", "$HOME/" }) do
              assert.are_not.equal(bad, argv[i + 1])
              assert.are_not.equal(bad, argv[i + 2])
            end
          end
          assert.are_not.equal("--dev-bind", v)
        end
      end
    end
  end)

  it("seccomp_fd: --seccomp N among the options, before --; absent, no --seccomp", function()
    for _, network in ipairs({ "allow", "deny" }) do
      local spec = { config = { mode = "bwrap", network = network }, agent = "claude", workdir = "/srv/project",
        command = "run --it", proxy_socket = "/p.sock" }
      local without = assert(isolation.bwrap_argv(spec))
      assert.is_nil(index_of(without, "--seccomp"))
      spec.seccomp_fd = 3
      local before = deep_copy(spec)
      local argv = assert(isolation.bwrap_argv(spec))
      assert.are.same(before, spec)
      -- the same argv with the two elements right before the first --
      local dash = index_of(without, "--")
      local want = table.move(without, 1, dash - 1, 1, {})
      want[#want + 1] = "--seccomp"
      want[#want + 1] = "3"
      table.move(without, dash, #without, #want + 1, want)
      assert.are.same(want, argv)
      assert.is_true(index_of(argv, "--seccomp", "3") < index_of(argv, "--"))
    end
    local argv = assert(isolation.bwrap_argv({ workdir = "/w", command = "c", seccomp_fd = 1023 }))
    assert.truthy(index_of(argv, "--seccomp", "1023", "--", "bash"))
    -- quoted by wrap like every element
    local line = assert(isolation.wrap({ config = { mode = "bwrap" }, workdir = "/w", command = "c", seccomp_fd = 7 }))
    assert.truthy(line:find(" '--seccomp' '7' '--' 'bash' ", 1, true), line)
  end)

  it("seccomp_fd: refused unless an integer 3..1023, naming the field and the value", function()
    for _, case in ipairs({ { 0, "(got number 0)" }, { 1, "(got number 1)" }, { 2, "(got number 2)" },
      { -1, "(got number -1)" }, { 1024, "(got number 1024)" }, { 3.5, "(got number 3.5)" },
      { 3.0, "(got number 3.0)" }, { "3", '(got "3")' }, { true, "(got true)" }, { {}, "(got table)" } }) do
      local spec = { config = { mode = "bwrap" }, workdir = "/w", command = "c", seccomp_fd = case[1] }
      local before = deep_copy(spec)
      for _, fn in ipairs({ "bwrap_argv", "argv", "wrap", "dry_run" }) do
        local res, err = isolation[fn](spec)
        assert.is_nil(res, fn)
        assert.truthy(err:find("^isolation: seccomp_fd must be an integer 3%.%.1023"), err)
        assert.truthy(err:find(case[2], 1, true), fn .. ": " .. err)
      end
      assert.are.same(before, spec)
    end
  end)

  it("seccomp_file: --seccomp 3, or seccomp_fd's N; wrap ends with the redirection that opens it", function()
    for _, network in ipairs({ "allow", "deny" }) do
      local spec = { config = { mode = "bwrap", network = network }, agent = "claude", workdir = "/srv/project",
        command = "run --it", proxy_socket = "/p.sock" }
      local without_argv = assert(isolation.bwrap_argv(spec))
      local without_line = assert(isolation.wrap(spec))
      assert.is_nil(without_line:find(" %d<'"))
      spec.seccomp_fd = 3
      local with_fd_argv = assert(isolation.bwrap_argv(spec))
      local with_fd_line = assert(isolation.wrap(spec))
      spec.seccomp_fd = nil
      spec.seccomp_file = "/etc/isolation/tty.bpf"
      local before = deep_copy(spec)
      -- the argv is the one seccomp_fd = 3 gives: the file is not an argument
      local argv = assert(isolation.bwrap_argv(spec))
      assert.are.same(with_fd_argv, argv)
      assert.are.same(argv, from_bwrap(assert(isolation.argv(spec))))
      assert.are_not.same(without_argv, argv)
      assert.truthy(index_of(argv, "--seccomp", "3", "--", "bash", "-c", "--"))
      for _, v in ipairs(argv) do assert.is_nil(v:find("tty.bpf", 1, true)) end
      -- the line is seccomp_fd = 3's, plus one redirection at the end, after the last argument
      local line = assert(isolation.wrap(spec))
      assert.are.equal(with_fd_line .. " 3<'/etc/isolation/tty.bpf'", line)
      assert.are.same(before, spec)
      -- seccomp_fd says which descriptor
      spec.seccomp_fd = 5
      argv = assert(isolation.bwrap_argv(spec))
      assert.truthy(index_of(argv, "--seccomp", "5", "--"))
      assert.is_nil(index_of(argv, "--seccomp", "3"))
      line = assert(isolation.wrap(spec))
      assert.truthy(line:find(" '--seccomp' '5' '--' 'bash' '-c' ", 1, true), line)
      assert.are.equal(" 5<'/etc/isolation/tty.bpf'", line:sub(-#" 5<'/etc/isolation/tty.bpf'"))
      spec.seccomp_fd = 9
      assert.are.equal(" 9<'/etc/isolation/tty.bpf'", assert(isolation.wrap(spec)):sub(-#" 9<'/etc/isolation/tty.bpf'"))
    end
  end)

  it("seccomp_file: the path is single-quoted like every element, nothing in it expands", function()
    local path = "/srv/x'$(touch /tmp/PWNED)' `id` $HOME a b\\n\nc"
    local line = assert(isolation.wrap({ config = { mode = "bwrap" }, workdir = "/w", command = "c",
      seccomp_file = path }))
    -- a line after a raw newline starts with '' (close and reopen), for bash -i
    local want = " 3<'" .. path:gsub("'", "'\\''"):gsub("\n", "\n''") .. "'"
    assert.are.equal(want, line:sub(-#want))
    -- the only double quotes in bwrap's part are the --tmpfs "$HOME" token's
    local body = helpers.line_body(line)
    local _, quotes = body:sub((body:find("'bwrap'", 1, true))):gsub('"', "")
    assert.are.equal(2, quotes)
    assert.truthy(line:find([['--tmpfs' "$HOME"]], 1, true))
  end)

  it("seccomp_file: refused unless absolute, without NUL, . or ..; never $HOME; naming the field and value", function()
    for _, case in ipairs({
      { "tty.bpf", '(got "tty.bpf")', "must be an absolute path" },
      { "$HOME/tty.bpf", '(got "$HOME/tty.bpf")', "must be an absolute path" },
      { "~/tty.bpf", '(got "~/tty.bpf")', "must be an absolute path" },
      { "/etc/x\0y", '(got "/etc/x\\x00y")', "NUL" },
      { "/srv/../etc/tty.bpf", '(got "/srv/../etc/tty.bpf")', ". or .." },
      { "/srv/./tty.bpf", '(got "/srv/./tty.bpf")', ". or .." },
      { "/srv//tty.bpf", '(got "/srv//tty.bpf")', "(//)" },
      { "/dev/stdin", '(got "/dev/stdin")', "/dev" },
      { "", '(got "")', "must not be empty" },
      { 3, "(got number 3)", "must be a string" },
    }) do
      for _, mode in ipairs({ "bwrap", "docker", "" }) do
        local spec = { config = { mode = mode }, workdir = "/w", command = "c", seccomp_file = case[1] }
        local before = deep_copy(spec)
        for _, fn in ipairs({ "bwrap_argv", "docker_argv", "argv", "wrap", "dry_run" }) do
          local res, err = isolation[fn](spec)
          assert.is_nil(res, fn)
          assert.truthy(err:find("^isolation: seccomp_file "), err)
          assert.truthy(err:find(case[2], 1, true), fn .. ": " .. err)
          assert.truthy(err:find(case[3], 1, true), fn .. ": " .. err)
        end
        assert.are.same(before, spec)
      end
    end
  end)

  it("seccomp_file with seccomp_fd above 9: refused (a POSIX shell's redirection takes one digit)", function()
    for _, fd in ipairs({ 10, 15, 1023 }) do
      local spec = { config = { mode = "bwrap" }, workdir = "/w", command = "c", seccomp_file = "/f.bpf",
        seccomp_fd = fd }
      for _, fn in ipairs({ "bwrap_argv", "argv", "wrap", "dry_run" }) do
        local res, err = isolation[fn](spec)
        assert.is_nil(res, fn)
        assert.truthy(err:find("^isolation: seccomp_fd must be 3%.%.9 with seccomp_file"), err)
        assert.truthy(err:find("(got number " .. fd .. ")", 1, true), err)
      end
      -- without seccomp_file the descriptor is the caller's: any 3..1023
      spec.seccomp_file = nil
      assert.truthy(isolation.wrap(spec))
    end
  end)

  it("keeps $HOME tokens literal and never expands them", function()
    local argv = assert(isolation.bwrap_argv({ agent = "gemini", workdir = "/w", command = "echo $HOME",
      binds = { "$HOME/.npm" } }))
    assert.truthy(index_of(argv, "--tmpfs", "$HOME"))
    assert.truthy(index_of(argv, "--bind-try", "$HOME/.config/gemini", "$HOME/.config/gemini"))
    assert.truthy(index_of(argv, "--bind", "$HOME/.npm", "$HOME/.npm"))
    assert.are.equal("echo $HOME", argv[#argv])
    local home = os.getenv("HOME")
    if home and #home > 1 then
      for _, v in ipairs(argv) do assert.is_nil(v:find(home, 1, true)) end
    end
  end)
end)

describe("docker_argv", function()
  for _, agent in ipairs({ "claude", "codex", "gemini", "aider" }) do
    for _, network in ipairs({ "allow", "none" }) do
      it(agent .. ", network " .. network .. ": the exact argv", function()
        local argv = assert(isolation.docker_argv({
          config = { mode = "docker", network = network }, agent = agent, workdir = "/srv/p", command = "run it",
        }))
        assert.are.same(concat({ "docker", "run", "--rm", "-i", "-t", "--init", "--user", "$(id -u):$(id -g)" },
          DOCKER_PRIVS,
          network == "none" and { "--network", "none" } or {},
          { "-v", "/srv/p:/srv/p", "-w", "/srv/p" }, agent_docker(agent),
          { "-e", "HOME=$HOME" }, docker_env(agent), protect_docker("/srv/p"),
          { "debian:bookworm-slim", "bash", "-c", "--", "run it" }), argv)
      end)
    end
  end

  it("tty = false drops -t; the image, binds, ro_binds and ca_cert apply", function()
    local argv = assert(isolation.docker_argv({
      config = { mode = "docker", docker_image = "ghcr.io/example/agent:1" }, workdir = "/srv/p", command = "c",
      tty = false, binds = { "$HOME/.npm", "/data" }, ro_binds = { "/opt/ref" }, ca_cert = "/etc/ca.pem",
    }))
    assert.are.same(concat({ "docker", "run", "--rm", "-i", "--init", "--user", "$(id -u):$(id -g)",
      "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
      "-v", "/srv/p:/srv/p", "-w", "/srv/p", "-e", "HOME=$HOME" }, docker_env(nil), {
      "-v", "$HOME/.npm:$HOME/.npm", "-v", "/data:/data", "-v", "/opt/ref:/opt/ref:ro",
      "-v", "/etc/ca.pem:/etc/ca.pem:ro",
      "-e", "SSL_CERT_FILE=/etc/ca.pem", "-e", "NODE_EXTRA_CA_CERTS=/etc/ca.pem",
      "-e", "REQUESTS_CA_BUNDLE=/etc/ca.pem", "-e", "GIT_SSL_CAINFO=/etc/ca.pem",
      "-e", "CARGO_HTTP_CAINFO=/etc/ca.pem", "-e", "CURL_CA_BUNDLE=/etc/ca.pem" }, protect_docker("/srv/p"),
      { "ghcr.io/example/agent:1", "bash", "-c", "--", "c" }), argv)
  end)

  it("refuses a mount point given twice (docker would), naming both", function()
    local res, err = isolation.docker_argv({ config = { mode = "docker" }, agent = "codex", workdir = "/w",
      command = "c", binds = { "$HOME/.codex/" } })
    assert.is_nil(res)
    assert.matches("binds[1] mounts the same path as agent codex config", err, 1, true)
    res, err = isolation.docker_argv({ config = { mode = "docker" }, workdir = "/w", command = "c",
      binds = { "/data" }, ro_binds = { "/data" } })
    assert.is_nil(res)
    assert.matches("ro_binds[1] mounts the same path as binds[1]", err, 1, true)
    -- bwrap applies both in order: the read-only one comes last and wins
    local argv = assert(isolation.bwrap_argv({ workdir = "/w", command = "c", binds = { "/data" },
      ro_binds = { "/data", "/w" } }))
    assert.is_true(index_of(argv, "--ro-bind", "/data", "/data") > index_of(argv, "--bind", "/data", "/data"))
    assert.is_true(index_of(argv, "--ro-bind", "/w", "/w") > index_of(argv, "--bind", "/w", "/w"))
  end)

  it("accepts seccomp_fd and does not use it (docker has no --seccomp FD); neither does mode \"\"", function()
    local spec = { config = { mode = "docker" }, workdir = "/w", command = "c" }
    local without = assert(isolation.docker_argv(spec))
    spec.seccomp_fd = 3
    assert.are.same(without, assert(isolation.docker_argv(spec)))
    assert.are.same(without, { table.unpack(assert(isolation.argv(spec)), 6) })
    assert.are.same({ "bash", "-c", "--", "c" }, assert(isolation.argv({ command = "c", seccomp_fd = 3 })))
  end)

  it("accepts seccomp_file and does not use it; no redirection in docker's or mode \"\"'s line", function()
    local spec = { config = { mode = "docker" }, workdir = "/w", command = "c" }
    local without, line = assert(isolation.docker_argv(spec)), assert(isolation.wrap(spec))
    spec.seccomp_file = "/etc/isolation/tty.bpf"
    assert.are.same(without, assert(isolation.docker_argv(spec)))
    assert.are.same(without, { table.unpack(assert(isolation.argv(spec)), 6) })
    assert.are.equal(line, assert(isolation.wrap(spec)))
    spec.seccomp_fd = 5
    assert.are.equal(line, assert(isolation.wrap(spec)))
    spec = { command = "c", seccomp_file = "/etc/isolation/tty.bpf" }
    assert.are.same({ "bash", "-c", "--", "c" }, assert(isolation.argv(spec)))
    assert.are.equal("'bash' '-c' '--' 'c'", assert(isolation.wrap(spec)))
  end)

  it("needs no proxy_socket for network none (no bridge), and one for deny", function()
    local argv = assert(isolation.docker_argv({ config = { mode = "docker", network = "none" }, workdir = "/w",
      command = "c" }))
    assert.truthy(index_of(argv, "--network", "none"))
    local ok, err = isolation.docker_argv({ config = { mode = "docker", network = "deny" }, workdir = "/w",
      command = "c", bridge_path = "/opt/b" })
    assert.is_nil(ok)
    assert.matches("proxy_socket is required", err)
  end)

  it("refuses a path with ':' that docker -v would split", function()
    local res, err = isolation.docker_argv({ config = { mode = "docker" }, workdir = "/srv/a:b", command = "c" })
    assert.is_nil(res)
    assert.matches("workdir", err, 1, true)
    res, err = isolation.docker_argv({ config = { mode = "docker" }, workdir = "/w", command = "c",
      ro_binds = { "/x:/etc" } })
    assert.is_nil(res)
    assert.matches("ro_binds[1]", err, 1, true)
    -- bwrap has no such syntax: fine there
    assert.truthy(isolation.bwrap_argv({ workdir = "/srv/a:b", command = "c" }))
  end)
end)

describe("argv", function()
  it("dispatches on the config's mode; mode \"\" is bash -c -- command", function()
    assert.are.same({ "bash", "-c", "--", "echo hi" }, isolation.argv({ command = "echo hi" }))
    assert.are.same({ "bash", "-c", "--", "echo hi" }, isolation.argv({ config = { mode = "" }, workdir = "/w",
      command = "echo hi" }))
    local spec = { config = { mode = "bwrap", network = "deny" }, workdir = "/w", command = "c", proxy_socket = "/p" }
    -- bwrap behind the reaper (bridge/reap.c), which starts it from an
    -- empty environment itself (--env -i: the clean environment,
    -- launch_env.c), with no env(1) exec between them
    assert.are.same(isolation.bwrap_argv(spec), from_bwrap(isolation.argv(spec)))
    assert.are.same({ isolation.BRIDGE, "--reap", "5", "--env", "--", "-i", "HOME=$HOME" },
      table.move(isolation.argv(spec), 1, 7, 1, {}))
    spec.env_inherit = true
    local reaper = { isolation.BRIDGE, "--reap", "5", "--" }
    assert.are.same(table.move(isolation.bwrap_argv(spec), 1, #isolation.bwrap_argv(spec), 5, reaper),
      isolation.argv(spec))
    -- reap = false: a line for another host, where the program is not
    spec.reap = false
    assert.are.same(isolation.bwrap_argv(spec), isolation.argv(spec))
    local argv, err = isolation.argv({ config = { mode = "bwrap" }, workdir = "/w", command = "c", reap = "yes" })
    assert.is_nil(argv)
    assert.are.equal('isolation: reap must be a boolean (got "yes")', err)
    -- docker and podman: the reaper too, with --container (the engine
    -- removes the container when the line ends: issue 27)
    spec = { config = { mode = "docker" }, agent = "codex", workdir = "/w", command = "c", tty = false }
    assert.are.same(table.move(isolation.docker_argv(spec), 1, #isolation.docker_argv(spec), 6,
      { isolation.BRIDGE, "--reap", "5", "--container", "--" }), isolation.argv(spec))
    spec.reap = false
    assert.are.same(isolation.docker_argv(spec), isolation.argv(spec))
    spec.config.mode = "podman"
    assert.is_nil(isolation.argv(spec)[2] == "--reap" or nil)
    spec.reap = nil
    assert.are.same({ isolation.BRIDGE, "--reap", "5", "--container", "--", "podman", "run" },
      table.move(isolation.argv(spec), 1, 7, 1, {}))
    assert.truthy(isolation.dry_run(spec):find("end: the bridge's reaper on the host (--reap --container)", 1, true))
    assert.truthy(isolation.dry_run(spec):find("its watchdog (isolation-watch, a session of its own) does the same "
      .. "when the reaper is SIGKILLed", 1, true))
    spec.reap = false
    assert.truthy(isolation.dry_run(spec):find("end: no reaper (reap = false)", 1, true))
  end)
end)

describe("purity", function()
  it("never changes the spec and returns new tables", function()
    local spec = { config = { mode = "bwrap", network = "deny", allow_hosts = {} }, agent = "claude",
      workdir = "/w", command = "c", proxy_socket = "/p", binds = { "/b" }, ro_binds = { "$HOME/r" },
      ca_cert = "/ca.pem", proxy_port = 4000, seccomp_fd = 3, seccomp_file = "/etc/tty.bpf" }
    local before = deep_copy(spec)
    local a = isolation.argv(spec)
    local b = isolation.argv(spec)
    isolation.wrap(spec)
    isolation.dry_run(spec)
    assert.are.same(before, spec)
    assert.are.same(a, b)
    assert.are_not.equal(a, b)
  end)

  it("gives the same output whatever HOME says (no environment read)", function()
    local spec = { agent = "codex", workdir = "/w", command = "c" }
    local code, out = require("helpers").run("HOME=/nonexistent/elsewhere lua5.4 -e '"
      .. "package.cpath=\"build/?.so\" local i=require(\"isolation\") "
      .. "print(i.wrap({agent=\"codex\",workdir=\"/w\",command=\"c\"}))'")
    assert.are.equal(0, code)
    assert.are.equal(isolation.wrap(spec) .. "\n", out)
  end)
end)

describe("refusals name the field", function()
  local W = "/srv/w"
  local DENY = { mode = "bwrap", network = "deny" }
  local cases = {
    { "workdir", { command = "c", config = { mode = "bwrap" } } },
    { "workdir", { workdir = "", command = "c" } },
    { "workdir", { workdir = "relative/path", command = "c" } },
    { "workdir", { workdir = "/", command = "c" } },
    { "workdir", { workdir = "/tmp", command = "c" } },
    { "workdir", { workdir = "/tmp/", command = "c" } },
    { "workdir", { workdir = "/run", command = "c" } },
    { "workdir", { workdir = "/var/run", command = "c" } },
    { "workdir", { workdir = "/home", command = "c" } },
    { "workdir", { workdir = "/proc/1/root", command = "c" } },
    { "workdir", { workdir = "/tmp/../etc", command = "c" } },
    { "workdir", { workdir = "/tmp/./x/..", command = "c" } },
    { "workdir", { workdir = "/srv//w", command = "c" } },
    { "workdir", { workdir = "$HOME/project", command = "c" } },
    { "workdir", { workdir = "/srv/w\0/x", command = "c" } },
    { "workdir", { workdir = 42, command = "c" } },
    { "command", { workdir = W } },
    { "command", { workdir = W, command = "" } },
    { "command", { workdir = W, command = "echo\0rm -rf /" } },
    { "command", { workdir = W, command = { "echo" } } },
    { "agent", { workdir = W, command = "c", agent = 7 } },
    { "agent", { workdir = W, command = "c", agent = "claude\0" } },
    { "config key", { workdir = W, command = "c", config = { mode = "bwrap", image = "x" } } },
    { "mode", { workdir = W, command = "c", config = { mode = "firejail" } } },
    { "network", { workdir = W, command = "c", config = { mode = "bwrap", network = "nothing" } } },
    { "network", { workdir = W, command = "c", config = { network = "deny" } } },
    { "config", { workdir = W, command = "c", config = "bwrap" } },
    { "launch spec key \"ro_bind\"", { workdir = W, command = "c", ro_bind = { "/x" } } },
    { "launch spec key \"cwd\"", { workdir = W, command = "c", cwd = "/x" } },
    { "proxy_socket", { workdir = W, command = "c", config = DENY } },
    { "proxy_socket", { workdir = W, command = "c", config = DENY, proxy_socket = "run/p.sock" } },
    { "proxy_socket", { workdir = W, command = "c", config = DENY, proxy_socket = "/" } },
    { "proxy_port", { workdir = W, command = "c", proxy_port = 0 } },
    { "proxy_port", { workdir = W, command = "c", proxy_port = 80 } },
    { "proxy_port", { workdir = W, command = "c", proxy_port = 65536 } },
    { "proxy_port", { workdir = W, command = "c", proxy_port = 3128.5 } },
    { "proxy_port", { workdir = W, command = "c", proxy_port = "3128" } },
    { "socks_port", { workdir = W, command = "c", socks_port = 0 } },
    { "socks_port", { workdir = W, command = "c", socks_port = 1023 } },
    { "socks_port", { workdir = W, command = "c", socks_port = 65536 } },
    { "socks_port", { workdir = W, command = "c", socks_port = 1080.5 } },
    { "socks_port", { workdir = W, command = "c", socks_port = "1080" } },
    { "socks_port", { workdir = W, command = "c", socks_port = 3128 } },
    { "socks_port", { workdir = W, command = "c", proxy_port = 9000, socks_port = 9000 } },
    { "socks_port", { workdir = W, command = "c", proxy_port = 1080 } },
    { "binds[1]", { workdir = W, command = "c", binds = { "relative" } } },
    { "binds[1]", { workdir = W, command = "c", binds = { "/" } } },
    { "binds[2]", { workdir = W, command = "c", binds = { "/ok", "/run" } } },
    { "binds[1]", { workdir = W, command = "c", binds = { "$HOME" } } },
    { "binds[1]", { workdir = W, command = "c", binds = { "$HOME/" } } },
    { "binds[1]", { workdir = W, command = "c", binds = { "$HOME/../etc" } } },
    { "binds[1]", { workdir = W, command = "c", binds = { "~/.ssh" } } },
    { "binds[1]", { workdir = W, command = "c", binds = { "$HOMEX/a" } } },
    { "binds[1]", { workdir = W, command = "c", binds = { 5 } } },
    { "binds", { workdir = W, command = "c", binds = "/x" } },
    { "binds", { workdir = W, command = "c", binds = { a = "/x" } } },
    { "ro_binds[1]", { workdir = W, command = "c", ro_binds = { "/tmp" } } },
    { "ro_binds[1]", { workdir = W, command = "c", ro_binds = { "/dev/sda" } } },
    { "ro_binds[1]", { workdir = W, command = "c", ro_binds = { "/x\0y" } } },
    { "ca_cert", { workdir = W, command = "c", ca_cert = "ca.pem" } },
    { "ca_cert", { workdir = W, command = "c", ca_cert = "$HOME/ca.pem" } },
    { "ca_cert", { workdir = W, command = "c", ca_cert = true } },
    { "tty", { workdir = W, command = "c", tty = "no" } },
    { "tty", { workdir = W, command = "c", tty = 0 } },
    { "seccomp_fd", { workdir = W, command = "c", seccomp_fd = 2 } },
    { "seccomp_fd", { workdir = W, command = "c", seccomp_fd = 3.5 } },
    { "seccomp_fd", { workdir = W, command = "c", config = { mode = "docker" }, seccomp_fd = "3" } },
    { "seccomp_file", { workdir = W, command = "c", seccomp_file = "tty.bpf" } },
    { "seccomp_file", { workdir = W, command = "c", seccomp_file = "$HOME/tty.bpf" } },
    { "seccomp_file", { workdir = W, command = "c", seccomp_file = "/srv/tty\0.bpf" } },
    { "seccomp_file", { workdir = W, command = "c", config = { mode = "docker" }, seccomp_file = "/a/../tty.bpf" } },
    { "seccomp_fd", { workdir = W, command = "c", seccomp_file = "/tty.bpf", seccomp_fd = 10 } },
    { "bridge", { workdir = W, command = "c", bridge = "netcat" } },
    { "bridge", { workdir = W, command = "c", bridge = true } },
    { "bridge_path", { workdir = W, command = "c", bridge = "builtin", bridge_path = "bin/bridge" } },
    { "docker_image", { workdir = W, command = "c", config = { mode = "docker", docker_image = "-v/:/h" } } },
  }

  for n, case in ipairs(cases) do
    local field, spec = case[1], case[2]
    it(("#%d %s"):format(n, field), function()
      local before = deep_copy(spec)
      for _, fn in ipairs({ "argv", "bwrap_argv", "docker_argv", "wrap", "dry_run" }) do
        local res, err = isolation[fn](spec)
        if fn == "argv" or fn == "wrap" or fn == "dry_run" then
          -- mode "" needs no workdir; every other refusal holds for every entry point
          if not (field == "workdir" and spec.workdir == nil and not (spec.config and spec.config.mode)) then
            assert.is_nil(res, fn)
            assert.matches("^isolation: ", err)
            assert.truthy(err:find(field, 1, true), fn .. ": " .. tostring(err))
          end
        elseif not (fn == "docker_argv" and field == "bridge_path") and not
          (fn == "docker_argv" and field:match("^proxy_socket") and spec.proxy_socket == nil) then
          assert.is_nil(res, fn)
          assert.truthy(err:find(field, 1, true), fn .. ": " .. tostring(err))
        end
      end
      assert.are.same(before, spec)
    end)
  end

  it("takes 128 binds and 128 ro_binds, and refuses a 129th", function()
    local b, r = {}, {}
    for k = 1, 128 do b[k], r[k] = "/srv/b" .. k, "$HOME/r" .. k end
    local argv = assert(isolation.bwrap_argv({ workdir = "/w", command = "c", binds = b, ro_binds = r,
      config = { mode = "bwrap", network = "deny" }, proxy_socket = "/p" }))
    assert.truthy(index_of(argv, "--bind", "/srv/b128", "/srv/b128"))
    assert.truthy(index_of(argv, "--ro-bind", "$HOME/r128", "$HOME/r128"))
    assert.truthy(isolation.wrap({ config = { mode = "docker" }, workdir = "/w", command = "c",
      binds = b, ro_binds = r }))
    b[129] = "/x"
    local res, err = isolation.bwrap_argv({ workdir = "/w", command = "c", binds = b })
    assert.is_nil(res)
    assert.matches("binds has 129 entries", err, 1, true)
  end)

  it("messages show the bad value, escaped", function()
    local _, err = isolation.bwrap_argv({ workdir = "rel\n\27[2J", command = "c" })
    assert.truthy(err:find('(got "rel\\n\\x1b[2J")', 1, true))
    assert.is_nil(err:find("\27", 1, true))
  end)

  it("raises when the spec is not a table", function()
    assert.has_error(function() isolation.bwrap_argv("spec") end)
    assert.has_error(function() isolation.wrap(nil) end)
  end)
end)

describe("dry_run", function()
  it("bwrap deny: mounts with host and sandbox paths, namespaces, route, environment, command", function()
    local text = assert(isolation.dry_run({
      config = { mode = "bwrap", network = "deny" }, agent = "claude", workdir = "/srv/p", command = "claude --resume",
      proxy_socket = "/var/lib/lectern/s1.sock", ca_cert = "/etc/lectern/ca.pem", ro_binds = { "/opt/ref" },
    }))
    assert.truthy(text:find("mode: bwrap, network deny", 1, true))
    assert.truthy(text:find("read-only  /usr -> /usr", 1, true))
    assert.truthy(text:find("tmpfs      (new) -> /tmp", 1, true))
    assert.truthy(text:find("tmpfs      (new) -> $HOME", 1, true))
    assert.truthy(text:find("read-write $HOME/.claude -> $HOME/.claude  (agent config, when present)", 1, true))
    assert.truthy(text:find("read-write /srv/p -> /srv/p", 1, true))
    assert.truthy(text:find("read-only  /opt/ref -> /opt/ref", 1, true))
    assert.truthy(text:find("read-only  /var/lib/lectern/s1.sock -> " .. SOCK, 1, true))
    assert.truthy(text:find("namespaces: new mount, pid, ipc, uts, net", 1, true))
    assert.truthy(text:find("network: deny: only 127.0.0.1:3128 (HTTP) and 127.0.0.1:1080 (SOCKS5) -> socat -> " .. SOCK
      .. " -> host /var/lib/lectern/s1.sock", 1, true))
    assert.truthy(text:find("HTTPS_PROXY", 1, true))
    assert.truthy(text:find("\n  NODE_USE_ENV_PROXY=1 ", 1, true), text)
    assert.truthy(text:find("SSL_CERT_FILE=/etc/lectern/ca.pem", 1, true))
    assert.truthy(text:find("command: bash -c \"claude --resume\"", 1, true))
  end)

  it("bwrap names the seccomp descriptor, or says there is none", function()
    local text = assert(isolation.dry_run({ config = { mode = "bwrap" }, workdir = "/srv/p", command = "c",
      seccomp_fd = 3 }))
    assert.truthy(text:find("\nseccomp: a program read from descriptor 3 (--seccomp 3; bwrap closes it)", 1, true),
      text)
    text = assert(isolation.dry_run({ config = { mode = "bwrap" }, workdir = "/srv/p", command = "c" }))
    assert.truthy(text:find("\nseccomp: none: a process in the sandbox can type into the terminal (TIOCSTI)", 1,
      true), text)
    text = assert(isolation.dry_run({ config = { mode = "docker" }, workdir = "/srv/p", command = "c",
      seccomp_fd = 3 }))
    assert.is_nil(text:find("seccomp", 1, true))
    text = assert(isolation.dry_run({ config = { mode = "docker" }, workdir = "/srv/p", command = "c",
      seccomp_file = "/etc/tty.bpf" }))
    assert.is_nil(text:find("seccomp", 1, true))
  end)

  it("bwrap names the seccomp file and the descriptor the wrap() line opens it on", function()
    local text = assert(isolation.dry_run({ config = { mode = "bwrap" }, workdir = "/srv/p", command = "c",
      seccomp_file = "/etc/isolation/tty.bpf" }))
    assert.truthy(text:find("\nseccomp: the program in /etc/isolation/tty.bpf, opened on descriptor 3 by the "
      .. "wrap() line (--seccomp 3; bwrap reads and closes it; a caller running argv() opens it there itself)",
      1, true), text)
    text = assert(isolation.dry_run({ config = { mode = "bwrap" }, workdir = "/srv/p", command = "c",
      seccomp_file = "/srv/a b\n.bpf", seccomp_fd = 7 }))
    assert.truthy(text:find('\nseccomp: the program in "/srv/a b\\n.bpf", opened on descriptor 7 by the '
      .. "wrap() line (--seccomp 7;", 1, true), text)
  end)

  it("docker and none say what they are", function()
    local text = assert(isolation.dry_run({ config = { mode = "docker", network = "none" }, agent = "codex",
      workdir = "/srv/p", command = "codex" }))
    assert.truthy(text:find("image: debian:bookworm-slim", 1, true))
    assert.truthy(text:find("read-write $HOME/.codex -> $HOME/.codex", 1, true))
    assert.truthy(text:find("--network none", 1, true))
    text = assert(isolation.dry_run({ command = "codex" }))
    assert.truthy(text:find("without isolation", 1, true))
  end)

  it("a path with a newline cannot forge a line", function()
    local text = assert(isolation.dry_run({ config = { mode = "bwrap" }, workdir = "/srv/a\n  read-write / -> /",
      command = "c" }))
    assert.is_nil(text:find("\n  read-write / -> /", 1, true))
    assert.truthy(text:find('"/srv/a\\n  read-write / -> /"', 1, true))
  end)
end)
