-- The host kernel as a sandbox sees it through /proc: real bwrap sandboxes
-- from wrap() lines, launched by root and by an ordinary user (nobody, via
-- setpriv), each trying what an agent with a shell would to change the
-- host's kernel settings or read what the host keeps beyond the pid
-- namespace. Issue 18, item 1: bwrap 0.8.0 leaves /proc/sys writable for a
-- root launch (its read-only remount is skipped when access(W_OK) fails on
-- the directory) and a sysctl file checks only the owner, so uid 0 with no
-- capability changed the host's core_pattern.
local isolation = require("isolation")
local helpers = require("helpers")

local q = helpers.shquote

-- A few settings the issue named, read on the host before and after.
local WATCHED = {
  "fs/lease-break-time", "kernel/core_pattern", "kernel/randomize_va_space",
  "fs/protected_symlinks", "net/ipv4/ip_forward",
}

local function host_values()
  local out = {}
  for _, name in ipairs(WATCHED) do out[name] = helpers.read("/proc/sys/" .. name) end
  return out
end

-- Every file under /proc/sys with a write bit that reads: a write of the
-- value it holds (the same value: on a sandbox that leaks, the spec must not
-- change the host). Prints "wrote PATH" for each write that got through and
-- "tried N" at the end.
local SYSCTL_SWEEP = [[
n=0
while IFS= read -r -d '' f; do
  v=$(cat "$f" 2>/dev/null) || continue
  n=$((n+1))
  if (printf '%s\n' "$v" > "$f") 2>/dev/null; then echo "wrote $f"; fi
done < <(find /proc/sys -xdev -type f -perm /222 -print0 2>/dev/null)
echo "tried $n"
]]

