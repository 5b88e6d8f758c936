-- The kernel's keyrings from inside a real bwrap sandbox (issue 18, item 2).
-- Keyrings are not per sandbox: a session keyring is inherited by every
-- child, across bwrap's user namespace too, and root's user keyring is
-- reachable by id. Keys are planted outside (keyctl add ... @s in a session
-- keyring of the spec's own, and @u for root), then an agent's shell tries
-- to print, read, add, unlink and request keys inside, through each way a
-- sandbox is launched: isolate, a wrap() line with the filter file, and the
-- session manager's line. Each fails with EPERM, the host's keys are
-- unchanged after, and the same line with the narrower TTY filter shows
-- the secret (the spec can fail). The planted keys are removed after.
local isolation = require("isolation")
local helpers = require("helpers")
local cli = require("support.cli")
local session = require("isolation.session")

local q = helpers.shquote

local SECRET = "isolation-spec-secret-" .. tostring(os.time())

-- Runs inside: prints one line per attempt, "<attempt> => <status> <output>".
-- $K: the session key's id, $U: the user key's id (both planted outside).
local ATTEMPTS = [[
try() { out=$(keyctl "$@" 2>&1); echo "$* => $? $(printf '%s' "$out" | tr '\n' ' ')"; }
try print "$K"
try read "$K"
try pipe "$K"
try describe "$K"
try show @s
try add user planted-inside x @s
try unlink "$K" @s
try request user spec-session-key
try newring inner @s
try print "$U"
try update "$U" overwritten
try revoke "$K"
cat /proc/keys 2>/dev/null | grep -c spec-session-key
true
]]

local N_ATTEMPTS = 12

describe("kernel keyrings in a real bwrap sandbox", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end
  if helpers.run("command -v keyctl") ~= 0 then
    it("is skipped: no keyctl", function() pending("keyutils is not installed (EXTRA_DEBS in mk/kernel.mk)") end)
    return
  end
  local root_user = helpers.run("test \"$(id -u)\" = 0") == 0

  local T, work, home, filters, user_key
  setup(function()
    T = helpers.tmpdir()
    assert(os.execute("chmod 755 " .. q(T)))
    work, home, filters = T .. "/work", T .. "/home", T .. "/filters"
    assert(os.execute("mkdir -p " .. q(work) .. " " .. q(home) .. " " .. q(filters)
      .. " && chown 65534:65534 " .. q(work) .. " " .. q(home)))
    helpers.write(filters .. "/sandbox.bpf", isolation.sandbox_seccomp_filter())
    helpers.write(filters .. "/tty.bpf", isolation.tty_seccomp_filter())
    helpers.write(work .. "/attempts.sh", ATTEMPTS)
    if root_user then
      -- the user keyring: every root process's, whatever its session
      local code, out, err = helpers.run("keyctl add user spec-user-key " .. q(SECRET .. "-u") .. " @u")
      assert.are.equal(0, code, err)
      user_key = out:match("%d+")
    end
  end)

  teardown(function()
    if user_key then helpers.run("keyctl unlink " .. user_key .. " @u") end
    helpers.rmtree(T)
  end)

  -- Runs `launch` (a shell command line that starts a sandbox running
  -- attempts.sh) in a fresh session keyring holding a planted key, as root
  -- or as nobody; returns the attempts' output and what the session keyring
  -- holds afterwards (key descriptions and the planted payload).
  local function with_planted_session(launch, as_user)
    local inner = "K=$(keyctl add user spec-session-key " .. q(SECRET) .. " @s) || exit 97; export K; "
      .. "export U=" .. (as_user and "0" or (user_key or "0")) .. "; "
      .. launch .. "; echo '--- after'; keyctl rdescribe @s >/dev/null && keyctl list @s; keyctl print \"$K\"; true"
    local cmd = "keyctl session isolation-spec bash -c " .. q(inner)
    if as_user then
      cmd = "setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=" .. q(home) .. " " .. cmd
    end
    local code, out, err = helpers.run("cd " .. q(work) .. " && " .. cmd)
    assert.are.equal(0, code, err)
    local inside, after = out:match("^(.-)%-%-%- after\n(.*)$")
    assert.is_truthy(inside, out)
    return inside, after
  end

  local function assert_all_refused(inside, after)
    -- the planted key's id reached the sandbox (env_pass): each attempt names it
    assert.matches("print %d+ => ", inside)
    local n = 0
    for line in inside:gmatch("[^\n]+=> [^\n]*") do
      n = n + 1
      assert.matches("=> 1 .*Operation not permitted", line)
    end
    assert.are.equal(N_ATTEMPTS, n, inside)
    assert.is_nil(inside:find(SECRET, 1, true), inside)
    -- /proc/keys lists nothing either
    assert.matches("\n0\n$", "\n" .. inside)
    -- outside, the session keyring still holds exactly the planted key, intact
    assert.matches("spec%-session%-key", after)
    assert.is_nil(after:find("planted-inside", 1, true), after)
    assert.is_nil(after:find("inner", 1, true), after)
    assert.is_truthy(after:find(SECRET .. "\n", 1, true), after)
    if user_key then
      local code, out = helpers.run("keyctl print " .. user_key)
      assert.are.equal(0, code)
      assert.are.equal(SECRET .. "-u\n", out)
    end
  end

  local function wrap_line(file)
    return assert(isolation.wrap({ config = { mode = "bwrap", network = "allow" }, workdir = work,
      command = "bash attempts.sh", seccomp_file = file, env_pass = { "K", "U" } }))
  end

  for _, who in ipairs({ "root", "an ordinary user" }) do
    local as_user = who ~= "root"
    describe("launched by " .. who, function()
      if as_user and helpers.run("command -v setpriv") ~= 0 then
        it("is skipped: no setpriv", function() pending("setpriv(1) is not installed") end)
        return
      end
      if not root_user then
        it("is skipped: the spec plants keys for root and nobody", function() pending("not root") end)
        return
      end

      it("control: the narrower TTY filter leaves the keyrings open (print, add, unlink work)", function()
        local inside = with_planted_session("HOME=" .. q(home) .. " sh -c " .. q(wrap_line(filters .. "/tty.bpf")),
          as_user)
        assert.is_truthy(inside:find("print " .. "%d+ => 0 " .. SECRET:gsub("%-", "%%-")), inside)
        assert.matches("add user planted%-inside x @s => 0 ", inside)
        assert.matches("unlink %d+ @s => 0 ", inside)
      end)

      it("isolate: print, read, add, unlink, request, update, revoke all fail with EPERM; host keys unchanged",
        function()
        local inside, after = with_planted_session("HOME=" .. q(home) .. " " .. q(cli.ISOLATE)
          .. " --network allow --env K --env U -- bash attempts.sh", as_user)
        assert_all_refused(inside, after)
      end)

      it("isolate --network deny: the same", function()
        local inside, after = with_planted_session("HOME=" .. q(home) .. " " .. q(cli.ISOLATE)
          .. " --env K --env U -- bash attempts.sh", as_user)
        assert_all_refused(inside, after)
      end)

      it("a wrap() line with seccomp_file = sandbox_seccomp_filter(): the same", function()
        local inside, after = with_planted_session("HOME=" .. q(home) .. " sh -c "
          .. q(wrap_line(filters .. "/sandbox.bpf")), as_user)
        assert_all_refused(inside, after)
      end)
    end)
  end

  it("the session manager's line (its default filter file): the same", function()
    if not root_user then return pending("not root") end
    local dir = T .. "/run"
    local line
    local mgr = assert(session.manager({ runtime_dir = dir, launcher = function(cmdline)
      line = cmdline
      return {}
    end, alive = function() return true end }))
    local s = assert(mgr:launch({ id = "k", isolation = { mode = "bwrap", network = "allow" }, workdir = work,
      command = "bash attempts.sh", env_pass = { "K", "U" } }))
    assert.is_truthy(line:find("sandbox-seccomp.bpf", 1, true), line)
    local inside, after = with_planted_session("HOME=" .. q(home) .. " sh -c " .. q(line), false)
    assert_all_refused(inside, after)
    assert(mgr:kill(s.id))
    mgr:close()
  end)
end)
