-- Sessions that cannot hurt each other: one agent flooding its own session
-- proxy (descriptors, memory, loop time) while a second session's agent
-- keeps working. Each run is a child orchestrator (spec/support/
-- flood_orchestrator.lua) holding proxies A and B on the module's one
-- background loop, its RLIMIT_NOFILE lowered for it alone; the agent is a
-- process of its own (spec/support/flood_client.lua).
local uv = require("luv")
local helpers = require("helpers")
local netns = require("support.dns_netns")
local session = require("isolation.session")

local shq = helpers.shquote

-- Runs the orchestrator (env: FLOOD_* settings, see the orchestrator);
-- returns its "key value" lines as a table.
local function orchestrate(mode, count, maxconn, nofile, env)
  local dir = helpers.tmpdir()
  local vars = ""
  for k, v in pairs(env or {}) do vars = vars .. k .. "=" .. shq(tostring(v)) .. " " end
  -- The sanitizer run's preload must reach the child that loads the module.
  local cmd = vars .. "LUA_PATH=" .. shq("lua/?.lua;spec/?.lua;;") .. " LUA_CPATH="
    .. shq((os.getenv("ISOLATION_CPATH") or "build/?.so") .. ";;")
    .. " timeout 60 lua5.4 spec/support/flood_orchestrator.lua " .. shq(dir) .. " " .. mode .. " " .. count
    .. " " .. maxconn .. (nofile and (" " .. nofile) or "") .. " 2>&1"
  local pipe = io.popen(cmd)
  local r, text = {}, pipe:read("a")
  pipe:close()
  helpers.rmtree(dir)
  for k, v in text:gmatch("([%w_]+) ([^\n]*)\n") do r[k] = tonumber(v) or v end
  r.text = text
  return r
end

