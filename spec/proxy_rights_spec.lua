-- A descriptor is the one thing a sandboxed process could make the proxy's
-- thread wait on: the kernel closes what the proxy does not take in the
-- proxy's own thread, and the last close() of a TCP socket with SO_LINGER
-- and unsent bytes whose peer never reads waits for the linger time (up
-- to for ever), stopping every proxy on that loop, and in luv mode the
-- orchestrator itself. Tried from inside real deny sandboxes, with
-- spec/support/handover.py: a lingering TCP socket sent with an ordinary
-- request, a listener of the sandbox's own after the starter's handover,
-- a connected socket. The proxy's socket takes no descriptor once the
-- starter's listeners are in (SO_PASSRIGHTS, Linux 6.16): the kernel
-- refuses each send with EPERM, and the proxy keeps answering.
local helpers = require("helpers")
local cli = require("support.cli")

local SUPPORT = assert(require("luv").fs_realpath("spec/support"))

local function rights_refusable()
  return os.execute("python3 -c 'import socket; socket.socket(socket.AF_UNIX)"
    .. ".setsockopt(socket.SOL_SOCKET, 83, 0)' 2>/dev/null") == true
end

describe("from inside isolate's deny sandbox (bridge pass, the proxy sealed)", function()
  local tmp
  before_each(function() tmp = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(tmp) end)

  it("no descriptor reaches the proxy: a lingering socket, a listener, a connected socket are refused by "
    .. "the kernel, and the proxy keeps answering", function()
    if helpers.skip_without_bwrap() then return end
    if not rights_refusable() then return pending("no SO_PASSRIGHTS in this kernel (before 6.16)") end
    local h = SUPPORT .. "/handover.py"
    local script = table.concat({
      "for k in lingering listener connected http_with_fd; do",
      "  printf '%s=' $k; python3 " .. h .. " /run/isolation/proxy.sock $k | head -1",
      "done",
      -- the proxy still answers, at once: a denied name gets its 403
      "curl -s -o /dev/null -m 5 -w 'after=%{http_code}\\n' http://blocked.example.net/",
    }, "\n")
    local t0 = os.time()
    local status, out, err = cli.isolate({ "--network", "deny", "--workdir", tmp, "--ro-bind", SUPPORT,
      "--", "bash", "-c", script }, { env = { "TMPDIR=" .. tmp }, timeout = 90 })
    assert.are.equal(0, status, err)
    for _, k in ipairs({ "lingering", "listener", "connected", "http_with_fd" }) do
      assert.truthy(out:find(k .. "=send-refused:EPERM\n", 1, true), k .. ": " .. out .. err)
    end
    assert.truthy(out:find("after=403\n", 1, true), out .. err)
    assert.is_true(os.time() - t0 < 30, "the run took " .. (os.time() - t0) .. " s")
  end)
end)
