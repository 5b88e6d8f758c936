-- bin/isolate and the files around it: a --config that is not a small
-- regular file, and the proxy directory an isolate killed with SIGKILL
-- leaves behind.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")

local shq = helpers.shquote
local OTHER = 65534

local function one_usage_line(status, out, err)
  assert.are.equal(2, status, err)
  assert.are.equal("", out)
  assert.truthy(err:match("^isolate: [^\n]+\n$"), err)
end

local function glue_sleep(secs)
  os.execute("sleep " .. secs)
end

local exists = helpers.exists

describe("isolate --config", function()
  local tmp
  before_each(function() tmp = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(tmp) end)

  -- Each is refused at once, before a byte is read: /dev/zero used to be
  -- read until memory ran out, a FIFO to block forever.
  for _, case in ipairs({
    { "/dev/zero, read until memory ran out", function() return "/dev/zero" end, "a character device" },
    { "a FIFO with no writer, which blocked forever", function(dir)
      assert.are.equal(0, helpers.run("mkfifo " .. shq(dir .. "/fifo")))
      return dir .. "/fifo"
    end, "a FIFO" },
    { "a directory", function(dir) return dir end, "a directory" },
    { "a 2 MiB sparse file", function(dir)
      assert.are.equal(0, helpers.run("truncate -s 2M " .. shq(dir .. "/big.json")))
      return dir .. "/big.json"
    end, "too large (2097152 bytes; a config file may hold at most 1048576)" },
  }) do
    it("refuses " .. case[1] .. ", in bounded time, as a usage error", function()
      local path = case[2](tmp)
      local t0 = uv.hrtime()
      local status, out, err = cli.isolate({ "--config", path, "--dry-run", "--", "true" }, { timeout = 10 })
      local secs = (uv.hrtime() - t0) / 1e9
      one_usage_line(status, out, err)
      assert.truthy(err:find("--config " .. path .. ": ", 1, true), err)
      assert.truthy(err:find(case[3], 1, true), err)
      assert.is_true(secs < 5, "took " .. secs .. " s")
    end)
  end

  it("refuses a symlink to /dev/zero by what it points to", function()
    assert(uv.fs_symlink("/dev/zero", tmp .. "/c.json"))
    local status, out, err = cli.isolate({ "--config", tmp .. "/c.json", "--dry-run", "--", "true" }, { timeout = 10 })
    one_usage_line(status, out, err)
    assert.truthy(err:find("a character device", 1, true), err)
  end)

  it("accepts a regular file of exactly 1 MiB", function()
    local json = '{"mode":"bwrap","network":"allow"}'
    helpers.write(tmp .. "/c.json", json .. string.rep(" ", 1024 * 1024 - #json))
    -- run from tmp: the checkout, holding the bridge program, is no workdir (spec/hostpaths_spec.lua)
    local status, out, err = cli.isolate({ "--config", tmp .. "/c.json", "--dry-run", "--json", "--", "true" },
      { cwd = tmp })
    assert.are.equal(0, status, err)
    assert.truthy(out:find('"bwrap"', 1, true), out)
    assert.falsy(out:find("--unshare-net", 1, true), out)
  end)
end)

describe("isolate's leftovers", function()
  local tmp, running
  before_each(function()
    tmp = helpers.tmpdir() -- TMPDIR of every isolate here: nobody else's directories are touched
    assert(uv.fs_chmod(tmp, tonumber("755", 8)))
    assert(uv.fs_mkdir(tmp .. "/home", 448))
    running = {}
  end)
  after_each(function()
    for _, p in ipairs(running) do
      if p.status == nil then p.kill("sigkill") end
      p.wait(10)
    end
    helpers.rmtree(tmp)
  end)

  -- isolate's environment: this TMPDIR, and a HOME (CI may have none)
  local function env() return { "TMPDIR=" .. tmp, "HOME=" .. tmp .. "/home" } end

  local function proxy_dirs()
    local out = {}
    for _, n in ipairs(cli.ls(tmp)) do
      if n:match("^isolate%.") and exists(tmp .. "/" .. n .. "/proxy.sock") then out[n] = true end
    end
    return out
  end

  -- Starts `isolate -- sleep 300` (bwrap, network deny) and returns it and
  -- its proxy directory's name once its socket exists.
  local function start_sleeper()
    local before = proxy_dirs()
    local work = tmp .. "/work"
    uv.fs_mkdir(work, 448)
    local p = cli.spawn({ cli.ISOLATE, "--workdir", work, "--", "sleep", "300" }, { env = env() })
    running[#running + 1] = p
    local name
    assert.is_true(cli.wait_for(function()
      for n in pairs(proxy_dirs()) do if not before[n] then name = n end end
      return name ~= nil or p.status ~= nil
    end, 30), "no proxy directory appeared")
    assert.is_nil(p.status, p.err)
    return p, name
  end

  -- A socket file nobody listens on: its listener was killed with SIGKILL.
  local function dead_socket(path)
    assert.are.equal(0, helpers.run("timeout -s KILL 0.3 socat UNIX-LISTEN:" .. shq(path) .. " /dev/null; test -S "
      .. shq(path)))
  end

  local function leftover(name, extra)
    local dir = tmp .. "/" .. name
    assert(uv.fs_mkdir(dir, 448))
    assert(uv.fs_chmod(dir, 448))
    dead_socket(dir .. "/proxy.sock")
    if extra then extra(dir) end
    return dir
  end

  it("removes the directory of an isolate killed with SIGKILL at the next start, and keeps a live one's", function()
    if helpers.skip_without_bwrap() then return end
    if uv.getuid() ~= 0 then return pending("needs root to chown a directory to uid " .. OTHER) end
    local killed, killed_dir = start_sleeper()
    local live, live_dir = start_sleeper()
    killed.kill("sigkill")
    assert.are.equal(128 + 9, (killed.wait(20)))
    -- what the killed one left: its directory, its socket, dead
    assert.is_true(exists(tmp .. "/" .. killed_dir .. "/proxy.sock"))
    -- Beside them, what is not an isolate's leftover stays:
    local keep = {
      leftover("isolate.Other1", function(dir) helpers.write(dir .. "/notes.txt", "mine") end), -- another file
      leftover("isolate.Other2", function(dir) -- another user's
        assert(uv.fs_chown(dir .. "/proxy.sock", OTHER, OTHER))
        assert(uv.fs_chown(dir, OTHER, OTHER))
      end),
      leftover("isolate.Other3", function(dir) assert(uv.fs_chmod(dir, tonumber("755", 8))) end), -- not 0700
      leftover("isolation.Other4"), -- not isolate's name
      leftover("isolate.TooLongName"),
    }
    local empty = tmp .. "/isolate.Empty1" -- an isolate between its mkdtemp and its bind
    assert(uv.fs_mkdir(empty, 448))
    local plain = tmp .. "/isolate.Plain1" -- proxy.sock that is not a socket
    assert(uv.fs_mkdir(plain, 448))
    helpers.write(plain .. "/proxy.sock", "x")
    keep[#keep + 1] = empty
    keep[#keep + 1] = plain
    glue_sleep(2.2) -- older than the age under which a socket may be between bind and listen
    local status, _, err = cli.isolate({ "--workdir", tmp .. "/work", "--", "true" }, { env = env() })
    assert.are.equal(0, status, err)
    assert.is_false(exists(tmp .. "/" .. killed_dir))
    assert.is_true(exists(tmp .. "/" .. live_dir .. "/proxy.sock"))
    assert.is_nil(live.status)
    for _, dir in ipairs(keep) do assert.is_true(exists(dir), dir) end
    assert.is_true(exists(keep[1] .. "/proxy.sock"))
    assert.are.equal("mine", helpers.read(keep[1] .. "/notes.txt"))
    -- the live one still works and cleans up after itself
    live.kill("sigterm")
    assert.are.equal(128 + 15, (live.wait(20)))
    assert.is_false(exists(tmp .. "/" .. live_dir))
  end)

  it("removes a killed run's filter file and directory (network allow), and an empty directory after a minute",
    function()
      -- a killed `--network allow` bwrap run leaves its session's filter
      -- file, named with its (gone) process id, and no socket
      local gone = tmp .. "/isolate.Gone01"
      assert(uv.fs_mkdir(gone, 448))
      local dead_pid = 4194304 + 7 -- above pid_max's ceiling: never a live process
      helpers.write(gone .. "/proxy." .. dead_pid .. "-0123456789ab.sandbox-seccomp.bpf", "x")
      -- the same name with a live process's id: a running isolate's
      local live = tmp .. "/isolate.Live01"
      assert(uv.fs_mkdir(live, 448))
      helpers.write(live .. "/proxy." .. uv.os_getpid() .. "-0123456789ab.sandbox-seccomp.bpf", "x")
      -- empty: a killed run without a proxy or filter (--mode none), or one
      -- between its mkdtemp and its launch; removed only after a minute
      local old_empty, new_empty = tmp .. "/isolate.OldEm1", tmp .. "/isolate.NewEm1"
      assert(uv.fs_mkdir(old_empty, 448))
      assert(uv.fs_mkdir(new_empty, 448))
      local t = os.time() - 61
      for _, d in ipairs({ gone, live, old_empty }) do assert(uv.fs_utime(d, t, t)) end
      local t2 = os.time() - 5
      assert(uv.fs_utime(new_empty, t2, t2))
      local status, _, err = cli.isolate({ "--mode", "none", "--", "true" }, { env = env() })
      assert.are.equal(0, status, err)
      assert.is_false(exists(gone))
      assert.is_false(exists(old_empty))
      assert.is_true(exists(new_empty))
      assert.are.equal(1, #cli.ls(live))
    end)

  it("leaves a dead socket younger than two seconds (an isolate between bind and listen)", function()
    local dir = leftover("isolate.Fresh1")
    local status, _, err = cli.isolate({ "--mode", "none", "--", "true" }, { env = env() })
    assert.are.equal(0, status, err)
    assert.is_true(exists(dir .. "/proxy.sock"))
    glue_sleep(2.2)
    status, _, err = cli.isolate({ "--mode", "none", "--", "true" }, { env = env() })
    assert.are.equal(0, status, err)
    assert.is_false(exists(dir))
  end)
end)