describe("session isolation", function()
  it("descriptor flood: A holds 1,100 silent connections against a quota of 256 under ulimit -n 1024;"
    .. " B's CONNECT+echo all succeed, A's extra get 503 too_many, io.open and a new proxy still work", function()
    local r = orchestrate("fds", 1100, 256, 1024)
    print(("\n  descriptor flood (nofile %s): A open %s, refused %s; B %s/30 ok, p50 %s ms, max %s ms"):format(
      r.nofile, r.a_open, r.a_refused, r.b_ok, r.b_p50_ms, r.b_max_ms))
    assert.equal(1024, r.nofile, r.text)
    assert.equal(30, r.b_ok, r.text)
    assert.equal(0, r.b_events_error, r.text)
    assert.equal(1100 - 256, r.a_refused, r.text)
    assert.equal(1100 - 256, r.a_too_many_events, r.text)
    assert.equal("ok", r.io_open, r.text)
    assert.equal("ok", r.new_proxy, r.text)
  end)

  it("descriptor flood: a proxy with a large max_connections still takes at most half the process's"
    .. " descriptors (B, io.open and a new proxy unharmed)", function()
    local r = orchestrate("fds", 1100, 16384, 1024)
    print(("\n  descriptor flood, max_connections 16384: A held %d, refused %s; B %s/30 ok"):format(
      (r.a_open or 0) - (r.a_refused or 0), r.a_refused, r.b_ok))
    assert.equal(30, r.b_ok, r.text)
    assert.equal("ok", r.io_open, r.text)
    assert.equal("ok", r.new_proxy, r.text)
    -- (1024 - the reserve of 128) / 2 descriptors for A
    assert.is_true(r.a_refused >= 1100 - 448, r.text)
    assert.equal(r.a_refused, r.a_too_many_events, r.text)
  end)

  it("the process out of descriptors (the orchestrator's own files): B's client fails without the loop"
    .. " spinning, and B works again once files are closed", function()
    local r = orchestrate("emfile", 0, 256, 1024)
    print(("\n  out of descriptors: B %s, %s s of CPU in %s s, then B %s"):format(
      r.emfile_exchange, r.emfile_cpu_s, r.emfile_wall_s, r.emfile_after))
    assert.equal("failed", r.emfile_exchange, r.text)
    assert.is_true(r.emfile_cpu_s < 0.5, r.text)
    assert.equal("ok", r.emfile_after, r.text)
  end)

  it("memory flood: 4,000 unfinished 32,700-byte heads stay within A's head budget, and RSS comes back"
    .. " after they close", function()
    local r = orchestrate("memory", 4000, 5000)
    local grew, left = r.rss_flood - r.rss_start, r.rss_after - r.rss_start
    print(("\n  memory flood: RSS %d KiB at start, %d KiB during, %d KiB after; A refused %d"):format(
      r.rss_start, r.rss_flood, r.rss_after, r.a_refused))
    assert.equal(30, r.b_ok, r.text)
    -- Without the budget: about 136,000 KiB more, and it stayed. (The
    -- sanitizer's allocator keeps freed memory in quarantine.)
    if not os.getenv("ISOLATION_SANITIZER") then
      assert.is_true(grew < 40000, r.text)
      assert.is_true(left < 10000, r.text)
    end
    assert.is_true(r.a_refused > 3000, r.text)
    assert.equal(r.a_refused, r.a_too_many_events, r.text)
  end)

  it("loop time: B's CONNECT+echo while A runs 512 bulk tunnels (measured; generous bound)", function()
    local r = orchestrate("bulk", 512, 2048)
    print(("\n  512 bulk tunnels on A (%s MB/s): B quiet p50 %s ms; under load p50 %s ms, max %s ms"):format(
      r.a_mb_per_s, r.quiet_p50_ms, r.b_p50_ms, r.b_max_ms))
    assert.equal(30, r.b_ok, r.text)
    -- One loop for both, before the byte budget: max 227-425 ms; with it,
    -- 6-50 ms; B on a loop thread of its own: 0.3-7 ms. The bound is
    -- generous: the machine is shared.
    assert.is_true(r.b_max_ms < 200, r.text)
  end)

  it("slow DNS: A's agent asks for 8 new names a second whose name server never answers; all of B's"
    .. " CONNECT+echo succeed, to a name in /etc/hosts and to one the name server answers (issue 26)", function()
    -- In a network namespace of the spec's (support/dns_netns.sh): the
    -- orchestrator runs the name server (support/dns_stub.lua) on loopback.
    local why = netns.unavailable()
    if why then
      pending(why)
      return
    end
    local dir = helpers.tmpdir()
    local r = netns.run({ "spec/support/flood_orchestrator.lua", dir, "slowdns", "8", "256" },
      { FLOOD_B_N = 40, FLOOD_HOLD_S = 8 }, 60)
    helpers.rmtree(dir)
    print(("\n  slow DNS on A: B %s/40 ok, quiet p50 %s ms, under load p50 %s ms (%.1fx), max %s ms;"
      .. " queries left unanswered %s"):format(r.b_ok, r.quiet_p50_ms, r.b_p50_ms,
      (tonumber(r.b_p50_ms) or 0) / (tonumber(r.quiet_p50_ms) or 1), r.b_max_ms, r.dns_ignored))
    -- A's lookups did reach the name that never answers (4 threads, A
    -- and AAAA each)
    assert.is_true((tonumber(r.dns_ignored) or 0) >= 8, r.text)
    -- before: 22 of 40 (each lookup of B, /etc/hosts names too, waited
    -- behind A's on libuv's pool: 504 dns_timeout)
    assert.equal(40, r.quiet_ok, r.text)
    assert.equal(40, r.b_ok, r.text)
    assert.equal(0, r.b_events_error, r.text)
  end)

  it("loop time: B's CONNECT+echo while A runs 1,024 connections of pipelined GETs (measured)", function()
    local r = orchestrate("pipe", 1024, 2048)
    print(("\n  1,024 pipelined-GET connections on A: B p50 %s ms, max %s ms"):format(r.b_p50_ms, r.b_max_ms))
    assert.equal(30, r.b_ok, r.text)
    assert.is_true(r.b_max_ms < 1000, r.text)
  end)
end)

