-- Real containers: the lines isolation.wrap builds for mode docker, run by
-- a real docker engine (a private dockerd started here when no daemon
-- answers: vfs storage, cgroupfs, no bridge, no iptables) on images made
-- from this machine's own files (docker import: nothing is pulled). Every
-- property is checked by trying it from inside the container.
local isolation = require("isolation")
local helpers = require("helpers")
local containers = require("support.containers")
local upstream = require("support.upstream")
local cli = require("support.cli")
local cjson = require("cjson")

local shq = helpers.shquote
local CURL = "curl -s -o /dev/null --max-time 15 "
local TOOLS = { "bash", "cat", "ls", "stat", "touch", "curl", "sleep", "socat" }

local function kv(out)
  local t = {}
  for k, v in out:gmatch("([%w_]+)=([^\n]*)") do t[k] = v end
  return t
end

-- Runs `line` (exec'd, so that the background pid is the engine's client)
-- behind `prefix`, sends it SIGTERM after 2 s; returns its status and the
-- seconds it took to end after the signal.
local function terminated(prefix, line)
  local code, out = helpers.run(prefix .. " sh -c " .. shq("exec " .. line) .. " </dev/null >/dev/null 2>&1 & p=$!; "
    .. "sleep 2; kill -TERM $p; t=$(date +%s); wait $p; s=$?; echo \"status=$s took=$(( $(date +%s) - t ))\"")
  assert(code == 0)
  return tonumber(out:match("status=(%d+)")), tonumber(out:match("took=(%d+)"))
end

-- The static bridge of the normal build (the sanitizer run's isolation.BRIDGE
-- is a dynamic ASan build, which no minimal image could run).
local function static_bridge()
  local code, out = helpers.run("realpath build/isolation-bridge")
  assert(code == 0, "no build/isolation-bridge: run make")
  return (out:gsub("%s+$", ""))
end

