-- Real containers: the lines isolation.wrap builds for mode docker, run by
-- a real docker engine (a private dockerd started here when no daemon
-- answers: vfs storage, cgroupfs, no bridge, no iptables) on images made
-- from this machine's own files (docker import: nothing is pulled). Every
-- property is checked by trying it from inside the container.
local uv = require("luv")
local isolation = require("isolation")
local helpers = require("helpers")
local containers = require("support.containers")
local upstream = require("support.upstream")
local cli = require("support.cli")
local cjson = require("cjson")

local shq = helpers.shquote
local CURL = "curl -s -o /dev/null --max-time 15 "
local TOOLS = { "bash", "cat", "ls", "stat", "touch", "chmod", "chown", "curl", "sleep", "socat" }

local kv = require("support.tables").kv

-- Runs `line` (exec'd, so that the background pid is the line's first
-- program: the reaper, which passes a signal on to the engine's client)
-- behind `prefix`; once the command has written `started` (a path in the
-- workdir) and `ps` (a command line listing the engine's running
-- containers) lists one that was not there before, both waited for up to
-- 30 s, sends that pid `sig`. Returns its status, the seconds it took to
-- end after the signal, the new containers' ids (a set) the engine still
-- ran once the client had ended, and what the line wrote to stderr (for
-- the failure message). Why wait for the engine too:
-- rootless podman forwards a signal only to a container its own state
-- records as running, and the command runs (and writes `started`) before
-- podman has saved that; a signal in between is not passed on, podman
-- ends itself (0 or 143) and the container runs on (README, Not promised).
local function signalled(prefix, line, started, sig, ps)
  os.remove(started)
  local _, before = helpers.run(ps)
  local known = started .. ".before"
  helpers.write(known, before)
  local new = ps .. " | grep -v -x -F -f " .. shq(known)
  local errfile = started .. ".stderr"
  local code, out = helpers.run(prefix .. " sh -c " .. shq("exec " .. line) .. " </dev/null >/dev/null 2>"
    .. shq(errfile) .. " & p=$!; "
    .. "i=0; while { [ ! -e " .. shq(started) .. " ] || [ -z \"$(" .. new .. ")\" ]; } && [ $i -lt 600 ] "
    .. "&& kill -0 $p 2>/dev/null; do sleep 0.05; i=$((i+1)); done; [ -e " .. shq(started) .. " ] && echo started; "
    .. "kill -" .. sig .. " $p; t=$(date +%s); wait $p; s=$?; echo \"status=$s took=$(( $(date +%s) - t ))\"; "
    .. "echo \"running=$(" .. new .. " | tr '\\n' ' ')\"")
  assert(code == 0)
  os.remove(started)
  os.remove(known)
  local stderr = helpers.read(errfile) or ""
  os.remove(errfile)
  assert(out:find("started\n", 1, true), "the command did not start: " .. out .. stderr)
  local ids = {}
  for id in (out:match("running=([^\n]*)") or ""):gmatch("%S+") do ids[id] = true end
  return tonumber(out:match("status=(%d+)")), tonumber(out:match("took=(%d+)")), ids, stderr
end

-- Polls `ps` (every container, ended ones too) until none of `ids` is
-- listed, up to 30 s; true when none is left.
local function containers_gone(ps, ids)
  return helpers.wait_for(function()
    local _, out = helpers.run(ps)
    for id in out:gmatch("%S+") do
      if ids[id] then return false end
    end
    return true
  end, 30)
end

-- The command of the SIGTERM cases: it says it runs, then is a sleep.
local STARTED = ".isolation-spec-started"
local SLEEP_STARTED = "echo up >" .. STARTED .. " && exec sleep 60"

-- The static bridge of the normal build (the sanitizer run's isolation.BRIDGE
-- is a dynamic ASan build, which no minimal image could run).
local function static_bridge()
  local code, out = helpers.run("realpath build/isolation-bridge")
  assert(code == 0, "no build/isolation-bridge: run make")
  return (out:gsub("%s+$", ""))
end

-- The deny specs run with each bridge a container can have: the relay
-- (builtin, the launch spec's default there) and pass (the starter hands
-- the container's two listeners to the proxy: isolate's and the session
-- manager's default).
local BRIDGES = { "builtin", "pass" }

-- The proxy's descriptors and connections back to where they were: no
-- listener, control connection or client of an ended container held.
local function proxy_back(proxy, fds)
  -- the engine's teardown (conmon, the keeper) takes seconds on a loaded machine
  local deadline = os.time() + 30
  repeat
    if proxy:stats().active == 0 and helpers.fd_count() == fds then return true end
    helpers.run("sleep 0.05")
  until os.time() > deadline
  return false, "the proxy has " .. proxy:stats().active .. " active connections and the process "
    .. helpers.fd_count() .. " descriptors (had " .. fds .. ")"
end

-- A script line printing each process of the container: its pid, comm,
-- state and parent, and its first two arguments (the rest of a shell's is
-- this very script); then the shell's pid.
local PROCS = "for f in /proc/[0-9]*; do read -r l <\"$f/stat\" 2>/dev/null || continue; "
  .. "mapfile -d '' a <\"$f/cmdline\" 2>/dev/null; echo \"proc=$l|${a[0]} ${a[1]}\"; done; echo \"self=$$\""

local function processes(out)
  local list = {}
  for pid, comm, state, ppid, argv in out:gmatch("proc=(%d+) %((.-)%) (%a) (%d+) [^|]*|([^\n]*)") do
    list[#list + 1] = { pid = tonumber(pid), comm = comm, state = state, ppid = tonumber(ppid), argv = argv }
  end
  return list, tonumber(out:match("self=(%d+)"))
end

-- The keeper of a pass container (the starter's child holding the
-- handover's connection): one, a child of the engine's init (PID 1), not
-- of the command; no zombie anywhere.
local function assert_keeper(out, bridge)
  local procs, self = processes(out)
  assert.is_true(#procs >= 3, out)
  local keepers, zombies, relays = 0, 0, 0
  for _, p in ipairs(procs) do
    if p.state == "Z" then zombies = zombies + 1 end
    if p.argv == "/run/isolation/bridge --pass" then
      keepers = keepers + 1
      assert.are.equal(1, p.ppid, out)
      assert.are_not.equal(self, p.ppid, out)
    elseif p.argv == "/run/isolation/bridge 3128,1080" then
      relays = relays + 1
    end
  end
  assert.are.equal(0, zombies, out)
  assert.are.equal(bridge == "pass" and 1 or 0, keepers, out)
  assert.are.equal(bridge == "pass" and 0 or 1, relays, out)
end

-- The SOCKS5 probes of a deny round (ALL_PROXY alone: no HTTP proxy
-- variable left): socks=200 for the allowlisted upstream on port P, and
-- socks_refused=97 (curl's CURLE_PROXY) for a blocked name.
local function socks_probes(P)
  return "(unset HTTP_PROXY http_proxy HTTPS_PROXY https_proxy; " .. CURL
    .. "-w 'socks=%{http_code}\\n' http://127.0.0.1:" .. P .. "/small)\n"
    .. "(unset HTTP_PROXY http_proxy HTTPS_PROXY https_proxy; " .. CURL .. "http://blocked.example.net/; "
    .. "echo socks_refused=$?)"
end

-- The end of a deny round: the keeper as the bridge has it, exactly the
-- three proxied requests at the upstream, and the proxy holding nothing of
-- the container any more.
local function assert_deny_ended(out, bridge, up, proxy, accepts, fds)
  assert_keeper(out, bridge)
  assert.is_true(up:wait(function(s) return s.http_accepts >= accepts + 3 end, 5))
  assert.are.equal(accepts + 3, up:stats().http_accepts)
  assert(proxy_back(proxy, fds))
end

-- Every descriptor of every process the container shows that names the
-- canary file the launching shell holds open without close-on-exec (a
-- launcher's log, a CI runner's pipe): "leak=PID:FD:TARGET" lines, then
-- "probed=N" (how many descriptors were looked at; the image has stat,
-- not readlink).
local FD_CANARY = "isolation-fd-canary"
local FD_PROBE = "n=0; for p in /proc/[0-9]*; do for f in \"$p\"/fd/*; do t=$(stat -c %N \"$f\" 2>/dev/null) "
  .. "|| continue; n=$((n+1)); case $t in *" .. FD_CANARY .. "*) echo \"leak=${p#/proc/}:${f##*/}:$t\";; esac; "
  .. "done; done; echo probed=$n"

-- The attacker's sender (spec/support/sendfd.c), static: the image has no
-- compiler and no python.
local function build_sendfd(dir)
  local path = dir .. "/tools/sendfd"
  assert(os.execute("mkdir -p " .. shq(dir .. "/tools")))
  local code, _, err = helpers.run("cc -std=c11 -O2 -static -o " .. shq(path) .. " spec/support/sendfd.c")
  assert(code == 0, err)
  return path
end

-- issue 27 item 6: the agent stops every other process it can see (a
-- timeout(1) in the container, the engine's init), ignores SIGTERM, and
-- would run 15 s
local STOP_ALL = "trap '' TERM; for p in /proc/[0-9]*; do p=${p#/proc/}; [ \"$p\" = \"$$\" ] || "
  .. "kill -STOP \"$p\" 2>/dev/null; done; echo stopped; sleep 15; echo survived"

-- issue 27 (a container ends with its session, --time or not): the agent
-- ignores SIGTERM, SIGINT and SIGHUP and leaves a sleeper with the same
-- traps; both carry the mark ($1) in their argv[0], so that pgrep on the
-- host finds them (a container's processes are the host's too).
local STUBBORN = "trap '' TERM INT HUP; (exec -a \"sleep-$1\" sleep 300) & echo up >" .. STARTED
  .. "; exec -a \"sleep-$1\" sleep 300"

local function new_mark()
  return "isolation-ctr-" .. helpers.pid() .. "-" .. uv.hrtime()
end

-- The container's two sleepers run (the ignoring traps are set).
local function sleepers(mark)
  local n = 0
  for _, pid in ipairs(cli.pgrep("sleep-" .. mark)) do
    if (helpers.read("/proc/" .. pid .. "/cmdline") or ""):sub(1, #mark + 6) == "sleep-" .. mark then n = n + 1 end
  end
  return n
end

-- The docker or podman client among the processes that carry the mark.
local function client_of(mark, engine)
  for _, pid in ipairs(cli.pgrep(mark)) do
    if (helpers.read("/proc/" .. pid .. "/comm") or ""):match("^[^\n]*") == engine then return pid end
  end
end

-- Containers `ps` lists now that `before` (its earlier output) did not.
local function new_containers(ps, before)
  local _, now = helpers.run(ps)
  local left = {}
  for id in now:gmatch("%S+") do
    if not before:find(id, 1, true) then left[#left + 1] = id end
  end
  return left
end

-- Starts isolate (argv after the program: opts.prefix, e.g. setpriv, in
-- front; opts.detached: isolate in a process group of its own), waits
-- until the stubborn command's two sleepers run, does `act(p)`, and waits
-- for isolate's end. Returns its status, the seconds from act to the end,
-- and what still carried the mark right then.
local function stubborn_isolate(args, mark, opts, act)
  local argv = {}
  for _, a in ipairs(opts.prefix or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = cli.ISOLATE
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  for _, a in ipairs({ "--", "bash", "-c", STUBBORN, "stubborn", mark }) do argv[#argv + 1] = a end
  local p = cli.spawn(argv, { env = opts.env, cwd = opts.cwd, detached = opts.detached })
  local up = cli.wait_for(function() return sleepers(mark) == 2 or p.status ~= nil end, 90)
  if not (up and p.status == nil) then
    p.kill("sigkill")
    local _, out, err = p.wait(10)
    error("the command did not start: " .. tostring(out) .. tostring(err))
  end
  local t0 = uv.hrtime()
  act(p)
  local status, out, err = p.wait(60)
  return status, (uv.hrtime() - t0) / 1e9, cli.pgrep(mark), out .. err
end

-- stubborn_isolate under a fresh mark (act(p, mark)), and then the
-- containers `ps` lists that it did not list before.
local function stubborn_engine(ps, args, opts, act)
  local _, before = helpers.run(ps)
  local mark = new_mark()
  local status, took, left, text = stubborn_isolate(args, mark, opts, function(p) act(p, mark) end)
  return status, took, left, text, new_containers(ps, before)
end

-- The watchdog (bridge/reap.c, --container): the container is the
-- engine daemon's, not below the reaper, so a SIGKILL to the line's reaper
-- (an orchestrator's kill -9, the OOM killer) or to isolate's whole
-- process group skipped its removal, and the container ran on (before:
-- until its command ended by itself). `how` is "reaper" or "group". Runs
-- the stubborn command through isolate in a process group of its own, and
-- checks that within 15 s no process carries the mark (the watchdog's
-- argv, the reaper's, carries it too) and `ps` lists no new container.
local function reaper_killed(how, ps, args, mark, opts)
  local _, before = helpers.run(ps)
  opts.detached = true
  local t0
  local _, _, _, text = stubborn_isolate(args, mark, opts, function(p)
    t0 = uv.hrtime()
    if how == "reaper" then
      assert(uv.kill(assert(cli.reaper_of(mark), "no reaper"), "sigkill"))
    else
      assert(uv.kill(-p.pid, "sigkill"))
    end
  end)
  local gone = helpers.wait_for(function() return #cli.pgrep(mark) == 0 and #new_containers(ps, before) == 0 end, 15)
  local left = new_containers(ps, before)
  assert.is_true(gone, ("after %.1f s: %d processes carry the mark, containers left: %s\n%s"):format(
    (uv.hrtime() - t0) / 1e9, #cli.pgrep(mark), table.concat(left, " "), text))
  return (uv.hrtime() - t0) / 1e9
end

describe("docker, for real", function()
  -- The daemon starts in lazy_setup: only when a case of this block runs
  -- (a filtered run that skips them all starts none, and leaves none).
  local eng, skip
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
    local why
    eng, why = containers.docker()
    skip = not eng
    if skip then
      print("containers_spec: skipping the real docker specs: " .. why)
      return
    end
    dir = helpers.tmpdir()
    sock = dir .. "/run/proxy.sock"
    assert(os.execute("mkdir -m 0700 " .. shq(dir .. "/run") .. " && mkdir " .. shq(dir .. "/home")))
    containers.image(eng, "isolation-spec-tools", TOOLS)
    containers.empty_image(eng, "isolation-spec-empty")
    up = upstream.start()
    -- one proxy for every container of this suite, one after another (a
    -- proxy that holds all its accept_listeners is sealed: the sealed
    -- case has a proxy of its own, with 2 as isolate's and the session
    -- manager's)
    proxy = assert(isolation.proxy({ unix = sock, allow = { "127.0.0.1:" .. up.http_port }, accept_listeners = 64 }))
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

  for _, b in ipairs(BRIDGES) do
    it("deny, bridge " .. b .. ": an allowlisted upstream on the host's loopback through the proxy (HTTP and SOCKS5), "
      .. "and nothing else; the proxy holds nothing of the container afterwards", function()
      if skip then return end
      local P = up.http_port
      local accepts = up:stats().http_accepts
      local fds = helpers.fd_count()
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
        socks_probes(P),
        PROCS,
        "exit 5",
      }, "\n")
      local code, out, err = launch(script, { bridge = b })
      assert.are.equal(5, code, err)
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
      assert.are.equal("200", r.socks, out)
      -- curl's own exit for a SOCKS refusal (CURLE_PROXY)
      assert.are.equal("97", r.socks_refused, out)
      -- the container is gone (--rm), and with it the keeper: the proxy
      -- closed its listeners and their control connection
      assert_deny_ended(out, b, up, proxy, accepts, fds)
      local _, running = helpers.run(eng:cmd("ps -aq"))
      assert.are.equal("", running)
    end)
  end

  for _, case in ipairs({ { "pass", {} }, { "builtin", { "--bridge", "builtin" } } }) do
    local b, opts = case[1], case[2]
    it("isolate --mode docker (deny by default) " .. (#opts > 0 and table.concat(opts, " ") or "(bridge pass by "
      .. "default)") .. ": the proxy, the allowlist, the command's status", function()
      if skip then return end
      local P = up.http_port
      helpers.write(dir .. "/c.json", cjson.encode({ mode = "docker", docker_image = "isolation-spec-tools" }))
      local args = { "--config", dir .. "/c.json", "--workdir", base.workdir, "--allow-host", "127.0.0.1:" .. P,
        "--no-protect" }
      table.move(opts, 1, #opts, #args + 1, args)
      table.move({ "--", "bash", "-c",
        CURL .. "-w 'allowed=%{http_code}\\n' http://127.0.0.1:" .. P .. "/small; "
          .. CURL .. "-w 'refused=%{http_code}\\n' http://blocked.example.net/; "
          .. "(unset HTTP_PROXY http_proxy HTTPS_PROXY https_proxy; " .. CURL
          .. "-w 'socks=%{http_code}\\n' http://127.0.0.1:" .. P .. "/small); "
          .. "(exec 3<>/dev/tcp/127.0.0.1/" .. P .. ") 2>/dev/null; echo devtcp=$?; " .. PROCS .. "; exit 9" },
        1, 5, #args + 1, args)
      local code, out, err = cli.isolate(args, { env = { eng.env, "HOME=" .. dir .. "/home" }, timeout = 120 })
      assert.equal(9, code, err)
      local r = kv(out)
      assert.equal("200", r.allowed, out .. err)
      assert.equal("403", r.refused, out .. err)
      assert.equal("200", r.socks, out .. err)
      assert.are_not.equal("0", r.devtcp, out)
      -- the bridge that ran: the keeper of pass, or the relay
      assert_keeper(out, b)
    end)
  end

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

  it("deny: the container cannot chmod, chown or touch the host's proxy socket (bound read-only); the route "
    .. "still works", function()
    if skip then return end
    local before = assert(uv.fs_stat(sock))
    local P = up.http_port
    local code, out, err = launch("S=/run/isolation/proxy.sock; for c in 'chmod 0777' 'chmod 0' 'chown 12345' "
      .. "touch; do if $c $S 2>/dev/null; then echo \"went: $c\"; else echo \"refused: $c\"; fi; done; "
      .. "curl -s -o /dev/null -w 'code=%{http_code}\\n' http://127.0.0.1:" .. P .. "/small")
    assert.are.equal(0, code, err)
    assert.is_nil(out:find("went:", 1, true), out)
    assert.are.equal(4, select(2, out:gsub("refused:", "")), out)
    assert.matches("code=200", out, 1, true)
    local after = assert(uv.fs_stat(sock))
    assert.are.same({ before.mode, before.uid, before.gid, before.mtime.sec, before.mtime.nsec },
      { after.mode, after.uid, after.gid, after.mtime.sec, after.mtime.nsec })
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

  it("deny, bridge pass: a descriptor the launching shell holds without close-on-exec is in no process of the "
    .. "container (docker hands none of its client's on)", function()
    if skip then return end
    local canary = dir .. "/" .. FD_CANARY
    helpers.write(canary, "secret\n")
    local code, out, err = launch(FD_PROBE, { bridge = "pass" },
      "exec 7<" .. shq(canary) .. " 8>>" .. shq(canary) .. ";")
    assert.are.equal(0, code, err)
    assert.falsy(out:find("leak=", 1, true), out)
    assert.is_true(tonumber(out:match("probed=(%d+)")) >= 3, out)
  end)

  it("time = 3: a command that SIGSTOPs every other process it sees (the engine's init) and ignores SIGTERM "
    .. "ends by 3 s + the grace with 124 (the reaper's timer on the host; the engine removes the container), and "
    .. "no container is left", function()
    if skip then return end
    local _, before = helpers.run(eng:cmd("ps -aq"))
    local t0 = uv.hrtime()
    local code, out, err = launch(STOP_ALL,
      { config = { mode = "docker", network = "none", docker_image = "isolation-spec-tools" },
        proxy_socket = false, limits = { time = 3 } })
    local secs = (uv.hrtime() - t0) / 1e9
    assert.are.equal(124, code, err)
    assert.truthy(out:find("stopped", 1, true), out)
    assert.falsy(out:find("survived", 1, true), out)
    assert.truthy(secs >= 2.9 and secs < 3 + 5 + 15, "ended after " .. secs .. " s")
    local _, after = helpers.run(eng:cmd("ps -aq"))
    for id in after:gmatch("%S+") do
      assert.truthy(before:find(id, 1, true), "a container outlived the line: " .. id)
    end
  end)

  -- issue 27: without --time the line has the reaper too (--container):
  -- isolate's end, a stopped session and a killed client all remove the
  -- container through the engine. Before, isolate passed SIGTERM to the
  -- client, the container ignored it, and isolate waited for ever (killed
  -- by the spec's deadline, the container ran on); a killed client left
  -- the container running.
  for _, sig in ipairs({ "sigterm", "sigint", "sighup" }) do
    it("isolate --mode docker, no --time: " .. sig:upper() .. " to isolate; the command ignores it and leaves a "
      .. "sleeper: isolate returns within the grace (5 s) and nothing of the container runs", function()
      if skip then return end
      helpers.write(dir .. "/c.json", cjson.encode({ mode = "docker", docker_image = "isolation-spec-tools" }))
      local status, took, left, text, made = stubborn_engine(eng:cmd("ps -aq"), { "--config", dir .. "/c.json",
        "--network", "none", "--workdir", base.workdir, "--no-protect" },
        { env = { eng.env, "HOME=" .. dir .. "/home" }, cwd = base.workdir }, function(p) p.kill(sig) end)
      assert.are.same({}, left, "a process of the session outlived isolate\n" .. text)
      assert.are_not.equal(0, status, text)
      assert.is_true(took >= 4 and took < 25, ("isolate took %.1f s after the signal\n%s"):format(took, text))
      assert.are.same({}, made)
    end)
  end

  it("isolate --mode docker, no --time: the docker client killed (SIGKILL, nothing passed on): isolate returns, "
    .. "the engine removed the container, nothing of it runs", function()
    if skip then return end
    helpers.write(dir .. "/c.json", cjson.encode({ mode = "docker", docker_image = "isolation-spec-tools" }))
    local status, took, left, text, made = stubborn_engine(eng:cmd("ps -aq"), { "--config", dir .. "/c.json",
      "--network", "none", "--workdir", base.workdir, "--no-protect" },
      { env = { eng.env, "HOME=" .. dir .. "/home" }, cwd = base.workdir }, function(_, mark)
        assert(uv.kill(assert(client_of(mark, "docker"), "no docker client"), "sigkill"))
      end)
    assert.are.same({}, left, "a process of the session outlived isolate\n" .. text)
    assert.are.equal(137, status, text)
    assert.is_true(took < 25, ("isolate took %.1f s after the kill"):format(took))
    assert.are.same({}, made)
  end)

  for _, how in ipairs({ "reaper", "group" }) do
    it("isolate --mode docker: " .. (how == "reaper" and "the line's reaper SIGKILLed" or "kill -9 of isolate's whole "
      .. "process group") .. ": its watchdog has the engine remove the container, nothing of it runs within 15 s "
      .. "(before: the container ran on)", function()
      if skip then return end
      helpers.write(dir .. "/c.json", cjson.encode({ mode = "docker", docker_image = "isolation-spec-tools" }))
      reaper_killed(how, eng:cmd("ps -aq"), { "--config", dir .. "/c.json", "--network", "none",
        "--workdir", base.workdir, "--no-protect" }, new_mark(),
        { env = { eng.env, "HOME=" .. dir .. "/home" }, cwd = base.workdir })
    end)
  end

  -- A session manager (default launcher, extra options in mgr_opts) whose
  -- docker lines reach this suite's engine, running the stubborn command
  -- with a new mark as session "s"; calls check(mgr, mark, ps, before)
  -- once its two sleepers run, then closes the manager, puts DOCKER_HOST
  -- back and removes what is left.
  local function with_stubborn_session(mgr_opts, check)
    local session = require("isolation.session")
    local ps = eng:cmd("ps -aq")
    local _, before = helpers.run(ps)
    -- the manager's child inherits this process's environment: the engine
    local host = assert(eng.env:match("^DOCKER_HOST=(.*)$")):gsub("^'(.*)'$", "%1")
    local saved = os.getenv("DOCKER_HOST")
    assert(uv.os_setenv("DOCKER_HOST", host))
    local root = helpers.tmpdir()
    mgr_opts.runtime_dir = root .. "/run"
    local mgr = assert(session.manager(mgr_opts))
    local mark = new_mark()
    local ok, e = pcall(function()
      assert(mgr:launch({ id = "s", isolation = { mode = "docker", network = "none",
        docker_image = "isolation-spec-tools" }, workdir = base.workdir, tty = false, protect = {},
        command = "bash -c " .. shq(STUBBORN) .. " stubborn " .. mark }))
      assert.is_true(cli.wait_for(function() return sleepers(mark) == 2 end, 90), "the command did not start")
      check(mgr, mark, ps, before)
    end)
    mgr:close()
    if saved then uv.os_setenv("DOCKER_HOST", saved) else uv.os_unsetenv("DOCKER_HOST") end
    for _, id in ipairs(new_containers(ps, before)) do helpers.run(eng:cmd("rm -f " .. id)) end
    helpers.rmtree(root)
    assert(ok, e)
  end

  for _, how in ipairs({ "kill", "close" }) do
    it("the session manager's default launcher, docker, no time: mgr:" .. how .. "() with a command that ignores "
      .. "SIGTERM and leaves a sleeper: it returns once the container is gone, within the grace", function()
      if skip then return end
      with_stubborn_session({}, function(mgr, mark, ps, before)
        local t0 = uv.hrtime()
        if how == "kill" then assert(mgr:kill("s")) else mgr:close() end
        local took = (uv.hrtime() - t0) / 1e9
        assert.are.same({}, cli.pgrep(mark), "a process of the session outlived mgr:" .. how .. "()")
        assert.are.equal("ended", mgr:get("s").state)
        assert.is_true(took >= 4 and took < 25, ("mgr:%s() took %.1f s"):format(how, took))
        assert.are.same({}, new_containers(ps, before))
      end)
    end)
  end

  -- The line's own reaper runs below the manager's (a child subreaper
  -- too). Killed from outside, its watchdog becomes the manager's
  -- reaper's child; that reaper ends what it inherits once the line's
  -- shell has ended, and before, it SIGKILLed the watchdog in the middle
  -- of the removal: the container ran on. A watchdog of this program's
  -- own (same executable, its name) is now given its bounded time.
  it("the session manager's default launcher, docker: the line's reaper SIGKILLed from outside: the manager's "
    .. "reaper lets the line's watchdog remove the container before the session ends; nothing of it runs (before: "
    .. "the container ran on)", function()
    if skip then return end
    local ended = false
    -- the line's shell reports its killed child on stderr: not in the spec's output
    local null = assert(uv.fs_open("/dev/null", "w", 0))
    local ok, e = pcall(with_stubborn_session, { loop = uv, poll_interval = 0.05, stdio = { 0, 1, null },
      on_end = function() ended = true end }, function(_, mark, ps, before)
      -- the line's reaper (grace 5 s), not the manager's (5 + 30 s)
      assert(uv.kill(assert(cli.reaper_of(mark, 5), "no line reaper"), "sigkill"))
      local t0 = uv.hrtime()
      assert.is_true(cli.wait_for(function() return ended end, 60), "the session did not end")
      local took = (uv.hrtime() - t0) / 1e9
      assert.are.same({}, new_containers(ps, before), "the container outlived its session")
      assert.are.same({}, cli.pgrep(mark), "a process of the session outlived it")
      assert.is_true(took < 25, ("the session took %.1f s to end"):format(took))
    end)
    uv.fs_close(null)
    assert(ok, e)
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

  for _, b in ipairs(BRIDGES) do
    it("bridge " .. b .. ": SIGTERM to the line (its reaper passes it to the client) ends the command (the "
      .. "engine's init forwards it: the command "
      .. "is not PID 1): 143; the container and the keeper end with it", function()
      if skip then return end
      local fds = helpers.fd_count()
      local spec = {}
      for k, v in pairs(base) do spec[k] = v end
      spec.command = SLEEP_STARTED
      spec.bridge = b
      local line = assert(isolation.wrap(spec))
      local status, took, _, stderr = signalled("timeout -k 5 40 env " .. eng.env .. " HOME=" .. shq(dir .. "/home"),
        line, base.workdir .. "/" .. STARTED, "TERM", eng:cmd("ps -q"))
      assert.are.equal(143, status, stderr)
      assert.is_true(took <= 10, "took " .. tostring(took))
      assert(proxy_back(proxy, fds))
      local _, running = helpers.run(eng:cmd("ps -aq"))
      assert.are.equal("", running)
    end)
  end

  -- The descriptor checks come after the bound: a proxy with room for two
  -- more listeners than the starter's (4) checks each descriptor.
  it("bridge pass, attacked from inside (a proxy with 2 free slots): a connected socket, a file and a listener on "
    .. "0.0.0.0 refused, closed unharmed, an error event each; the starter's listeners still served", function()
    if skip then return end
    local tools = build_sendfd(dir)
    local roomy_sock = dir .. "/run/roomy.sock"
    local roomy = assert(isolation.proxy({ unix = roomy_sock, allow = { "127.0.0.1:" .. up.http_port },
      accept_listeners = 4 }))
    local ok, e = pcall(function()
      local fds = helpers.fd_count()
      local send = tools .. " /run/isolation/proxy.sock "
      local code, out, err = launch(table.concat({
        send .. "connected", send .. "file", send .. "any_address",
        CURL .. "-w 'after=%{http_code}\\n' http://127.0.0.1:" .. up.http_port .. "/small",
      }, "\n"), { bridge = "pass", proxy_socket = roomy_sock, ro_binds = { dir .. "/tools" } })
      assert.are.equal(0, code, err)
      local r = kv(out)
      assert.are.equal("no descriptor 1 of 1 is not listening", r.connected_reply, out)
      assert.are.equal("no descriptor 1 of 1 is not a socket", r.file_reply, out)
      assert.are.equal("no descriptor 1 of 1 is not bound to a loopback address", r.any_address_reply, out)
      -- nothing written to the file, nothing sent on the connected
      -- socket, nobody serving on the refused listener
      assert.are.equal("secret", r.file, out)
      assert.are.equal("<nothing>", r.peer, out)
      assert.are.equal("0", r.any_address_reached, out)
      assert.are.equal("200", r.after, out)
      local bad = 0
      for _, ev in ipairs(roomy:events()) do
        if ev.type == "error" and ev.code == "bad_handover" then bad = bad + 1 end
      end
      assert.are.equal(3, bad)
      assert.are.equal(3, roomy:stats().errors)
      assert(proxy_back(roomy, fds))
    end)
    roomy:close()
    assert(ok, e)
  end)

  -- A proxy as isolate and the session manager make it: accept_listeners
  -- 2, both filled by the starter, sealed before the container's code runs.
  local function with_sealed_proxy(body)
    local sealed_sock = dir .. "/run/sealed.sock"
    local sealed = assert(isolation.proxy({ unix = sealed_sock, allow = { "127.0.0.1:" .. up.http_port },
      accept_listeners = 2 }))
    local ok, e = pcall(body, sealed, sealed_sock)
    sealed:close()
    assert(ok, e)
  end

  it("bridge pass, attacked from inside (accept_listeners 2, both the starter's): the kernel refuses a third "
    .. "loopback listener (the proxy is sealed), nothing serves it; the starter's listeners still do", function()
    if skip then return end
    local tools = build_sendfd(dir)
    with_sealed_proxy(function(sealed, sealed_sock)
      local fds = helpers.fd_count()
      local code, out, err = launch(table.concat({
        tools .. " /run/isolation/proxy.sock loopback",
        tools .. " /run/isolation/proxy.sock connected",
        CURL .. "-w 'after=%{http_code}\\n' http://127.0.0.1:" .. up.http_port .. "/small",
      }, "\n"), { bridge = "pass", proxy_socket = sealed_sock, ro_binds = { dir .. "/tools" } })
      assert.are.equal(0, code, err)
      local r = kv(out)
      assert.are.equal("<Operation not permitted>", r.loopback_reply, out)
      assert.are.equal("<Operation not permitted>", r.connected_reply, out)
      assert.are.equal("200", r.after, out)
      assert.are.equal(0, sealed:stats().errors)
      assert(proxy_back(sealed, fds))
    end)
  end)

  it("bridge pass, attacked from inside: killing the keeper ends the container's route (the proxy closes the "
    .. "listeners) and frees no slot: a listener of the container's own is refused by the kernel",
    function()
      if skip then return end
      local tools = build_sendfd(dir)
      with_sealed_proxy(function(sealed, sealed_sock)
        local fds = helpers.fd_count()
        local accepts = up:stats().http_accepts
        local code, out, err = launch(table.concat({
          "for f in /proc/[0-9]*; do mapfile -d '' a <\"$f/cmdline\" 2>/dev/null; "
            .. "[ \"${a[0]} ${a[1]}\" = '/run/isolation/bridge --pass' ] && kill -9 \"${f#/proc/}\" "
            .. "&& echo killed=1; done",
          "sleep 0.5",
          CURL .. "http://127.0.0.1:" .. up.http_port .. "/small; echo lost=$?",
          tools .. " /run/isolation/proxy.sock loopback",
        }, "\n"), { bridge = "pass", proxy_socket = sealed_sock, ro_binds = { dir .. "/tools" } })
        assert.are.equal(0, code, err)
        local r = kv(out)
        assert.are.equal("1", r.killed, out)
        -- curl: could not connect (nothing listens on 3128 any more)
        assert.are.equal("7", r.lost, out)
        -- sealed: the container's own listener never reaches the proxy
        assert.are.equal("<Operation not permitted>", r.loopback_reply, out)
        assert.are.equal(accepts, up:stats().http_accepts)
        assert(proxy_back(sealed, fds))
      end)
    end)

  -- The keeper, not the reaper: the line has none (reap = false, as for
  -- another host), so killing the client leaves the container running, and
  -- only the keeper can end it. (With the reaper, its watchdog would remove
  -- the container, which proves nothing about the keeper.)
  it("bridge pass: the line without its reaper (reap = false), its client killed (SIGKILL: nothing is passed on, "
    .. "nothing removed), the container runs on; closing its proxy"
    .. " ends it: the keeper kills every process of it, and the container is gone", function()
    if skip then return end
    finally(function() helpers.run(eng:cmd("ps -aq | xargs -r ") .. eng:cmd("rm -f >/dev/null 2>&1")) end)
    with_sealed_proxy(function(sealed, sealed_sock)
      local spec = {}
      for k, v in pairs(base) do spec[k] = v end
      spec.command, spec.bridge, spec.proxy_socket = SLEEP_STARTED, "pass", sealed_sock
      spec.reap = false
      local _, _, running = signalled("env " .. eng.env .. " HOME=" .. shq(dir .. "/home"),
        assert(isolation.wrap(spec)), base.workdir .. "/" .. STARTED, "KILL", eng:cmd("ps -q"))
      assert.is_not_nil(next(running), "the container ended with its client: nothing to prove")
      sealed:close()
      assert.is_true(containers_gone(eng:cmd("ps -aq"), running), "the container ran on after its proxy closed")
    end)
  end)

  it("the session manager: a docker deny session launches with bridge pass (its proxy takes the container's "
    .. "listeners), reaches only its allowlist, and its end leaves nothing held", function()
    if skip then return end
    local session = require("isolation.session")
    local glue = require("support.glue")
    local policy = require("isolation.policy")
    local root = helpers.tmpdir()
    local work = dir .. "/home/session-work"
    assert(os.execute("mkdir -p " .. shq(work)))
    local cmdline
    local mgr = assert(session.manager({
      runtime_dir = root .. "/run",
      launcher = function(line)
        cmdline = line
        return glue.start("env " .. eng.env .. " HOME=" .. shq(dir .. "/home") .. " sh -c " .. shq(line),
          root .. "/launch.log")
      end,
      alive = function(h) return glue.alive(h) end,
      stop = function(h) glue.stop(h) end,
    }))
    local ok, e = pcall(function()
      local fds = helpers.fd_count()
      local project = { id = "p" }
      assert(policy.patch_project(project, { isolation = { mode = "docker", network = "deny",
        docker_image = "isolation-spec-tools", allow_hosts = { "127.0.0.1:" .. up.http_port } } }))
      local P = up.http_port
      local s = assert(mgr:launch({ id = "d1", project = project, workdir = work, tty = false, bridge_path = bridge,
        command = CURL .. "-w '%{http_code}' http://127.0.0.1:" .. P .. "/small >out.allowed; "
          .. CURL .. "-w '%{http_code}' http://blocked.example.net/ >out.refused; "
          .. "(unset HTTP_PROXY http_proxy HTTPS_PROXY https_proxy; " .. CURL .. "-w '%{http_code}' "
          .. "http://127.0.0.1:" .. P .. "/small >out.socks); "
          .. "(exec 3<>/dev/tcp/127.0.0.1/" .. P .. ") 2>/dev/null; echo $? >out.direct; echo done >out" }))
      -- pass where the bridge program is built (a sanitizer run without
      -- its bridge has no isolation.BRIDGE: the relay then)
      assert.are.equal(isolation.BRIDGE ~= nil, cmdline:find("--pass 3128,1080 /run/isolation/proxy.sock", 1, true)
        ~= nil, cmdline)
      assert.is_true(glue.wait(function() return helpers.read(work .. "/out") ~= nil end, 60),
        "the session's command did not finish: " .. tostring(helpers.read(root .. "/launch.log")))
      assert.are.equal("200", helpers.read(work .. "/out.allowed"))
      assert.are.equal("403", helpers.read(work .. "/out.refused"))
      assert.are.equal("200", helpers.read(work .. "/out.socks"))
      assert.are_not.equal("0\n", helpers.read(work .. "/out.direct"))
      -- the container has ended: its proxy holds no connection (nor listener)
      assert.is_true(glue.wait(function() return s.proxy:stats().active == 0 end, 10),
        "active: " .. s.proxy:stats().active)
      assert.is_true(glue.wait(function() mgr:poll() return s.state == "ended" end, 20))
      assert.is_nil(s.proxy)
      assert.is_true(glue.wait(function() return helpers.fd_count() == fds end, 5),
        "descriptors: " .. helpers.fd_count() .. ", had " .. fds)
    end)
    mgr:close()
    helpers.rmtree(root)
    assert(ok, e)
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

  it("deny with bridge pass: the deny script execs the starter, which execs the command; dry_run says pass", function()
    local spec = { config = { mode = "docker", network = "deny", docker_image = "img" }, workdir = "/srv/w",
      command = "true", bridge_path = "/opt/b", proxy_socket = "/r/p.sock", bridge = "pass", tty = false }
    for _, mode in ipairs({ "docker", "podman" }) do
      spec.config.mode = mode
      local argv = assert(isolation.docker_argv(spec))
      assert.are.same({ "bash", "true", "/run/isolation/bridge" }, table.move(argv, #argv - 2, #argv, 1, {}))
      local script = argv[#argv - 3]
      local tail = '; exec "$2" --pass 3128,1080 /run/isolation/proxy.sock bash -c -- "$1"'
      assert.are.equal(tail, script:sub(-#tail))
      assert.matches("-> pass (the listener handed to the proxy) -> /run/isolation/proxy.sock",
        assert(isolation.dry_run(spec)), 1, true)
    end
  end)

  it("deny needs the proxy socket, and refuses the socat bridge (the image may have none)", function()
    local ok, err = isolation.docker_argv({ config = { mode = "docker", network = "deny" }, workdir = "/srv/w",
      command = "true", bridge_path = "/opt/b" })
    assert.is_nil(ok)
    assert.matches("proxy_socket", err)
    ok, err = isolation.docker_argv({ config = { mode = "docker", network = "deny" }, workdir = "/srv/w",
      command = "true", bridge_path = "/opt/b", proxy_socket = "/r/p.sock", bridge = "socat" })
    assert.is_nil(ok)
    assert.matches('bridge must be "builtin" or "pass"', err, 1, true)
  end)
end)

describe("podman (rootless), for real", function()
  -- Started in lazy_setup, as docker above.
  local pod, skip
  local up, proxy, base, work

  local function launch(script, overrides, pre)
    local spec = {}
    for k, v in pairs(base) do spec[k] = v end
    for k, v in pairs(overrides or {}) do spec[k] = v or nil end
    spec.command = script
    local line = assert(isolation.wrap(spec))
    return helpers.run((pre or "") .. "cd " .. shq(pod.dir) .. " && " .. pod.prefix .. " env " .. pod.env
      .. " timeout -k 5 120 sh -c " .. shq(line))
  end

  lazy_setup(function()
    local why
    pod, why = containers.podman()
    skip = not pod
    if skip then
      print("containers_spec: skipping the real podman specs: " .. why)
      return
    end
    containers.image(pod, "isolation-spec-tools", TOOLS)
    up = upstream.start()
    local sock = pod.dir .. "/proxy/proxy.sock"
    assert(os.execute("mkdir -m 0700 " .. shq(pod.dir .. "/proxy") .. " " .. shq(pod.dir .. "/work")))
    proxy = assert(isolation.proxy({ unix = sock, allow = { "127.0.0.1:" .. up.http_port }, accept_listeners = 64 }))
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

  for _, b in ipairs(BRIDGES) do
    it("deny, bridge " .. b .. ": the allowlisted upstream through the proxy only (HTTP and SOCKS5); direct TCP "
      .. "fails; 403 for others; the keeper a child of catatonit; the proxy holds nothing afterwards", function()
      if skip then return end
      local P = up.http_port
      local accepts = up:stats().http_accepts
      local fds = helpers.fd_count()
      local code, out, err = launch(table.concat({
        "(exec 3<>/dev/tcp/127.0.0.1/" .. P .. ") 2>/dev/null; echo devtcp=$?",
        CURL .. "-w 'forward=%{http_code}\\n' http://127.0.0.1:" .. P .. "/small",
        CURL .. "-w 'tunnel=%{http_code}\\n' --proxytunnel http://127.0.0.1:" .. P .. "/small",
        CURL .. "-w 'name=%{http_code}\\n' http://blocked.example.net/",
        socks_probes(P),
        PROCS,
        "exit 6",
      }, "\n"), { bridge = b })
      assert.are.equal(6, code, err)
      local r = kv(out)
      assert.are_not.equal("0", r.devtcp, out)
      assert.are.equal("200", r.forward, out .. err)
      assert.are.equal("200", r.tunnel, out)
      assert.are.equal("403", r.name, out)
      assert.are.equal("200", r.socks, out)
      assert.are.equal("97", r.socks_refused, out)
      assert_deny_ended(out, b, up, proxy, accepts, fds)
    end)

    it("bridge " .. b .. ": SIGTERM to the line (the reaper, to podman) ends the command (catatonit forwards "
      .. "it): 143; the keeper ends "
      .. "with it", function()
      if skip then return end
      local fds = helpers.fd_count()
      local spec = {}
      for k, v in pairs(base) do spec[k] = v end
      spec.command = SLEEP_STARTED
      spec.bridge = b
      local line = assert(isolation.wrap(spec))
      local status, took, _, stderr = signalled("cd " .. shq(pod.dir) .. " && timeout -k 5 40 " .. pod.prefix
        .. " env " .. pod.env, line, work .. "/" .. STARTED, "TERM",
        "cd " .. shq(pod.dir) .. " && " .. pod:cmd("ps -q"))
      assert.are.equal(143, status, stderr)
      assert.is_true(took <= 10, "took " .. tostring(took))
      assert(proxy_back(proxy, fds))
    end)
  end

  -- The keeper, not the reaper: as under docker above, a line without one.
  it("bridge pass: the line without its reaper (reap = false), podman killed (SIGKILL), the container runs on; "
    .. "closing its proxy ends it: the keeper kills"
    .. " every process of it, and the container is gone", function()
    if skip then return end
    local ps = "cd " .. shq(pod.dir) .. " && " .. pod:cmd("ps -aq")
    finally(function() helpers.run(ps .. " | xargs -r " .. pod:cmd("rm -f >/dev/null 2>&1")) end)
    local own_sock = pod.dir .. "/proxy/own.sock"
    local own = assert(isolation.proxy({ unix = own_sock, allow = { "127.0.0.1:" .. up.http_port },
      accept_listeners = 2 }))
    local ok, e = pcall(function()
      assert(os.execute("chown " .. pod.uid .. " " .. shq(own_sock)))
      local spec = {}
      for k, v in pairs(base) do spec[k] = v end
      spec.command, spec.bridge, spec.proxy_socket = SLEEP_STARTED, "pass", own_sock
      spec.reap = false
      local _, _, running = signalled("cd " .. shq(pod.dir) .. " && " .. pod.prefix .. " env " .. pod.env,
        assert(isolation.wrap(spec)), work .. "/" .. STARTED, "KILL",
        "cd " .. shq(pod.dir) .. " && " .. pod:cmd("ps -q"))
      assert.is_not_nil(next(running), "the container ended with podman: nothing to prove")
      own:close()
      assert.is_true(containers_gone(ps, running), "the container ran on after its proxy closed")
    end)
    own:close()
    assert(ok, e)
  end)

  it("deny, bridge pass: a descriptor the launching shell holds without close-on-exec is in no process of the "
    .. "container (podman's --preserve-fds is 0)", function()
    if skip then return end
    local canary = pod.dir .. "/" .. FD_CANARY
    helpers.write(canary, "secret\n")
    local code, out, err = launch(FD_PROBE, { bridge = "pass" }, "exec 7<" .. shq(canary) .. " 8>>" .. shq(canary)
      .. "; ")
    assert.are.equal(0, code, err)
    assert.falsy(out:find("leak=", 1, true), out)
    assert.is_true(tonumber(out:match("probed=(%d+)")) >= 3, out)
  end)

  it("time = 3: a command that SIGSTOPs every other process it sees (catatonit) and ignores SIGTERM ends by "
    .. "3 s + the grace with 124, and no container is left", function()
    if skip then return end
    local ps = "cd " .. shq(pod.dir) .. " && " .. pod:cmd("ps -aq")
    local _, before = helpers.run(ps)
    local t0 = uv.hrtime()
    local code, out, err = launch(STOP_ALL,
      { config = { mode = "podman", network = "none", docker_image = "isolation-spec-tools" },
        proxy_socket = false, limits = { time = 3 } })
    local secs = (uv.hrtime() - t0) / 1e9
    assert.are.equal(124, code, err)
    assert.truthy(out:find("stopped", 1, true), out)
    assert.falsy(out:find("survived", 1, true), out)
    assert.truthy(secs >= 2.9 and secs < 3 + 5 + 15, "ended after " .. secs .. " s")
    local _, after = helpers.run(ps)
    for id in after:gmatch("%S+") do
      assert.truthy(before:find(id, 1, true), "a container outlived the line: " .. id)
    end
  end)

  -- the user's podman containers, all of them, one id a line
  local function pod_ps() return "cd " .. shq(pod.dir) .. " && " .. pod:cmd("ps -aq") end

  -- isolate as the podman user (nobody when the specs run as root), as a
  -- user runs it: the same environment as pod:cmd, unquoted
  local function as_user()
    local env = {}
    for name, value in pod.env:gmatch("([%w_]+)='([^']*)'") do env[#env + 1] = name .. "=" .. value end
    local prefix = pod.as_root and { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } or {}
    helpers.write(pod.dir .. "/c.json", cjson.encode({ mode = "podman", docker_image = "isolation-spec-tools" }))
    assert(os.execute("chmod 0644 " .. shq(pod.dir .. "/c.json")))
    return { env = env, prefix = prefix, cwd = work },
      { "--config", pod.dir .. "/c.json", "--network", "none", "--workdir", work, "--no-protect" }
  end

  it("isolate --mode podman, no --time: SIGTERM to isolate; the command ignores it and leaves a sleeper: isolate "
    .. "returns within the grace and nothing of the container runs", function()
    if skip then return end
    local opts, args = as_user()
    local status, took, left, text, made = stubborn_engine(pod_ps(), args, opts, function(p) p.kill("sigterm") end)
    assert.are.same({}, left, "a process of the session outlived isolate\n" .. text)
    assert.are_not.equal(0, status, text)
    assert.is_true(took >= 4 and took < 30, ("isolate took %.1f s after the signal\n%s"):format(took, text))
    assert.are.same({}, made)
  end)

  it("isolate --mode podman, no --time: podman killed (SIGKILL): isolate returns, the container is removed, "
    .. "nothing of it runs", function()
    if skip then return end
    local opts, args = as_user()
    local status, took, left, text, made = stubborn_engine(pod_ps(), args, opts, function(_, mark)
      assert(uv.kill(assert(client_of(mark, "podman"), "no podman client"), "sigkill"))
    end)
    assert.are.same({}, left, "a process of the session outlived isolate\n" .. text)
    assert.are.equal(137, status, text)
    assert.is_true(took < 30, ("isolate took %.1f s after the kill"):format(took))
    assert.are.same({}, made)
  end)

  for _, how in ipairs({ "reaper", "group" }) do
    it("isolate --mode podman as its user: " .. (how == "reaper" and "the line's reaper SIGKILLed" or "kill -9 of "
      .. "isolate's whole process group") .. ": its watchdog has podman remove the container, nothing of it runs "
      .. "within 15 s (before: the container ran on)", function()
      if skip then return end
      local opts, args = as_user()
      reaper_killed(how, pod_ps(), args, new_mark(), opts)
    end)
  end

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
