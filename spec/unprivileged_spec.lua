-- The key attacks of issue 27 again with `isolate` run by an ordinary user
-- (uid and gid 65534, no supplementary group, a HOME and a workdir of its
-- own under /tmp), where they can differ from a root launch: bwrap then
-- runs in a user namespace of that user, the files the sandbox makes are
-- that user's, and signals come from that user. Each attack as in
-- spec/gitcheck_spec.lua, spec/session_end_spec.lua and spec/setid_spec.lua:
--   * .git/logs/HEAD and COMMIT_EDITMSG made symbolic links to the user's
--     files, HEAD on a hostile branch: moved aside, the host's git writes
--     nothing through them;
--   * a session whose processes ignore SIGTERM (and a setsid'd one) ends
--     within the grace after SIGTERM to isolate, and pgrep finds nothing;
--   * a setuid copy of bash made inside: refused by the filter (EPERM), and
--     no file with the bit comes back.
-- Only where this machine lets an ordinary user run bwrap (unprivileged
-- user namespaces); pending with the reason otherwise.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")

local shq = helpers.shquote
local AS_USER = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" }
local GIT = "git -c user.email=a@example.com -c user.name=a -c init.defaultBranch=main"

-- Why an ordinary user cannot run the sandboxes here, or nil.
local function why_not()
  if helpers.run("id -u | grep -qx 0") ~= 0 then
    return "the specs do not run as root: they cannot switch to another user"
  end
  if helpers.run("command -v setpriv") ~= 0 then return "no setpriv" end
  local code, _, err = helpers.run(table.concat(AS_USER, " ") .. " bwrap --ro-bind / / --proc /proc --dev /dev "
    .. "--unshare-all --die-with-parent -- /bin/true")
  if code ~= 0 then
    return "bwrap does not run as an ordinary user here (unprivileged user namespaces?): " .. err
  end
end

local function sh(cmd)
  local code, out, err = helpers.run(cmd)
  assert.equal(0, code, cmd .. "\n" .. out .. err)
  return out
end

describe("isolate as an ordinary user (uid 65534)", function()
  local why = why_not()
  if why then
    it("is skipped", function() pending(why) end)
    return
  end

  local root, home, work
  before_each(function()
    root = helpers.tmpdir()
    home, work = root .. "/home", root .. "/home/work"
    sh("mkdir -p " .. shq(work) .. " && chown -R 65534:65534 " .. shq(home) .. " && chmod 0711 " .. shq(root))
  end)
  after_each(function() helpers.rmtree(root) end)

  -- `sh` as the user, in the workdir, with its HOME
  local function user_sh(cmd)
    return sh(table.concat(AS_USER, " ") .. " env HOME=" .. shq(home) .. " sh -c " .. shq("cd " .. shq(work)
      .. " && " .. cmd))
  end

  local function isolate(args, command, opts)
    local argv = {}
    for _, a in ipairs(AS_USER) do argv[#argv + 1] = a end
    argv[#argv + 1] = cli.ISOLATE
    for _, a in ipairs(args) do argv[#argv + 1] = a end
    for _, a in ipairs({ "--workdir", work, "--", "bash", "-c", command }) do argv[#argv + 1] = a end
    return cli.spawn(argv, { env = { "HOME=" .. home }, cwd = work, stdin = opts and opts.stdin })
  end

  it("git: logs/HEAD and COMMIT_EDITMSG made links to the user's files, HEAD on a hostile branch: moved aside; "
    .. "the host's checkout and commit write nothing through them", function()
    helpers.write(home .. "/.bashrc", "original\n")
    helpers.write(home .. "/msg", "original\n")
    sh("chown 65534:65534 " .. shq(home .. "/.bashrc") .. " " .. shq(home .. "/msg"))
    user_sh(GIT .. " init -q . && " .. GIT .. " commit -q --allow-empty -m init")
    local status, out, err = isolate({ "--network", "none" }, table.concat({
      GIT .. " checkout -q -b 'agent;touch${IFS}" .. root .. "/pwned'",
      "rm -f .git/logs/HEAD && ln -s " .. shq(home .. "/.bashrc") .. " .git/logs/HEAD",
      "ln -sf " .. shq(home .. "/msg") .. " .git/COMMIT_EDITMSG" }, " && ")).wait(120)
    assert.equal(0, status, out .. err)
    for _, p in ipairs({ "logs/HEAD", "COMMIT_EDITMSG" }) do
      assert.matches(p .. " (a symbolic link)", err, 1, true)
      assert.equal("file", (uv.fs_lstat(work .. "/.git/" .. p) or { type = "file" }).type, p)
    end
    assert.matches("git: " .. work .. "/.git: moved aside to " .. work .. "/.git/isolation-quarantine-", err, 1, true)
    -- the user's next commands, as that user
    user_sh(GIT .. " checkout -q main && " .. GIT .. " commit -q --allow-empty -m x && git log --oneline >/dev/null")
    assert.equal("original\n", helpers.read(home .. "/.bashrc"))
    assert.equal("original\n", helpers.read(home .. "/msg"))
    assert.is_false(helpers.exists(root .. "/pwned"))
  end)

  it("SIGTERM to isolate, the command and a setsid'd child ignoring it: isolate returns within the grace (5 s) "
    .. "and nothing of the sandbox runs (pgrep)", function()
    local mark = "isolation-unpriv-" .. helpers.pid() .. "-" .. uv.hrtime()
    local p = isolate({ "--network", "none" }, "trap '' TERM; setsid sh -c 'trap \"\" TERM; sleep 60' " .. mark
      .. " </dev/null >/dev/null 2>&1 & touch ready; sleep 60 # " .. mark)
    assert.is_true(cli.wait_for(function() return helpers.exists(work .. "/ready") or p.status ~= nil end, 60))
    assert.is_nil(p.status, p.err)
    -- both ignoring processes run
    assert.is_true(cli.wait_for(function() return #cli.pgrep(mark) >= 3 end, 10))
    local t0 = uv.hrtime()
    p.kill("sigterm")
    local status, out, err = p.wait(60)
    local took = (uv.hrtime() - t0) / 1e9
    assert.are.same({}, cli.pgrep(mark), "a process of the sandbox outlived isolate\n" .. out .. err)
    assert.are_not.equal(0, status)
    assert.is_true(took >= 4 and took < 15, ("took %.1f s"):format(took))
  end)

  it("a setuid (and a setgid) copy of bash made inside: chmod refused (EPERM), no file comes back with the bit",
    function()
      local status, out, err = isolate({ "--network", "none" }, "cp /bin/bash helper && cp /bin/bash ghelper; "
        .. "chmod 4755 helper; echo u=$?; chmod 2755 ghelper; echo g=$?; chmod u+s helper; echo us=$?; "
        .. "stat -c '%a' helper ghelper").wait(120)
      assert.equal(0, status, out .. err)
      assert.matches("u=1\ng=1\nus=1\n", out, 1, true)
      for _, f in ipairs({ "helper", "ghelper" }) do
        local m = math.tointeger(assert(uv.fs_lstat(work .. "/" .. f)).mode) & 4095
        assert.equal(0, m & 3072, f .. " came back with mode " .. ("%o"):format(m))
        assert.equal(65534, assert(uv.fs_lstat(work .. "/" .. f)).uid)
      end
    end)
end)
