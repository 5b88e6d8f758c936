-- gpu = true / isolate --gpu: the host's GPU device nodes inside, nothing
-- else of its /dev. The discovery reads ISOLATION_DEV_ROOT (test-only)
-- instead of /dev, so that these specs make fake character devices with
-- mknod (major 1, minor 3: what /dev/null is) next to decoys that must not
-- be bound: a block device, another character device, a symbolic link, a
-- regular file, a name docker's --device would split.
local uv = require("luv")
local isolation = require("isolation")
local helpers = require("helpers")
local cli = require("support.cli")

local WANTED = { "dri", "dxg", "kfd", "nvidia-caps", "nvidia-uvm", "nvidia0", "nvidiactl" }

-- A fake device root; nil and the reason where mknod is not allowed.
local function fake_root()
  local root = helpers.tmpdir()
  local ok = os.execute("mknod " .. root .. "/nvidia0 c 1 3 2>/dev/null")
  if not ok then
    helpers.rmtree(root)
    return nil, "mknod is not allowed here (not root, or a nodev mount)"
  end
  local script = table.concat({
    "cd " .. helpers.shquote(root),
    "mknod nvidiactl c 1 3", "mknod nvidia-uvm c 1 3", "mknod kfd c 1 3", "mknod dxg c 1 3",
    "mkdir dri nvidia-caps", "mknod dri/renderD128 c 1 3", "mknod nvidia-caps/nvidia-cap1 c 1 3",
    -- decoys
    "mknod sda b 8 0", "mknod kmsg c 1 11", "mknod mem c 1 1", "ln -s nvidia0 nvidia9",
    "echo x > nvidia-file", "mknod 'nvidia:x' c 1 3", "mknod 'nvidia,y' c 1 3", "mkdir nvidia-dir",
  }, " && ")
  assert(os.execute(script), "could not make the fake devices")
  return root
end

local function with_root(root, f)
  local old = os.getenv("ISOLATION_DEV_ROOT")
  uv.os_setenv("ISOLATION_DEV_ROOT", root)
  local ok, err = pcall(f)
  if old then uv.os_setenv("ISOLATION_DEV_ROOT", old) else uv.os_unsetenv("ISOLATION_DEV_ROOT") end
  if not ok then error(err, 0) end
end