describe("/proc in a real bwrap sandbox", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end
  local code0 = helpers.run("command -v setpriv")
  local T, home, work, uhome, uwork

  setup(function()
    T = helpers.tmpdir()
    -- reachable by nobody: the ordinary user's sandbox binds these
    assert(os.execute("chmod 755 " .. q(T)))
    home, work = T .. "/home", T .. "/work"
    uhome, uwork = T .. "/uhome", T .. "/uwork"
    assert(os.execute("mkdir -p " .. q(home) .. " " .. q(work) .. " " .. q(uhome) .. " " .. q(uwork)
      .. " && chown 65534:65534 " .. q(uhome) .. " " .. q(uwork)))
  end)

  teardown(function() helpers.rmtree(T) end)

  local function line_for(cmd, dir)
    return assert(isolation.wrap({ config = { mode = "bwrap" }, workdir = dir, command = cmd }))
  end

  -- Runs cmd (bash) in a sandbox as root, or as nobody when as_user.
  -- `around` wraps the launch on the host (e.g. a throwaway network
  -- namespace around the whole sandbox).
  local function sandbox(cmd, as_user, around)
    if as_user then
      return helpers.run("setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=" .. q(uhome)
        .. " /bin/sh -c " .. q(line_for(cmd, uwork)))
    end
    return helpers.run((around or "") .. " env HOME=" .. q(home) .. " /bin/sh -c " .. q(line_for(cmd, work)))
  end

  for _, who in ipairs({ "root", "an ordinary user" }) do
    local as_user = who ~= "root"
    describe("launched by " .. who, function()
      if as_user and code0 ~= 0 then
        it("is skipped: no setpriv", function() pending("setpriv(1) is not installed") end)
        return
      end

      it("every writable-looking file under /proc/sys refuses a write of its own value", function()
        local before = host_values()
        -- as root, in a throwaway network namespace around the sandbox, so
        -- that /proc/sys/net is not the host's even where the sweep gets in
        local around = (not as_user) and "unshare -n" or nil
        local code, out, err = sandbox(SYSCTL_SWEEP, as_user, around)
        assert.are.equal(0, code, err)
        local tried = tonumber(out:match("tried (%d+)"))
        assert.is_true(tried ~= nil and tried > 100, "the sweep read too few files: " .. out)
        assert.are.equal("", (out:gsub("tried %d+\n$", "")), "writes got through")
        assert.are.same(before, host_values())
      end)

      it("cannot write kernel/core_pattern (the host's, in the host's network namespace too)", function()
        local before = host_values()
        local code, out, err = sandbox("p=$(cat /proc/sys/kernel/core_pattern); "
          .. "printf '%s\\n' \"$p\" > /proc/sys/kernel/core_pattern && echo WROTE; "
          .. "printf '%s\\n' \"$(cat /proc/sys/net/ipv4/ip_forward)\" > /proc/sys/net/ipv4/ip_forward "
          .. "&& echo WROTE-NET; true", as_user)
        assert.are.equal(0, code, err)
        assert.are.equal("", out)
        assert.matches("Read%-only file system", err)
        assert.are.same(before, host_values())
      end)

      it("cannot make /proc/sys writable: remount, unmount, a new procfs, a nested user namespace", function()
        local code, out, err = sandbox(table.concat({
          "mount -o remount,rw /proc/sys 2>/dev/null && echo REMOUNTED",
          "umount /proc/sys 2>/dev/null && echo UNMOUNTED",
          "mkdir -p /tmp/p && mount -t proc proc /tmp/p 2>/dev/null && echo NEWPROC",
          "unshare -U true 2>/dev/null && echo USERNS",
          "unshare -Urmpf --mount-proc true 2>/dev/null && echo USERNS-PROC",
          "printf 45 2>/dev/null > /proc/1/root/proc/sys/fs/lease-break-time && echo VIA-PID1",
          "cat /proc/sys/kernel/ostype",
        }, "; "), as_user)
        assert.are.equal(0, code, err)
        -- /proc/sys still reads: tools that look at settings keep working
        assert.are.equal("Linux\n", out)
      end)

      it("cannot write the other kernel knobs: sysrq-trigger, irq, bus, fs", function()
        local code, out, err = sandbox([[
knobs=$(find /proc/irq /proc/bus /proc/fs /proc/acpi /proc/scsi -xdev -type f -perm /222 2>/dev/null)
for f in /proc/sysrq-trigger $knobs; do
  [ -e "$f" ] || continue
  (: > "$f") 2>/dev/null && echo "opened $f"
done; true]], as_user)
        assert.are.equal(0, code, err)
        assert.are.equal("", out)
      end)

      it("reads nothing from the masked files: timer_list, interrupts, keys", function()
        -- the host shows them (the spec can fail)
        assert.is_true(#(helpers.read("/proc/interrupts") or "") > 0)
        local code, out, err = sandbox("for f in /proc/timer_list /proc/interrupts /proc/keys; do "
          .. "[ -e \"$f\" ] || { echo \"missing $f\"; continue; }; cat \"$f\" 2>/dev/null; done; true", as_user)
        assert.are.equal(0, code, err)
        assert.are.equal("", out)
      end)

      it("holds no capability, and no bounding set to regain one from", function()
        local code, out, err = sandbox("grep '^Cap' /proc/self/status", as_user)
        assert.are.equal(0, code, err)
        for _, set in ipairs({ "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" }) do
          assert.matches(set .. ":%s+0000000000000000\n", out)
        end
      end)
    end)
  end

  it("dry_run names each /proc guard", function()
    local text = assert(isolation.dry_run({ config = { mode = "bwrap" }, workdir = work, command = "true" }))
    for _, p in ipairs({ "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/acpi",
      "/proc/scsi", "/proc/asound" }) do
      assert.is_truthy(text:find("read-only  " .. p .. " -> " .. p .. "  (", 1, true), p)
    end
    for _, p in ipairs({ "/proc/timer_list", "/proc/interrupts", "/proc/keys" }) do
      assert.is_truthy(text:find("/dev/null -> " .. p .. "  (masked", 1, true), p)
    end
  end)
end)
