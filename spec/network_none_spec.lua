-- Network "none", docker/podman deny through the bridge, and mode "podman":
-- the config, the argv builders, validate_for_target, the badge, dry_run
-- and isolate's options; a real bwrap sandbox for none.
local isolation = require("isolation")
local helpers = require("helpers")
local policy = require("isolation.policy")
local cli = require("support.cli")
local cjson = require("cjson")

local shq = helpers.shquote

local function index_of(argv, a, b)
  for i = 1, #argv - 1 do
    if argv[i] == a and (b == nil or argv[i + 1] == b) then return i end
  end
end

local function has(argv, x)
  for _, v in ipairs(argv) do if v == x then return true end end
  return false
end

describe("config: network none and mode podman", function()
  it("accepts none with every isolating mode, keeps no allowlist, and podman's image", function()
    for _, mode in ipairs({ "bwrap", "docker", "podman" }) do
      local cfg = assert(isolation.config({ mode = mode, network = "none", allow_hosts = { "example.com" } }))
      assert.equal("none", cfg.network)
      assert.is_nil(cfg.allow_hosts)
    end
    assert.same({ mode = "podman", network = "allow", docker_image = "debian:bookworm-slim" },
      assert(isolation.config({ mode = "podman" })))
    assert.same({ mode = "podman", network = "deny", docker_image = "ghcr.io/example/a:1", allow_hosts = {} },
      assert(isolation.config({ mode = "podman", network = "deny", docker_image = "ghcr.io/example/a:1" })))
  end)

  it("refuses none with mode \"\" (nothing could enforce it), naming both", function()
    local ok, err = isolation.config({ network = "none" })
    assert.is_nil(ok)
    assert.equal('isolation: network "none" needs mode "bwrap", "docker" or "podman" (got mode "", which cannot '
      .. "enforce it)", err)
  end)
end)

