-- A root launch: what only root may read on the host (/etc/shadow,
-- /etc/gshadow, /etc/sudoers, /etc/sudoers.d, /etc/ssh/ssh_host_*_key,
-- /etc/ssl/private) is not readable inside, and isolate says once that the
-- sandbox runs as root. bwrap's --cap-drop ALL leaves the owner's own
-- permission, and root owns those files: before this, `cat /etc/shadow`
-- printed the host's hashes inside.
local uv = require("luv")
local cjson = require("cjson")
local helpers = require("helpers")
local cli = require("support.cli")
local isolation = require("isolation")
local session = require("isolation.session")
local hostpaths = require("isolation.hostpaths")

local q = helpers.shquote
local root_user = uv.getuid() == 0

-- The root-only paths that exist here, as `cat` (files) and `ls` (directories) targets.
local function present()
  local files, dirs = {}, {}
  for _, p in ipairs({ "/etc/shadow", "/etc/gshadow", "/etc/sudoers" }) do
    if uv.fs_stat(p) then files[#files + 1] = p end
  end
  local scan = uv.fs_scandir("/etc/ssh")
  while scan do
    local name = uv.fs_scandir_next(scan)
    if not name then break end
    if name:match("^ssh_host_.*_key$") then files[#files + 1] = "/etc/ssh/" .. name end
  end
  for _, p in ipairs({ "/etc/sudoers.d", "/etc/ssl/private" }) do
    if uv.fs_stat(p) then dirs[#dirs + 1] = p end
  end
  return files, dirs
end

-- A script printing, per path, how many bytes `cat` read (files) or how
-- many entries `ls -A` listed (directories).
local function probe(files, dirs)
  local lines = {}
  for _, f in ipairs(files) do lines[#lines + 1] = "echo " .. q(f) .. " $(cat " .. q(f) .. " 2>/dev/null | wc -c)" end
  for _, d in ipairs(dirs) do lines[#lines + 1] = "echo " .. q(d) .. " $(ls -A " .. q(d) .. " 2>/dev/null | wc -l)" end
  return table.concat(lines, "; ")
end

local function counts(out)
  local t = {}
  for path, n in out:gmatch("(%S+) (%d+)\n") do t[path] = tonumber(n) end
  return t
end

describe("root masks", function()
  local root, work, home
  before_each(function()
    root = assert(uv.fs_realpath(helpers.tmpdir()))
    work, home = root .. "/work", root .. "/home"
    assert(uv.fs_mkdir(work, 493))
    assert(uv.fs_mkdir(home, 493))
  end)
  after_each(function() helpers.rmtree(root) end)

  it("the builder: mask_files under /dev/null and mask_dirs under a tmpfs, after every user mount", function()
    local argv = assert(isolation.argv({ config = { mode = "bwrap", network = "allow" }, workdir = "/srv/p",
      command = "true", ro_binds = { "/etc/ssl" }, mask_files = { "/etc/shadow" },
      mask_dirs = { "/etc/ssl/private" } }))
    local text = table.concat(argv, " ")
    local user = text:find("--ro-bind /etc/ssl /etc/ssl", 1, true)
    local file = text:find("--ro-bind /dev/null /etc/shadow", 1, true)
    local dir = text:find("--tmpfs /etc/ssl/private", 1, true)
    assert.truthy(user and file and dir, text)
    assert.is_true(user < file and user < dir)
    local ok, err = pcall(isolation.argv, { config = { mode = "bwrap" }, workdir = "/srv/p", command = "true",
      mask_files = { "etc/shadow" } })
    assert.is_true(not ok or err == nil)
  end)

  it("as root: isolate's sandbox reads none of them, and isolate says once that it runs as root", function()
    if not root_user then return pending("needs root") end
    if helpers.skip_without_bwrap() then return end
    local files, dirs = present()
    if #files == 0 then return pending("none of the root-only files exists here") end
    -- outside, root reads them: the control
    local _, outside = helpers.run("bash -c " .. q(probe(files, dirs)))
    local before = counts(outside)
    for _, f in ipairs(files) do assert.is_true(before[f] > 0, f) end
    for _, network in ipairs({ "none", "deny" }) do
      local status, out, err = cli.isolate({ "--network", network, "--workdir", work, "--", "bash", "-c",
        probe(files, dirs) }, { env = { "HOME=" .. home }, root_notice = true })
      assert.are.equal(0, status, err)
      local inside = counts(out)
      for _, f in ipairs(files) do assert.are.equal(0, inside[f], f .. ": " .. out) end
      for _, d in ipairs(dirs) do assert.are.equal(0, inside[d], d .. ": " .. out) end
      local _, n = err:gsub("isolate: the sandbox runs as root", "")
      assert.are.equal(1, n, err)
    end
  end)

  it("as root: the session manager's line the same", function()
    if not root_user then return pending("needs root") end
    if helpers.skip_without_bwrap() then return end
    local files, dirs = present()
    if #files == 0 then return pending("none of the root-only files exists here") end
    local line
    local mgr = assert(session.manager({ runtime_dir = root .. "/run",
      launcher = function(cmdline) line = cmdline return {} end }))
    local s = assert(mgr:launch({ id = "s", workdir = work, isolation = { mode = "bwrap", network = "none" },
      command = probe(files, dirs) }))
    local code, out = helpers.run("HOME=" .. q(home) .. " bash -c " .. q(line) .. " 2>&1")
    assert.are.equal(0, code, out)
    local inside = counts(out)
    for _, f in ipairs(files) do assert.are.equal(0, inside[f], f .. ": " .. out) end
    for _, d in ipairs(dirs) do assert.are.equal(0, inside[d], d .. ": " .. out) end
    assert(mgr:kill(s.id))
    mgr:close()
  end)

  it("as an ordinary user nothing changes: no mask in the line, no root notice, the files unreadable as before",
    function()
    if not root_user then
      assert.is_nil(hostpaths.root_masks())
      return
    end
    if helpers.run("command -v setpriv") ~= 0 then return pending("setpriv(1) is not installed") end
    assert(os.execute("chown -R 65534:65534 " .. q(work) .. " " .. q(home) .. " && chmod 755 " .. q(root)))
    local as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups " .. helpers.NO_SANITIZER .. "HOME="
      .. q(home) .. " TMPDIR=/tmp " .. q(cli.ISOLATE) .. " --workdir " .. q(work)
    local code, out = helpers.run(as_nobody .. " --dry-run --json -- true 2>" .. q(root .. "/err"))
    local err = helpers.read(root .. "/err") or ""
    assert.are.equal(0, code, err)
    local argv = cjson.decode(out)
    for _, a in ipairs(argv) do assert.is_nil(a:find("shadow", 1, true), a) end
    assert.is_nil(err:find("runs as root", 1, true), err)
    if helpers.skip_without_bwrap() then return end
    code, out = helpers.run(as_nobody .. " --network none -- sh -c 'cat /etc/shadow >/dev/null 2>&1; echo $?' 2>&1")
    assert.are.equal(0, code, out)
    assert.is_nil(out:find("runs as root", 1, true), out)
    assert.are.equal("1\n", out)
  end)
end)
