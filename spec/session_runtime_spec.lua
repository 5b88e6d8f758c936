-- runtime_dir must stay in hands of root and this user only, from / down:
-- a parent that another user can write lets them move runtime_dir away
-- after manager() and put their own directory in its place, and the next
-- launch would then bind its proxy socket and write its seccomp filter
-- there (the attacker then swaps the proxy, ending the allowlist, and the
-- filter). The other user is a real one: uid 65534, through setpriv.
local uv = require("luv")
local helpers = require("helpers")
local session = require("isolation.session")

local shq = helpers.shquote
local OTHER = 65534

local function mode_of(path)
  local st = uv.fs_lstat(path)
  return st and (math.tointeger(st.mode) or 0) & 4095
end

local exists = helpers.exists
local entries = require("support.cli").ls

-- Runs a shell command as the other user; returns true when it exited 0.
local function as_other(cmd)
  return helpers.run("setpriv --reuid=" .. OTHER .. " --regid=" .. OTHER .. " --clear-groups -- sh -c "
    .. shq(cmd)) == 0
end

-- A temporary directory the other user can reach (mktemp makes it 0700).
local function open_root()
  local root = helpers.tmpdir()
  assert(uv.fs_chmod(root, tonumber("755", 8)))
  return root
end

local function mkdir(path, mode)
  assert(uv.fs_mkdir(path, 448))
  assert(uv.fs_chmod(path, mode))
end

local launched
local function manager(dir)
  launched = 0
  return session.manager({ runtime_dir = dir, launcher = function()
    launched = launched + 1
    return { pid = 0 }
  end })
end

local function deny_launch(mgr, work, id)
  return mgr:launch({ id = id or "s1", isolation = { mode = "bwrap", network = "deny" }, workdir = work,
    command = "true" })
end