describe("network none", function()
  it("bwrap: --unshare-net, no socket, no bridge, the command itself", function()
    local argv = assert(isolation.bwrap_argv({ config = { mode = "bwrap", network = "none" }, workdir = "/srv/w",
      command = "make", proxy_socket = "/srv/p.sock", bridge = "builtin", bridge_path = "/opt/b" }))
    assert.truthy(has(argv, "--unshare-net"))
    assert.same({ "bash", "-c", "--", "make" }, { table.unpack(argv, #argv - 3) })
    local all = table.concat(argv, "\n")
    assert.is_nil(all:find("proxy.sock", 1, true), all)
    assert.is_nil(all:find("/opt/b", 1, true), all)
    assert.is_nil(all:find("HTTP_PROXY", 1, true), all)
  end)

  it("docker: --network none and nothing mounted, even with a proxy_socket given", function()
    local argv = assert(isolation.docker_argv({ config = { mode = "docker", network = "none" }, workdir = "/srv/w",
      command = "make", proxy_socket = "/srv/p.sock", tty = false }))
    assert.truthy(index_of(argv, "--network", "none"))
    assert.same({ "debian:bookworm-slim", "bash", "-c", "--", "make" }, { table.unpack(argv, #argv - 4) })
    assert.is_nil(table.concat(argv, "\n"):find("/run/isolation", 1, true))
  end)

  it("dry_run says no route at all", function()
    local text = assert(isolation.dry_run({ config = { mode = "bwrap", network = "none" }, workdir = "/srv/w",
      command = "c" }))
    assert.truthy(text:find("mode: bwrap, network none", 1, true), text)
    assert.truthy(text:find("network: none: an empty network namespace", 1, true), text)
    text = assert(isolation.dry_run({ config = { mode = "podman", network = "none" }, workdir = "/srv/w",
      command = "c" }))
    assert.truthy(text:find("mode: podman, network none", 1, true), text)
    assert.truthy(text:find("no route at all, not even the model API", 1, true), text)
  end)

  it("a real bwrap sandbox with network none reaches neither a host listener nor a proxy", function()
    if helpers.skip_without_bwrap() then return end
    local dir = helpers.tmpdir()
    local ok, e = pcall(function()
      assert(os.execute("mkdir " .. shq(dir .. "/w")))
      -- a listener on the host's loopback, reachable from the host itself
      local port = 20000 + math.tointeger(require("luv").os_getpid()) % 20000
      local _, pid = helpers.run("socat TCP-LISTEN:" .. port .. ",bind=127.0.0.1,reuseaddr,fork SYSTEM:'echo hi'"
        .. " >/dev/null 2>&1 & echo $!")
      pid = tonumber(pid:match("%d+"))
      local fine, why = pcall(function()
        local code = 1
        for _ = 1, 50 do
          code = helpers.run("bash -c " .. shq("exec 3<>/dev/tcp/127.0.0.1/" .. port))
          if code == 0 then break end
          helpers.run("sleep 0.1")
        end
        assert.equal(0, code, "the host reaches its own listener")
        local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "none" }, workdir = dir .. "/w",
          command = "(exec 3<>/dev/tcp/127.0.0.1/" .. port .. ") 2>/dev/null; echo devtcp=$?; "
            .. "ls /run/isolation 2>/dev/null; echo run=$?; echo env=${HTTP_PROXY-unset}; exit 3" }))
        local status, out, err = helpers.run("HOME=" .. shq(dir) .. " timeout 60 sh -c " .. shq(line))
        assert.equal(3, status, err)
        assert.truthy(out:find("devtcp=1", 1, true), out)
        assert.truthy(out:find("env=unset", 1, true), out)
        assert.is_nil(out:find("run=0", 1, true), out)
      end)
      helpers.run("kill " .. pid)
      assert(fine, why)
    end)
    helpers.rmtree(dir)
    assert(ok, e)
  end)
end)

describe("docker and podman deny: the proxy socket and the built-in bridge", function()
  local spec = { config = { mode = "docker", network = "deny" }, workdir = "/srv/w", command = "run it",
    proxy_socket = "/srv/run/p.sock", bridge_path = "/opt/isolation/isolation-bridge", tty = false }

  it("docker: --network none, the socket and the bridge (read-only) at fixed paths, the deny script", function()
    local argv = assert(isolation.docker_argv(spec))
    assert.truthy(index_of(argv, "--network", "none"))
    assert.truthy(index_of(argv, "-v", "/srv/run/p.sock:" .. isolation.SANDBOX_PROXY_SOCKET .. ":ro"))
    assert.truthy(index_of(argv, "-v", "/opt/isolation/isolation-bridge:/run/isolation/bridge:ro"))
    local n = #argv
    -- bash -c -- SCRIPT bash COMMAND BRIDGE: the command is never parsed as script text
    assert.same({ "debian:bookworm-slim", "bash", "-c", "--" }, { table.unpack(argv, n - 7, n - 4) })
    assert.same({ "bash", "run it", "/run/isolation/bridge" }, { table.unpack(argv, n - 2) })
    local script = argv[n - 3]
    -- the HTTP port and the SOCKS5 port (socks_port, default 1080)
    assert.truthy(script:find('"$2" 3128,1080 /run/isolation/proxy.sock', 1, true), script)
    assert.truthy(script:find("HTTPS_PROXY=http://127.0.0.1:3128", 1, true), script)
    assert.truthy(script:find(" ALL_PROXY=socks5h://127.0.0.1:1080 all_proxy=socks5h://127.0.0.1:1080 ", 1, true),
      script)
    assert.truthy(script:find("NODE_USE_ENV_PROXY=1", 1, true), script)
    assert.truthy(script:find('exec bash -c -- "$1"', 1, true), script)
  end)

  it("dry_run names the socket, the bridge and the only route", function()
    local text = assert(isolation.dry_run(spec))
    assert.truthy(text:find("mode: docker, network deny", 1, true), text)
    assert.truthy(text:find("read-only  /srv/run/p.sock -> /run/isolation/proxy.sock", 1, true), text)
    assert.truthy(text:find("read-only  /opt/isolation/isolation-bridge -> /run/isolation/bridge", 1, true), text)
    assert.truthy(text:find("network: deny: --network none (the container's loopback only); only 127.0.0.1:3128 "
      .. "(HTTP) and 127.0.0.1:1080 (SOCKS5) -> built-in bridge -> /run/isolation/proxy.sock -> host /srv/run/p.sock",
      1, true), text)
    assert.truthy(text:find("HTTPS_PROXY", 1, true), text)
    assert.truthy(text:find("\n  ALL_PROXY, all_proxy=socks5h://127.0.0.1:1080 (non-HTTP TCP)\n", 1, true), text)
  end)

  it("defaults the bridge to isolation.BRIDGE, and takes proxy_port and socks_port", function()
    if not isolation.BRIDGE then return end
    local s = {}
    for k, v in pairs(spec) do s[k] = v end
    s.bridge_path, s.proxy_port, s.socks_port = nil, 8080, 9050
    local argv = assert(isolation.docker_argv(s))
    assert.truthy(index_of(argv, "-v", isolation.BRIDGE .. ":/run/isolation/bridge:ro"))
    assert.truthy(argv[#argv - 3]:find('"$2" 8080,9050 ', 1, true))
    assert.truthy(argv[#argv - 3]:find(" ALL_PROXY=socks5h://127.0.0.1:9050 ", 1, true))
  end)

  it("without isolation.BRIDGE or bridge_path, deny says the built-in bridge is needed", function()
    local s = {}
    for k, v in pairs(spec) do s[k] = v end
    s.bridge_path = nil
    local module = package.loaded.isolation
    local saved = module.BRIDGE
    module.BRIDGE = nil
    local ok, err = isolation.docker_argv(s)
    module.BRIDGE = saved
    assert.is_nil(ok)
    assert.equal('isolation: network "deny" under docker or podman needs the built-in bridge: isolation.BRIDGE is '
      .. "not set (the bridge program was not built); give bridge_path (got nil)", err)
  end)

  it("refuses what docker -v would split, and the socat bridge, naming the field", function()
    for field, value in pairs({ proxy_socket = "/srv/a:b/p.sock", bridge_path = "/opt/a:b" }) do
      local s = {}
      for k, v in pairs(spec) do s[k] = v end
      s[field] = value
      local ok, err = isolation.docker_argv(s)
      assert.is_nil(ok)
      assert.matches("^isolation: " .. field .. " must not contain ':'", err)
    end
    local s = {}
    for k, v in pairs(spec) do s[k] = v end
    s.bridge = "socat"
    local ok, err = isolation.wrap(s)
    assert.is_nil(ok)
    assert.matches('bridge must be "builtin"', err)
  end)

  it("podman: the same line with podman and --userns=keep-id instead of --user", function()
    local s = {}
    for k, v in pairs(spec) do s[k] = v end
    s.config = { mode = "podman", network = "deny" }
    local p = assert(isolation.argv(s))
    local d = assert(isolation.docker_argv(s))
    -- argv(): behind the reaper, which removes the container at the end
    assert.same({ s.bridge_path, "--reap", "5", "--container", "--" }, table.move(p, 1, 5, 1, {}))
    p = table.move(p, 6, #p, 1, {})
    assert.equal("podman", p[1])
    assert.equal("docker", d[1]) -- docker_argv is docker's, whatever the config's mode
    assert.truthy(has(p, "--userns=keep-id"))
    assert.is_nil(index_of(p, "--user"))
    -- everything else is docker's line
    local i = index_of(d, "--user")
    table.remove(d, i + 1)
    d[i] = "--userns=keep-id"
    d[1] = "podman"
    assert.same(d, p)
    local line = assert(isolation.wrap(s))
    assert.is_nil(line:find("id -u", 1, true))
  end)
end)

describe("validate_for_target: the table with none and podman", function()
  local T = { "local", "ssh", "pct", "sandbox" }
  local want = {
    ["bwrap allow"] = { true, true, false, false },
    ["bwrap deny"] = { true, false, false, false },
    ["bwrap none"] = { true, true, false, false },
    ["docker allow"] = { true, true, true, false },
    ["docker deny"] = { true, false, false, false },
    ["docker none"] = { true, true, true, false },
    ["podman allow"] = { true, true, true, false },
    ["podman deny"] = { true, false, false, false },
    ["podman none"] = { true, true, true, false },
  }
  for row, cells in pairs(want) do
    it(row, function()
      local mode, network = row:match("(%S+) (%S+)")
      for i, target in ipairs(T) do
        local ok, err = isolation.validate_for_target({ mode = mode, network = network }, target)
        if cells[i] then
          assert.is_true(ok, target .. ": " .. tostring(err))
        else
          assert.is_nil(ok, target)
          assert.matches("^isolation: ", err)
        end
      end
    end)
  end
end)

describe("badge", function()
  it("names podman, and says deny or no network", function()
    assert.equal("🔒 podman", policy.badge({ mode = "podman" }))
    assert.equal("🔒 podman · deny", policy.badge({ mode = "podman", network = "deny" }))
    assert.equal("🔒 bwrap · no network", policy.badge({ mode = "bwrap", network = "none" }))
    assert.equal("🔒 docker · no network", policy.badge({ mode = "docker", network = "none" }))
  end)
end)

describe("isolate --network none and --mode podman", function()
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  it("--network none: no proxy, --unshare-net", function()
    local code, out, err = cli.isolate({ "--dry-run", "--json", "--network", "none", "--workdir", dir, "--", "true" })
    assert.equal(0, code, err)
    local argv = cjson.decode(out)
    assert.truthy(has(argv, "--unshare-net"))
    assert.is_nil(out:find("proxy.sock", 1, true))
  end)

  it("--mode podman: podman run --userns=keep-id, with the proxy for deny", function()
    local code, out, err = cli.isolate({ "--dry-run", "--json", "--mode", "podman", "--workdir", dir, "--", "true" })
    assert.equal(0, code, err)
    local argv = cjson.decode(out)
    assert.same({ "--reap", "5", "--container", "--", "podman", "run" }, table.move(argv, 2, 7, 1, {}))
    assert.truthy(has(argv, "--userns=keep-id"))
    assert.truthy(out:find(":/run/isolation/proxy.sock", 1, true), out)
  end)

  it("--mode none --network none is a usage error", function()
    local code, _, err = cli.isolate({ "--mode", "none", "--network", "none", "--", "true" })
    assert.equal(2, code)
    assert.matches("mode none cannot enforce network none", err)
  end)

  it("--network none runs: the command's status, and no route", function()
    if helpers.skip_without_bwrap() then return end
    local code, out, err = cli.isolate({ "--network", "none", "--workdir", dir, "--", "bash", "-c",
      "(exec 3<>/dev/tcp/127.0.0.1/9) 2>/dev/null; echo devtcp=$?; echo env=${HTTP_PROXY-unset}; exit 5" })
    assert.equal(5, code, err)
    assert.truthy(out:find("devtcp=1", 1, true), out)
    assert.truthy(out:find("env=unset", 1, true), out)
  end)
end)