-- How many loop threads the pool runs here: one per CPU, 2 to 4.
local function pool_size()
  local f = assert(io.popen("nproc"))
  local n = tonumber(f:read("a"))
  f:close()
  return math.max(2, math.min(4, n))
end

local threads = helpers.thread_count

describe("session isolation: loop threads", function()
  it("spreads thread-mode proxies over a pool of loop threads (one per CPU, 2 to 4), never one per proxy,"
    .. " and joins each when its last proxy closes", function()
    local isolation = require("isolation")
    local dir = helpers.tmpdir()
    local before, ps, grown = helpers.settled_thread_count(), {}, {}
    for i = 1, 8 do
      ps[i] = assert(isolation.proxy({ allow = {}, unix = dir .. "/p" .. i .. ".sock" }))
      grown[i] = threads() - before
    end
    local size = pool_size()
    for i = 1, 8 do assert.equal(math.min(i, size), grown[i], "threads after " .. i .. " proxies") end
    for i = 1, 8 do ps[i]:close() end
    -- a joined thread can still be listed for a moment
    assert.is_true(helpers.wait_for(function() return threads() == before end, 5), "a loop thread outlived its proxies")
    helpers.rmtree(dir)
  end)

  it("proxies sharing a loop: all of A's 400 connections of 10 pipelined GETs are answered to the end"
    .. " while its reads past the per-pass budget are parked and resumed", function()
    local isolation = require("isolation")
    local dir = helpers.tmpdir()
    -- Every loop of the pool gets a filler, so A shares the first one.
    local fillers = {}
    for i = 1, pool_size() do
      fillers[i] = assert(isolation.proxy({ allow = {}, unix = dir .. "/f" .. i .. ".sock" }))
    end
    local before = helpers.settled_thread_count()
    local a = assert(isolation.proxy({ allow = { "127.0.0.1" }, unix = dir .. "/a.sock", max_connections = 1024 }))
    assert.equal(before, threads()) -- no new loop thread: A shares one
    local srv, port = require("support.sink")(uv, true)
    local at = "127.0.0.1:" .. port
    local gets = string.rep("GET http://" .. at .. "/ HTTP/1.1\r\nHost: " .. at .. "\r\n\r\n", 10)
    local conns, done, failed = 400, 0, 0
    for _ = 1, conns do
      local c, got = uv.new_pipe(false), 0
      c:connect(dir .. "/a.sock", function(err)
        if err then failed = failed + 1 c:close() return end
        c:read_start(function(rerr, data)
          if rerr or not data then
            failed = failed + 1
            c:close()
            return
          end
          local _, n = data:gsub("\r\n\r\nok", "")
          got = got + n
          if got == 10 then
            done = done + 1
            c:close()
          end
        end)
        c:write(gets)
      end)
    end
    local W = require("support.proxy")
    W.run_until(function() return done + failed == conns end, 30)
    local st = a:stats()
    a:close()
    for _, f in ipairs(fillers) do f:close() end
    srv:close()
    uv.run("nowait")
    helpers.rmtree(dir)
    assert.equal(0, failed)
    assert.equal(conns, done)
    assert.equal(conns * 10, st.allowed)
  end)

  -- A's flood of its own proxy must not starve B: B's back-to-back
  -- CONNECT+echo exchanges all succeed, and all of them are done while A
  -- still floods (its agent floods for 8 s; B's 200 take about 0.1 s
  -- quiet). Counts, not timings.
  local function starves_not(mode, count, env, expect_loops_b)
    env.FLOOD_B_N, env.FLOOD_B_GAP_MS = 200, 0
    local r = orchestrate(mode, count, count * 2 + 64, nil, env)
    print(("\n  %s %d on A, B %s: %s/200 in %s s (A: %s MB/s, %s requests); p50 %s ms, max %s ms"):format(
      mode, count, expect_loops_b == 1 and "on its own loop" or "on A's loop", r.b_ok, r.b_seconds,
      r.a_mb_per_s, r.a_requests, r.b_p50_ms, r.b_max_ms))
    assert.equal(expect_loops_b, r.loops_b, r.text)
    assert.equal(200, r.b_ok, r.text)
    assert.equal(0, r.b_events_error, r.text)
    assert.equal("yes", r.a_still, r.text)
    if mode == "bulk" then
      assert.equal(count, r.a_open, r.text)
      assert.is_true(r.a_mb_per_s > 0, r.text)
    else
      assert.is_true(r.a_requests > 0, r.text)
    end
  end

  it("A's 512 bulk tunnels do not starve B: 200 exchanges, all served while A floods (B on its own loop)",
    function() starves_not("bulk", 512, {}, 1) end)

  it("A's 2,048 connections of pipelined GETs do not starve B: 200 exchanges, all served while A floods"
    .. " (B on its own loop)", function() starves_not("pipe", 2048, {}, 1) end)

  it("more sessions than loop threads: B on A's loop is still served, 200 exchanges while A pipelines on"
    .. " 2,048 connections (its reads past the per-pass budget parked)", function()
    starves_not("pipe", 2048, { FLOOD_SHARE = 1 }, 0)
  end)

  it("more sessions than loop threads: B on A's loop is still served while A runs 512 bulk tunnels",
    function() starves_not("bulk", 512, { FLOOD_SHARE = 1 }, 0) end)
end)