describe("runtime_dir from / down", function()
  -- Playing the other user needs root (setpriv, chown); CI runs as root.
  if uv.getuid() ~= 0 then
    it("needs root to act as uid " .. OTHER, function() pending("not root") end)
    return
  end
  local root
  after_each(function()
    if root then helpers.run("rm -rf " .. shq(root)) end
    root = nil
  end)

  for _, case in ipairs({
    { "world-writable", tonumber("777", 8), "writable by group or others" },
    { "group-writable", tonumber("775", 8), "writable by group or others" },
  }) do
    it("refuses a " .. case[1] .. " parent, naming it, and creates nothing under it", function()
      root = open_root()
      local parent = root .. "/shared"
      mkdir(parent, case[2])
      local mgr, err = manager(parent .. "/run")
      assert.is_nil(mgr)
      assert.matches(shq(parent):gsub("'", '"'), err, 1, true)
      assert.matches(case[3], err, 1, true)
      assert.matches(string.format("%04o", case[2]), err, 1, true)
      assert.is_false(exists(parent .. "/run"))
    end)
  end

  it("refuses a 0755 parent whose ACL lets another user write (the group bits show the ACL's mask)", function()
    root = open_root()
    local parent = root .. "/acl"
    mkdir(parent, tonumber("755", 8))
    assert.are.equal(0, helpers.run("setfacl -m u:" .. OTHER .. ":rwx " .. shq(parent)))
    assert.is_true(as_other("mkdir " .. shq(parent .. "/theirs"))) -- they really can
    local mgr, err = manager(parent .. "/run")
    assert.is_nil(mgr)
    assert.matches('"' .. parent .. '" is writable by group or others (mode 0775)', err, 1, true)
    assert.is_false(exists(parent .. "/run"))
  end)

  it("refuses a parent that belongs to another user, even 0755", function()
    root = open_root()
    local parent = root .. "/theirs"
    mkdir(parent, tonumber("755", 8))
    assert(uv.fs_chown(parent, OTHER, OTHER))
    mkdir(parent .. "/run", 448) -- ours, private: their directory still holds it
    local mgr, err = manager(parent .. "/run")
    assert.is_nil(mgr)
    assert.matches('"' .. parent .. '"', err, 1, true)
    assert.matches("uid " .. OTHER, err, 1, true)
  end)

  it("refuses a deeper ancestor that others can write, not only the direct parent", function()
    root = open_root()
    mkdir(root .. "/a", tonumber("777", 8))
    mkdir(root .. "/a/b", tonumber("755", 8))
    local mgr, err = manager(root .. "/a/b/run")
    assert.is_nil(mgr)
    assert.matches('"' .. root .. '/a"', err, 1, true)
    assert.is_false(exists(root .. "/a/b/run"))
  end)

  it("accepts a directory of ours directly under the sticky /tmp", function()
    root = helpers.tmpdir() -- /tmp/isolation-spec.XXXXXX, ours, 0700
    assert.equal(tonumber("1777", 8), mode_of("/tmp"))
    local mgr = assert(manager(root))
    assert.equal(root, mgr.runtime_dir)
    mgr:close()
  end)

  it("accepts a sticky world-writable parent when the next component is ours, refuses it when it is theirs", function()
    root = open_root()
    local sticky = root .. "/sticky"
    mkdir(sticky, tonumber("1777", 8))
    local mgr = assert(manager(sticky .. "/mine/run"))
    assert.equal(448, mode_of(sticky .. "/mine"))
    mgr:close()
    assert.is_true(as_other("mkdir -m 755 " .. shq(sticky .. "/theirs")))
    local err
    mgr, err = manager(sticky .. "/theirs/run")
    assert.is_nil(mgr)
    assert.matches('"' .. sticky .. '/theirs"', err, 1, true)
    assert.matches("uid " .. OTHER, err, 1, true)
    -- a symlink planted by them in the sticky directory is theirs too
    assert.is_true(as_other("ln -s " .. shq(sticky .. "/mine") .. " " .. shq(sticky .. "/link")))
    mgr, err = manager(sticky .. "/link/run")
    assert.is_nil(mgr)
    assert.matches('"' .. sticky .. '/link"', err, 1, true)
  end)

  it("follows a symlink of ours and works on the real path", function()
    root = open_root()
    mkdir(root .. "/real", 448)
    assert(uv.fs_symlink(root .. "/real", root .. "/link"))
    local mgr = assert(manager(root .. "/link/run"))
    assert.equal(root .. "/real/run", mgr.runtime_dir)
    mgr:close()
  end)

  describe("after manager()", function()
    local work
    before_each(function()
      root = open_root()
      work = root .. "/work"
      mkdir(work, 448)
      mkdir(root .. "/parent", tonumber("755", 8))
    end)

    it("a rename-and-replace by another user is detected at the next launch; nothing is written in theirs", function()
      local dir = root .. "/parent/run"
      local mgr = assert(manager(dir))
      local s = assert(deny_launch(mgr, work, "before"))
      assert.equal(dir .. "/before.sock", s.proxy_socket)
      assert(mgr:kill("before"))
      -- the parent becomes writable (an admin's chmod, a shared group): they move ours away, put theirs in
      assert(uv.fs_chmod(root .. "/parent", tonumber("777", 8)))
      assert.is_true(as_other("mv " .. shq(dir) .. " " .. shq(dir .. ".moved") .. " && mkdir -m 777 " .. shq(dir)))
      assert.equal(OTHER, uv.fs_lstat(dir).uid)
      -- even with the parent made private again, theirs is not ours
      assert(uv.fs_chmod(root .. "/parent", tonumber("755", 8)))
      local s2, err = deny_launch(mgr, work, "after")
      assert.is_nil(s2)
      assert.matches("runtime_dir", err, 1, true)
      assert.matches('"' .. dir .. '"', err, 1, true)
      assert.same({}, entries(dir))
      assert.equal(1, launched)
      -- a bwrap allow launch would write the filter there: refused as well
      local s3
      s3, err = mgr:launch({ id = "allow", isolation = { mode = "bwrap" }, workdir = work, command = "true" })
      assert.is_nil(s3)
      assert.matches("runtime_dir", err, 1, true)
      assert.same({}, entries(dir))
      mgr:close()
    end)

    it("a symlink put in place of runtime_dir is detected at the next launch", function()
      local dir = root .. "/parent/run"
      local mgr = assert(manager(dir))
      assert(uv.fs_chmod(root .. "/parent", tonumber("777", 8)))
      local theirs = root .. "/parent/theirs"
      assert.is_true(as_other("mkdir -m 777 " .. shq(theirs) .. " && mv " .. shq(dir) .. " "
        .. shq(dir .. ".moved") .. " && ln -s " .. shq(theirs) .. " " .. shq(dir)))
      local s, err = deny_launch(mgr, work)
      assert.is_nil(s)
      assert.matches("runtime_dir", err, 1, true)
      assert.same({}, entries(theirs))
      assert.equal(0, launched)
      mgr:close()
    end)

    it("a parent made writable by others after manager() refuses the next launch, naming it", function()
      local dir = root .. "/parent/run"
      local mgr = assert(manager(dir))
      assert(uv.fs_chmod(root .. "/parent", tonumber("777", 8)))
      local s, err = deny_launch(mgr, work)
      assert.is_nil(s)
      assert.matches('"' .. root .. '/parent"', err, 1, true)
      assert.matches("0777", err, 1, true)
      for _, name in ipairs(entries(dir)) do assert.is_nil(name:find("%.sock$"), name) end
      assert.equal(0, launched)
      -- private again: launches work again
      assert(uv.fs_chmod(root .. "/parent", tonumber("755", 8)))
      s = assert(deny_launch(mgr, work))
      assert.equal("socket", uv.fs_lstat(s.proxy_socket).type)
      mgr:close()
    end)

    it("recover refuses a runtime_dir under a parent others can write, and deletes nothing of theirs", function()
      mkdir(root .. "/open", tonumber("777", 8))
      local dir = root .. "/open/run"
      assert.is_true(as_other("mkdir -m 700 " .. shq(dir) .. " && cd " .. shq(dir)
        .. " && timeout -s KILL 1 socat UNIX-LISTEN:dead.sock /dev/null; test -S dead.sock"))
      local n, err = session.recover(dir)
      assert.is_nil(n)
      assert.matches('"' .. root .. '/open"', err, 1, true)
      assert.is_true(exists(dir .. "/dead.sock"))
    end)
  end)
end)