describe("gpu devices", function()
  local root, why, work, home
  setup(function() root, why = fake_root() end)
  teardown(function() if root then helpers.rmtree(root) end end)
  before_each(function()
    work = helpers.tmpdir()
    home = helpers.tmpdir() -- a HOME of its own: CI may run without one
  end)
  after_each(function()
    helpers.rmtree(work)
    helpers.rmtree(home)
  end)

  local function spec(mode, extra)
    local s = { config = { mode = mode, network = "allow", docker_image = mode ~= "bwrap" and "debian" or nil },
      workdir = work, command = "true", gpu = true }
    for k, v in pairs(extra or {}) do s[k] = v end
    return s
  end

  it("bwrap: --dev-bind-try for each GPU node that exists, after --dev and before /dev turns read-only", function()
    if not root then return pending(why) end
    with_root(root, function()
      local argv = assert(isolation.bwrap_argv(spec("bwrap")))
      local got = {}
      for i, a in ipairs(argv) do
        if a == "--dev-bind-try" then
          got[#got + 1] = argv[i + 1] .. " " .. argv[i + 2]
        end
      end
      local want = {}
      for i, n in ipairs(WANTED) do want[i] = root .. "/" .. n .. " /dev/" .. n end
      assert.are.same(want, got)
      local line = table.concat(argv, " ")
      assert.truthy(line:find("--dev /dev --dev-bind-try " .. root .. "/dri /dev/dri", 1, true), line)
      local decoys = { "sda", "kmsg", "mem", "nvidia9", "nvidia-file", "nvidia:x", "nvidia,y", "nvidia-dir" }
      for _, decoy in ipairs(decoys) do
        assert.falsy(line:find(root .. "/" .. decoy .. " ", 1, true), decoy)
      end
      -- with a /dev size limit, /dev turns read-only after the GPU binds
      local limited = table.concat(assert(isolation.bwrap_argv(spec("bwrap", { limits = { tmpfs = 1048576 } }))), " ")
      local bind_at = limited:find("--dev-bind-try", 1, true)
      local ro_at = limited:find("--remount-ro /dev", 1, true)
      assert.truthy(bind_at and ro_at and bind_at < ro_at, limited)
      -- and the same paths through isolation.gpu_devices()
      local found = isolation.gpu_devices()
      for i, n in ipairs(WANTED) do assert.are.equal(root .. "/" .. n, found[i]) end
      assert.are.equal(#WANTED, #found)
    end)
  end)

  it("docker and podman: --device for each, dry_run lists them", function()
    if not root then return pending(why) end
    with_root(root, function()
      for _, mode in ipairs({ "docker", "podman" }) do
        local argv = assert(isolation.docker_argv(spec(mode)))
        local got = {}
        for i, a in ipairs(argv) do
          if a == "--device" then got[#got + 1] = argv[i + 1] end
        end
        local want = {}
        for i, n in ipairs(WANTED) do want[i] = root .. "/" .. n .. ":/dev/" .. n end
        assert.are.same(want, got, mode)
        local text = assert(isolation.dry_run(spec(mode)))
        assert.truthy(text:find("  device     " .. root .. "/nvidia0 -> /dev/nvidia0\n", 1, true), text)
      end
      local text = assert(isolation.dry_run(spec("bwrap")))
      assert.truthy(text:find("gpu devices (host -> sandbox, nothing else of the host's /dev):\n", 1, true), text)
      assert.truthy(text:find("  device     " .. root .. "/kfd -> /dev/kfd\n", 1, true), text)
    end)
  end)

  it("binds nothing without gpu, with gpu = false, or where no device exists; refuses a non-boolean", function()
    local empty = helpers.tmpdir()
    with_root(empty, function()
      local line = table.concat(assert(isolation.bwrap_argv(spec("bwrap"))), " ")
      assert.falsy(line:find("--dev-bind", 1, true), line)
      assert.truthy(assert(isolation.dry_run(spec("bwrap"))):find("gpu: no GPU device found", 1, true))
      assert.are.same({}, isolation.gpu_devices())
    end)
    helpers.rmtree(empty)
    if root then
      with_root(root, function()
        for _, s in ipairs({ spec("bwrap", { gpu = false }), spec("docker", { gpu = false }) }) do
          local line = table.concat(assert(isolation.argv(s)), " ")
          assert.falsy(line:find("--dev-bind", 1, true) or line:find("--device", 1, true), line)
        end
      end)
    end
    for _, bad in ipairs({ "yes", 1, {} }) do
      local ok, err = isolation.bwrap_argv(spec("bwrap", { gpu = bad }))
      assert.is_nil(ok)
      assert.matches("gpu must be a boolean", err)
    end
  end)

  it("a real bwrap sandbox sees the fake GPU node and uses it, and none of the decoys", function()
    if not root then return pending(why) end
    if helpers.skip_without_bwrap() then return end
    local status, out, err = cli.isolate({ "--network", "allow", "--gpu", "--workdir", work, "--", "sh", "-c",
      "test -c /dev/nvidia0 && echo char; echo hi > /dev/nvidia0 && echo wrote; test -c /dev/dri/renderD128"
      .. " && echo dri; ls /dev | tr '\\n' ' '" },
      { env = { "ISOLATION_DEV_ROOT=" .. root, "HOME=" .. home } })
    assert.are.equal(0, status, err)
    assert.truthy(out:find("char\nwrote\ndri\n", 1, true), out)
    local listing = out:match("dri\n(.*)$")
    for _, n in ipairs(WANTED) do assert.truthy(listing:find(n, 1, true), n .. " in " .. listing) end
    for _, decoy in ipairs({ "sda", "kmsg", "mem", "nvidia9", "nvidia-file", "nvidia-dir" }) do
      assert.falsy((" " .. listing):find(" " .. decoy .. " ", 1, true), decoy .. " in " .. listing)
    end
    -- and without --gpu none of it
    status, out, err = cli.isolate({ "--network", "allow", "--workdir", work, "--", "sh", "-c",
      "test -e /dev/nvidia0 || echo absent" }, { env = { "ISOLATION_DEV_ROOT=" .. root, "HOME=" .. home } })
    assert.are.equal(0, status, err)
    assert.are.equal("absent\n", out)
  end)

  it("isolate --gpu without a GPU says so in one line and runs without", function()
    if helpers.skip_without_bwrap() then return end
    local empty = helpers.tmpdir()
    local status, out, err = cli.isolate({ "--network", "allow", "--gpu", "--workdir", work, "--", "echo", "ran" },
      { env = { "ISOLATION_DEV_ROOT=" .. empty, "HOME=" .. home } })
    helpers.rmtree(empty)
    assert.are.equal(0, status, err)
    assert.are.equal("ran\n", out)
    assert.are.equal("isolate: --gpu: no GPU device found (/dev/nvidia*, /dev/nvidia-caps, /dev/dri, /dev/kfd,"
      .. " /dev/dxg); running without one\n", err)
  end)
end)

describe("gpu devices through the session manager", function()
  local session = require("isolation.session")

  it("gpu = true reaches the line; a non-local target is refused, naming gpu and the target", function()
    local root, why = fake_root()
    if not root then return pending(why) end
    local dir = helpers.tmpdir()
    local work = dir .. "/work"
    assert(uv.fs_mkdir(work, 448))
    local line
    local mgr = assert(session.manager({ runtime_dir = dir .. "/run", launcher = function(cmdline)
      line = cmdline
      return {}
    end, alive = function() return false end, stop = function() end }))
    local p = require("support.launchers").project("allow")
    with_root(root, function()
      assert(mgr:launch({ id = "g1", project = p, workdir = work, command = "true", gpu = true }))
      assert.truthy(line:find("'--dev-bind-try' '" .. root .. "/nvidia0' '/dev/nvidia0'", 1, true), line)
      local ok, err = mgr:launch({ id = "g2", project = p, workdir = work, command = "true", gpu = true,
        target = { kind = "ssh", host = "u@gpu.example.com" } })
      assert.is_nil(ok)
      assert.matches("gpu works only on a local target", err)
    end)
    mgr:close()
    helpers.rmtree(dir)
    helpers.rmtree(root)
  end)
end)