describe("session manager max_connections", function()
  local root
  after_each(function()
    if root then helpers.rmtree(root) end
    root = nil
  end)

  local function launch_deny(mopts, lopts)
    root = helpers.tmpdir()
    local work = root .. "/work"
    assert(uv.fs_mkdir(work, 448))
    local o = { runtime_dir = root .. "/run", launcher = function() return {} end, alive = function() return true end }
    for k, v in pairs(mopts) do o[k] = v end
    local mgr, err = session.manager(o)
    if not mgr then return nil, err end
    local p = require("support.launchers").project("deny")
    local req = { id = "s1", project = p, agent = "claude", workdir = work, command = "claude" }
    for k, v in pairs(lopts) do req[k] = v end
    local s, lerr = mgr:launch(req)
    return mgr, s, lerr
  end

  -- Opens n+1 silent connections to the session's socket; how many got 503.
  local function refused_of(path, n)
    local refused, conns = 0, {}
    for i = 1, n + 1 do
      local c = uv.new_pipe(false)
      conns[i] = c
      c:connect(path, function(err)
        if err then return end
        c:read_start(function(_, data)
          if data and data:find("^HTTP/1.1 503") then refused = refused + 1 end
        end)
      end)
    end
    local t = uv.new_timer()
    t:start(500, 0, function() t:close() end)
    uv.run()
    for _, c in ipairs(conns) do c:close() end
    uv.run("nowait")
    return refused
  end

  it("takes max_connections per manager and per launch (the launch wins)", function()
    local mgr, s = launch_deny({ max_connections = 3 }, {})
    assert.is_table(s)
    assert.equal(1, refused_of(s.proxy_socket, 3))
    mgr:close()
    helpers.rmtree(root)
    mgr, s = launch_deny({ max_connections = 3 }, { max_connections = 5 })
    assert.is_table(s)
    assert.equal(1, refused_of(s.proxy_socket, 5))
    mgr:close()
  end)

  it("refuses a max_connections that is not an integer from 1 to 1000000, naming it", function()
    for _, bad in ipairs({ 0, 1.5, 1000001, -3 }) do
      local mgr, err = launch_deny({ max_connections = bad }, {})
      assert.is_nil(mgr)
      assert.matches("max_connections", err)
      assert.matches(tostring(bad), err, 1, true)
      helpers.rmtree(root)
      root = nil
    end
    local mgr, s, err = launch_deny({}, { max_connections = 0 })
    assert.is_nil(s)
    assert.matches("max_connections", err)
    mgr:close()
  end)
end)