describe("docker, for real", function()
  local eng, why = containers.docker()
  if not eng then
    print("containers_spec: skipping the real docker specs: " .. why)
  end
  local skip = not eng
  local dir, up, proxy, sock, bridge, base

  -- Runs the wrap() line of spec_base + overrides with `script` as command,
  -- through `runner` (a prefix such as setpriv), with HOME set to `home`.
  local function launch(script, overrides, prefix, home)
    local spec = {}
    for k, v in pairs(base) do spec[k] = v end
    for k, v in pairs(overrides or {}) do spec[k] = v or nil end
    spec.command = script
    local line = assert(isolation.wrap(spec))
    return helpers.run((prefix or "") .. " env " .. eng.env .. " HOME=" .. shq(home or dir .. "/home")
      .. " timeout -k 5 120 sh -c " .. shq(line))
  end

  lazy_setup(function()
    if skip then return end
    dir = helpers.tmpdir()
    sock = dir .. "/run/proxy.sock"
    assert(os.execute("mkdir -m 0700 " .. shq(dir .. "/run") .. " && mkdir " .. shq(dir .. "/home")))
    containers.image(eng, "isolation-spec-tools", TOOLS)
    containers.empty_image(eng, "isolation-spec-empty")
    up = upstream.start()
    proxy = assert(isolation.proxy({ unix = sock, allow = { "127.0.0.1:" .. up.http_port } }))
    bridge = static_bridge()
    base = {
      config = { mode = "docker", network = "deny", docker_image = "isolation-spec-tools" },
      workdir = dir .. "/home/work",
      proxy_socket = sock,
      bridge_path = bridge,
      tty = false,
      protect = {},
    }
    assert(os.execute("mkdir " .. shq(base.workdir)))
  end)

  lazy_teardown(function()
    if skip then return end
    if proxy then proxy:close() end
    if up then up:stop() end
    eng:stop()
    if dir then helpers.rmtree(dir) end
  end)

  it("deny: an allowlisted upstream on the host's loopback through the proxy, and nothing else", function()
    if skip then return end
    local P = up.http_port
    local accepts = up:stats().http_accepts
    local script = table.concat({
      "(exec 3<>/dev/tcp/127.0.0.1/" .. P .. ") 2>/dev/null; echo devtcp=$?",
      CURL .. "--noproxy '*' http://127.0.0.1:" .. P .. "/small; echo direct=$?",
      CURL .. "-w 'forward=%{http_code}\\n' http://127.0.0.1:" .. P .. "/small",
      CURL .. "-w 'tunnel=%{http_code}\\n' --proxytunnel http://127.0.0.1:" .. P .. "/small",
      CURL .. "-w 'name=%{http_code}\\n' http://blocked.example.net/",
      CURL .. "-w 'name_tunnel=%{http_connect}\\n' https://blocked.example.net/",
      CURL .. "-w 'other_port=%{http_code}\\n' http://127.0.0.1:" .. (P == 65535 and 1 or P + 1) .. "/",
      "echo \"env=$HTTP_PROXY|$HTTPS_PROXY|$http_proxy|$https_proxy|${NO_PROXY-unset}|$NODE_USE_ENV_PROXY\"",
      "echo \"bridge_mode=$(stat -c %a /run/isolation/bridge)\"",
      "echo x >/run/isolation/bridge 2>/dev/null; echo bridge_write=$?",
    }, "\n")
    local code, out, err = launch(script)
    assert.are.equal(0, code, err)
    local r = kv(out)
    assert.are_not.equal("0", r.devtcp, out)
    assert.are_not.equal("0", r.direct, out)
    assert.are.equal("200", r.forward, out)
    assert.are.equal("200", r.tunnel, out)
    assert.are.equal("403", r.name, out)
    assert.are.equal("403", r.name_tunnel, out)
    assert.are.equal("403", r.other_port, out)
    assert.are.equal("http://127.0.0.1:3128|http://127.0.0.1:3128|http://127.0.0.1:3128|http://127.0.0.1:3128||1",
      r.env, out)
    -- the bridge is mounted read-only: the container cannot replace it
    assert.are_not.equal("0", r.bridge_write, out)
    -- exactly the two proxied requests reached the upstream
    assert.is_true(up:wait(function(s) return s.http_accepts >= accepts + 2 end, 5))
    assert.are.equal(accepts + 2, up:stats().http_accepts)
  end)

  it("isolate --mode docker (deny by default): the proxy, the allowlist, the command's status", function()
    if skip then return end
    local P = up.http_port
    helpers.write(dir .. "/c.json", cjson.encode({ mode = "docker", docker_image = "isolation-spec-tools" }))
    local code, out, err = cli.isolate({ "--config", dir .. "/c.json", "--workdir", base.workdir,
      "--allow-host", "127.0.0.1:" .. P, "--no-protect", "--", "bash", "-c",
      CURL .. "-w 'allowed=%{http_code}\\n' http://127.0.0.1:" .. P .. "/small; "
        .. CURL .. "-w 'refused=%{http_code}\\n' http://blocked.example.net/; "
        .. "(exec 3<>/dev/tcp/127.0.0.1/" .. P .. ") 2>/dev/null; echo devtcp=$?; exit 9" },
      { env = { eng.env, "HOME=" .. dir .. "/home" }, timeout = 120 })
    assert.equal(9, code, err)
    local r = kv(out)
    assert.equal("200", r.allowed, out .. err)
    assert.equal("403", r.refused, out .. err)
    assert.are_not.equal("0", r.devtcp, out)
  end)

  it("deny: the container cannot bind its own way out (no interface but loopback)", function()
    if skip then return end
    -- bash alone reads the table (the image has no cut or sed)
    local code, out, err = launch("{ read -r; read -r; while read -r l; do echo \"dev=${l%%:*}\"; done; }"
      .. " </proc/net/dev")
    assert.are.equal(0, code, err)
    local devs = {}
    for d in out:gmatch("dev=%s*(%S+)") do devs[#devs + 1] = d end
    assert.are.same({ "lo" }, devs, out)
  end)

  it("deny: a host listener on an abstract unix socket is out of reach (the container's own network namespace)",
    function()
      if skip then return end
      local name = "isolation-spec-abstract-" .. helpers.pid()
      local _, pid = helpers.run("socat ABSTRACT-LISTEN:" .. name .. ",fork SYSTEM:'echo reached'"
        .. " >/dev/null 2>&1 & echo $!")
      pid = tonumber(pid:match("%d+"))
      local ok, e = pcall(function()
        local got = ""
        for _ = 1, 50 do
          _, got = helpers.run("socat -T 2 - ABSTRACT-CONNECT:" .. name .. " </dev/null")
          if got:find("reached", 1, true) then break end
          helpers.run("sleep 0.1")
        end
        assert.truthy(got:find("reached", 1, true), "the host reaches its own abstract socket")
        local code, out, err = launch("socat -T 2 - ABSTRACT-CONNECT:" .. name .. " </dev/null; echo abstract=$?")
        assert.are.equal(0, code, err)
        assert.is_nil(out:find("reached", 1, true), out)
        assert.are_not.equal("0", kv(out).abstract, out)
      end)
      helpers.run("kill " .. pid)
      assert(ok, e)
    end)

  it("none: no route at all, not even the proxy; nothing mounted", function()
    if skip then return end
    local P = up.http_port
    local accepts = up:stats().http_accepts
    local script = table.concat({
      "(exec 3<>/dev/tcp/127.0.0.1/" .. P .. ") 2>/dev/null; echo devtcp=$?",
      CURL .. "http://127.0.0.1:" .. P .. "/small; echo via_env=$?",
      CURL .. "-x http://127.0.0.1:3128 http://127.0.0.1:" .. P .. "/small; echo via_port=$?",
      "ls /run/isolation >/dev/null 2>&1; echo mounted=$?",
      "echo \"env=${HTTP_PROXY-unset}\"",
    }, "\n")
    local code, out, err = launch(script, { config = { mode = "docker", network = "none",
      docker_image = "isolation-spec-tools" }, proxy_socket = false, bridge_path = false })
    assert.are.equal(0, code, err)
    local r = kv(out)
    assert.are_not.equal("0", r.devtcp, out)
    assert.are_not.equal("0", r.via_env, out)
    assert.are_not.equal("0", r.via_port, out)
    assert.are_not.equal("0", r.mounted, out)
    assert.are.equal("unset", r.env, out)
    assert.are.equal(accepts, up:stats().http_accepts)
  end)

  it("the workdir is written by, and owned by, the user who runs the line ($(id -u):$(id -g)); exit status", function()
    if skip then return end
    -- nobody runs the line: the engine's socket is handed to that uid alone
    local home = dir .. "/nobody"
    local work = home .. "/work"
    assert(os.execute("mkdir -p " .. shq(work) .. " && chown -R 65534:65534 " .. shq(home)
      .. " && chmod 0711 " .. shq(dir) .. " " .. shq(dir .. "/home")))
    local socket = eng.env:match("^DOCKER_HOST=unix://(.*)$")
    local restore
    if socket and eng.dir then
      assert(os.execute("chmod 0711 " .. shq(eng.dir) .. " && chown 65534 " .. shq(socket)))
      restore = "chown 0 " .. shq(socket) .. "; chmod 0700 " .. shq(eng.dir)
    end
    local ok, e = pcall(function()
      local code, out, err = launch("echo hello >written; touch -- -dash; stat -c 'inside=%u:%g' written; exit 7",
        { config = { mode = "docker", network = "none", docker_image = "isolation-spec-tools" },
          workdir = work, proxy_socket = false, bridge_path = false },
        "setpriv --reuid=65534 --regid=65534 --clear-groups", home)
      assert.are.equal(7, code, err)
      assert.are.equal("65534:65534", kv(out).inside, out)
      assert.are.equal("hello\n", helpers.read(work .. "/written"))
      local _, owner = helpers.run("stat -c %u:%g " .. shq(work .. "/written") .. " " .. shq(work .. "/-dash"))
      assert.are.equal("65534:65534\n65534:65534\n", owner)
    end)
    if restore then helpers.run(restore) end
    assert(ok, e)
  end)

  it("SIGTERM to the client ends the command (the engine's init forwards it: the command is not PID 1): 143",
    function()
      if skip then return end
      local spec = {}
      for k, v in pairs(base) do spec[k] = v end
      spec.command = "sleep 60"
      local line = assert(isolation.wrap(spec))
      local status, took = terminated("timeout -k 5 40 env " .. eng.env .. " HOME=" .. shq(dir .. "/home"), line)
      assert.are.equal(143, status)
      assert.is_true(took <= 10, "took " .. tostring(took))
    end)

  it("the built-in bridge starts in an image with no file at all (static: no loader, no libc)", function()
    if skip then return end
    local function start_in_empty(program)
      return helpers.run(eng:cmd("run --rm --network none --cap-drop ALL -v " .. shq(program)
        .. ":/run/isolation/bridge:ro -v " .. shq(sock) .. ":/run/isolation/proxy.sock isolation-spec-empty "
        .. "/run/isolation/bridge 3128 /run/isolation/proxy.sock"))
    end
    -- the parent exits 0 once its child listens
    local code, _, err = start_in_empty(bridge)
    assert.are.equal(0, code, err)
    -- a dynamic build of the same sources cannot start there: the image has
    -- no loader; this is what the static build is for
    local dyn = dir .. "/bridge-dynamic"
    assert.are.equal(0, (helpers.run("cc -std=c11 -D_GNU_SOURCE -O2 -Ibridge -o " .. shq(dyn) .. " bridge/*.c")))
    code = start_in_empty(dyn)
    assert.are_not.equal(0, code)
  end)

  it("deny needs the proxy socket, and refuses the socat bridge (the image may have none)", function()
    local ok, err = isolation.docker_argv({ config = { mode = "docker", network = "deny" }, workdir = "/srv/w",
      command = "true", bridge_path = "/opt/b" })
    assert.is_nil(ok)
    assert.matches("proxy_socket", err)
    ok, err = isolation.docker_argv({ config = { mode = "docker", network = "deny" }, workdir = "/srv/w",
      command = "true", bridge_path = "/opt/b", proxy_socket = "/r/p.sock", bridge = "socat" })
    assert.is_nil(ok)
    assert.matches('bridge must be "builtin"', err)
  end)
end)

describe("podman (rootless), for real", function()
  local pod, why = containers.podman()
  if not pod then
    print("containers_spec: skipping the real podman specs: " .. why)
  end
  local skip = not pod
  local up, proxy, base, work

  local function launch(script, overrides)
    local spec = {}
    for k, v in pairs(base) do spec[k] = v end
    for k, v in pairs(overrides or {}) do spec[k] = v or nil end
    spec.command = script
    local line = assert(isolation.wrap(spec))
    return helpers.run("cd " .. shq(pod.dir) .. " && " .. pod.prefix .. " env " .. pod.env
      .. " timeout -k 5 120 sh -c " .. shq(line))
  end

  lazy_setup(function()
    if skip then return end
    containers.image(pod, "isolation-spec-tools", TOOLS)
    up = upstream.start()
    local sock = pod.dir .. "/proxy/proxy.sock"
    assert(os.execute("mkdir -m 0700 " .. shq(pod.dir .. "/proxy") .. " " .. shq(pod.dir .. "/work")))
    proxy = assert(isolation.proxy({ unix = sock, allow = { "127.0.0.1:" .. up.http_port } }))
    -- the socket is the user's, as a session of that user would make it
    assert(os.execute("chown -R " .. pod.uid .. " " .. shq(pod.dir .. "/proxy") .. " " .. shq(pod.dir .. "/work")))
    work = pod.dir .. "/work"
    base = {
      config = { mode = "podman", network = "deny", docker_image = "isolation-spec-tools" },
      workdir = work, proxy_socket = sock, bridge_path = static_bridge(), tty = false, protect = {},
    }
  end)

  lazy_teardown(function()
    if skip then return end
    if proxy then proxy:close() end
    if up then up:stop() end
    pod:stop()
  end)

  it("deny: the allowlisted upstream through the proxy only; direct TCP fails; 403 for others", function()
    if skip then return end
    local P = up.http_port
    local accepts = up:stats().http_accepts
    local code, out, err = launch(table.concat({
      "(exec 3<>/dev/tcp/127.0.0.1/" .. P .. ") 2>/dev/null; echo devtcp=$?",
      CURL .. "-w 'forward=%{http_code}\\n' http://127.0.0.1:" .. P .. "/small",
      CURL .. "-w 'tunnel=%{http_code}\\n' --proxytunnel http://127.0.0.1:" .. P .. "/small",
      CURL .. "-w 'name=%{http_code}\\n' http://blocked.example.net/",
    }, "\n"))
    assert.are.equal(0, code, err)
    local r = kv(out)
    assert.are_not.equal("0", r.devtcp, out)
    assert.are.equal("200", r.forward, out .. err)
    assert.are.equal("200", r.tunnel, out)
    assert.are.equal("403", r.name, out)
    assert.is_true(up:wait(function(s) return s.http_accepts >= accepts + 2 end, 5))
    assert.are.equal(accepts + 2, up:stats().http_accepts)
  end)

  it("SIGTERM to podman ends the command (catatonit forwards it): 143", function()
    if skip then return end
    local spec = {}
    for k, v in pairs(base) do spec[k] = v end
    spec.command = "sleep 60"
    local line = assert(isolation.wrap(spec))
    local status, took = terminated("cd " .. shq(pod.dir) .. " && timeout -k 5 40 " .. pod.prefix .. " env "
      .. pod.env, line)
    assert.are.equal(143, status)
    assert.is_true(took <= 10, "took " .. tostring(took))
  end)

  it("none: nothing reachable; the workdir written as the user (--userns=keep-id); exit status", function()
    if skip then return end
    local P = up.http_port
    local code, out, err = launch("(exec 3<>/dev/tcp/127.0.0.1/" .. P .. ") 2>/dev/null; echo devtcp=$?; "
      .. "ls /run/isolation >/dev/null 2>&1; echo mounted=$?; echo hi >written; stat -c 'inside=%u:%g' written; exit 4",
      { config = { mode = "podman", network = "none", docker_image = "isolation-spec-tools" },
        proxy_socket = false, bridge_path = false })
    assert.are.equal(4, code, err)
    local r = kv(out)
    assert.are_not.equal("0", r.devtcp, out)
    assert.are_not.equal("0", r.mounted, out)
    local _, host = helpers.run("stat -c %u " .. shq(work .. "/written"))
    assert.are.equal(tostring(pod.uid) .. "\n", host)
    assert.are.equal(pod.uid, tonumber(r.inside:match("^(%d+)")), out)
  end)
end)
