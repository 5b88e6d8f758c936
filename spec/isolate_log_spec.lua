-- isolate --log, driven for real (bwrap deny sandbox, the proxy, a loopback
-- upstream): one JSON line per request, read back with lua-cjson, created
-- 0600; a log that cannot be written (a full file system: a 16 KiB tmpfs,
-- filled before the run) is reported once and never holds the proxy up; a
-- log path that is a symlink is refused before anything runs.
local uv = require("luv")
local cjson = require("cjson")
local helpers = require("helpers")
local isolate_run = require("support.isolate_run")

local PINNED = "pinned.example.com"

describe("isolate --log", function()
  local fx, tmp, up
  before_each(function()
    fx = isolate_run.new(1)
    tmp, up = fx.tmp, fx.up
  end)
  after_each(function() fx:close() end)

  local function run(extra, script)
    -- the workdir beside the log: a workdir holding it is refused (spec/hostpaths_spec.lua)
    local work = tmp .. "/work"
    uv.fs_mkdir(work, 448)
    return fx:sh({ "--workdir", work, "--resolve", PINNED .. ":127.0.0.1", "--allow-host", PINNED,
      "--allow-host", "127.0.0.1" }, extra, script)
  end

  local function requests(n)
    local s = ""
    for i = 1, n do
      s = s .. "curl -s --max-time 20 -o /dev/null -w '%{http_code}\\n' http://" .. PINNED .. ":" .. up.port .. "/r"
        .. i .. "; "
    end
    return s
  end

  it("writes one line per request, 0600, with this run's session", function()
    if helpers.skip_without_bwrap() then return end
    local log = tmp .. "/audit.log"
    local status, out, err = run({ "--log", log }, requests(3)
      .. "curl -s -o /dev/null -w '%{http_code}\\n' http://unlisted.example.com/")
    assert.are.equal(0, status, err)
    assert.are.equal("200\n200\n200\n403\n", out)
    local lines = {}
    for l in io.lines(log) do lines[#lines + 1] = cjson.decode(l) end
    assert.are.equal(4, #lines)
    for i = 1, 3 do
      assert.are.same({ "allow", "allowed", "GET", PINNED, up.port, 200 },
        { lines[i].type, lines[i].code, lines[i].method, lines[i].host, lines[i].port, lines[i].status })
      assert.is_true(lines[i].bytes_up > 0 and lines[i].bytes_down > 0)
    end
    assert.are.same({ "deny", "not_allowed", "unlisted.example.com", 80 },
      { lines[4].type, lines[4].code, lines[4].host, lines[4].port })
    assert.matches("^isolate%-%d+%-%d+$", lines[1].session)
    for _, l in ipairs(lines) do assert.are.equal(lines[1].session, l.session) end
    assert.are.equal(384, math.tointeger(uv.fs_stat(log).mode) & 511)
    -- a second run appends, under a session of its own
    status = run({ "--log", log }, requests(1))
    assert.are.equal(0, status)
    local n, last = 0, nil
    for l in io.lines(log) do n, last = n + 1, cjson.decode(l) end
    assert.are.equal(5, n)
    assert.are.equal("allow", last.type)
  end)

  it("a log on a full file system: reported once, every request still answered at once", function()
    if helpers.skip_without_bwrap() then return end
    if uv.getuid() ~= 0 then
      pending("mounting a tmpfs needs root")
      return
    end
    local dir = tmp .. "/full"
    assert(uv.fs_mkdir(dir, 448))
    assert(os.execute("mount -t tmpfs -o size=16k tmpfs " .. helpers.shquote(dir)))
    local ok, e = pcall(function()
      -- fill it: dd stops at ENOSPC
      os.execute("dd if=/dev/zero of=" .. helpers.shquote(dir .. "/fill") .. " bs=4k 2>/dev/null")
      local log = dir .. "/audit.log"
      local t0 = uv.hrtime()
      local status, out, err = run({ "--log", log }, requests(20))
      local elapsed = (uv.hrtime() - t0) / 1e9
      assert.are.equal(0, status, err)
      assert.are.equal(("200\n"):rep(20), out)
      local _, reports = err:gsub("audit log [^\n]*write failed", "")
      assert.are.equal(1, reports, err)
      assert.truthy(err:find("isolation.proxy: audit log " .. log .. ": write failed (No space left on device); "
        .. "later lines are not written", 1, true), err)
      assert.is_true(elapsed < 30, "took " .. elapsed .. " s")
      assert.are.equal(20, #up.requests())
    end)
    os.execute("umount " .. helpers.shquote(dir))
    assert(ok, e)
  end)

  it("refuses a symlink at the log's path (usage error, nothing run, the target untouched)", function()
    local target = tmp .. "/target"
    helpers.write(target, "keep\n")
    local log = tmp .. "/audit.log"
    assert(uv.fs_symlink(target, log))
    local status, out, err = run({ "--log", log }, "echo ran")
    assert.are.equal(2, status, err)
    assert.are.equal("", out)
    assert.truthy(err:find("isolate: --log " .. log .. ": is a symbolic link, which is not followed", 1, true), err)
    assert.are.equal("keep\n", helpers.read(target))
  end)
end)
