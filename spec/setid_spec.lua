-- isolation.setid: the end check clears the set-user-ID and set-group-ID
-- bits of files changed in the session (issue 27.4), under isolate and the
-- session manager, with the filter that would refuse them turned down to
-- the TTY one (seccomp "tty"), as docker or a filter hole would leave them.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")
local session = require("isolation.session")
local setid = require("isolation.setid")

local q = helpers.shquote
local SETID = 3072

local function mode(path)
  return math.tointeger(uv.fs_lstat(path).mode) & 4095
end

local function sleep(s) uv.sleep(math.floor(s * 1000)) end

-- A name with ESC, BEL, CR, LF, DEL, a backslash and 0x9b.
local NASTY = "h\27]0;title\7\r\nisolate: forged\127\\\155"

describe("setid end check", function()
  local root, work
  before_each(function()
    root = assert(uv.fs_realpath(helpers.tmpdir()))
    work = root .. "/work"
    assert(uv.fs_mkdir(work, 493))
  end)
  after_each(function() helpers.rmtree(root) end)

  it("clears the bits of files changed since the launch, one escaped line each; the user's own stay", function()
    helpers.write(work .. "/before", "x")
    assert(uv.fs_chmod(work .. "/before", tonumber("4755", 8)))
    sleep(0.2)
    local w = setid.watch({ config = { mode = "bwrap" }, workdir = work })
    assert(uv.fs_mkdir(work .. "/sub", 493))
    for _, name in ipairs({ "sub/" .. NASTY, "g", "plain" }) do helpers.write(work .. "/" .. name, "x") end
    assert(uv.fs_chmod(work .. "/sub/" .. NASTY, tonumber("4755", 8)))
    assert(uv.fs_chmod(work .. "/g", tonumber("2750", 8)))
    assert(uv.fs_chmod(work .. "/plain", tonumber("755", 8)))
    assert(uv.fs_mkdir(work .. "/dir", tonumber("2775", 8))) -- a directory runs nothing: left
    assert(uv.fs_chmod(work .. "/dir", tonumber("2775", 8)))
    local cleared, failed, lines = setid.check(w)
    assert.is_false(failed)
    table.sort(cleared)
    assert.are.same({ work .. "/g", work .. "/sub/" .. NASTY }, cleared)
    assert.are.equal(tonumber("755", 8), mode(work .. "/sub/" .. NASTY))
    assert.are.equal(tonumber("750", 8), mode(work .. "/g"))
    assert.are.equal(tonumber("755", 8), mode(work .. "/plain"))
    assert.are.equal(tonumber("4755", 8), mode(work .. "/before"))
    assert.are.equal(2, #lines)
    for _, l in ipairs(lines) do
      assert.is_nil(l:find("[%c\128-\255]"), l)
    end
    local all = table.concat(lines, "\n")
    assert.truthy(all:find("h\\x1b]0;title\\x07\\x0d\\x0aisolate: forged\\x7f\\x5c\\x9b (mode 4755 -> 0755", 1, true),
      all)
    -- nothing left to do the second time
    cleared = setid.check(w)
    assert.are.same({}, cleared)
  end)

  it("never follows a symbolic link, and reads read-write binds too", function()
    local bind = root .. "/cache"
    assert(uv.fs_mkdir(bind, 493))
    local outside = root .. "/outside"
    helpers.write(outside, "x")
    local w = setid.watch({ config = { mode = "bwrap" }, workdir = work, binds = { bind } })
    assert(uv.fs_chmod(outside, tonumber("4755", 8)))
    assert(uv.fs_symlink(outside, work .. "/link"))
    helpers.write(bind .. "/tool", "x")
    assert(uv.fs_chmod(bind .. "/tool", tonumber("6755", 8)))
    local cleared = setid.check(w)
    assert.are.same({ bind .. "/tool" }, cleared)
    assert.are.equal(tonumber("4755", 8), mode(outside))
    assert.are.equal(tonumber("755", 8), mode(bind .. "/tool"))
  end)

  it("isolate (seccomp tty): a setuid copy of bash made inside comes back without the bit", function()
    if helpers.skip_without_bwrap() then return end
    local home = root .. "/home"
    assert(uv.fs_mkdir(home, 448))
    local status, out, err = cli.isolate({ "--network", "none", "--seccomp", "tty", "--workdir", work, "--", "bash",
      "-c", "cp /bin/bash helper && chmod 4755 helper && stat -c %a helper" }, { env = { "HOME=" .. home } })
    assert.are.equal(0, status, err)
    assert.are.equal("4755\n", out) -- inside, the TTY filter let it through
    assert.are.equal(tonumber("755", 8), mode(work .. "/helper"))
    assert.matches("isolate: setid: cleared the set%-user%-ID/set%-group%-ID bits of " .. work:gsub("%p", "%%%0")
      .. "/helper %(mode 4755 %-> 0755", err)
  end)

  it("the session manager (seccomp tty): the same, reported to log, the paths on the session", function()
    if helpers.skip_without_bwrap() then return end
    local home = root .. "/home"
    assert(uv.fs_mkdir(home, 448))
    local logged, line = {}, nil
    local mgr = assert(session.manager({ runtime_dir = root .. "/run",
      launcher = function(cmdline) line = cmdline return {} end,
      log = function(l) logged[#logged + 1] = l end }))
    local s = assert(mgr:launch({ id = "s", workdir = work, isolation = { mode = "bwrap", network = "none" },
      seccomp = "tty", command = "cp /bin/bash helper && chmod 4755 helper && stat -c %a helper" }))
    local code, out = helpers.run("HOME=" .. q(home) .. " bash -c " .. q(line) .. " 2>&1")
    assert.are.equal(0, code, out)
    assert.are.equal("4755\n", out)
    assert.are.equal(SETID & mode(work .. "/helper"), tonumber("4000", 8))
    assert(mgr:kill(s.id))
    assert.are.equal(tonumber("755", 8), mode(work .. "/helper"))
    assert.are.same({ work .. "/helper" }, s.setid_cleared)
    assert.truthy(table.concat(logged, "\n"):find("isolation: session \"s\": setid: cleared", 1, true),
      table.concat(logged, "\n"))
    mgr:close()
  end)
end)
