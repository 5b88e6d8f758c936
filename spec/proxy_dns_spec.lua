-- Name lookups: on resolver threads of each proxy's own, not on libuv's
-- pool (which lets the whole process run 2 getaddrinfo at a time); names in
-- /etc/hosts answered without any lookup. Each case runs a child process
-- in a network namespace the spec makes (spec/support/dns_netns.sh), whose
-- resolv.conf names a stub in that child (dns_stub.lua): it answers
-- ok.example.com, dns-only.example.net and both.example.net, and never
-- answers any other name. Nothing leaves loopback. (issue 26, item 6)
local netns = require("support.dns_netns")

local CHILD = "spec/support/dns_child.lua"

-- /etc/hosts in the namespace, past localhost and b.example.net: an alias in
-- another case, a name on two lines (the first address refuses: nothing
-- listens on 127.0.0.2), a name the stub answers otherwise, a commented
-- line, a scoped IPv6 address (skipped: glibc's too).
local HOSTS = table.concat({
  "127.0.0.1 one.example.net Alias.Example.NET # a comment",
  "127.0.0.2 two.example.net",
  "127.0.0.1\ttwo.example.net",
  "127.0.0.1 both.example.net",
  "# 127.0.0.1 gone.example.net",
  "fe80::1%lo scoped.example.net",
}, "\n")

describe("isolation.proxy name lookups", function()
  local function skip_unless_netns()
    local why = netns.unavailable()
    if why then pending(why) end
    return why
  end

  it("one proxy's lookups that hang hold its own threads only: another proxy's lookup, its own /etc/hosts"
    .. " names and a luv-mode proxy's lookup are answered at once, its next lookup waits in its queue"
    .. " (504 after dns_timeout), libuv's pool full of hanging lookups delays none, close() waits for none",
    function()
      if skip_unless_netns() then return end
      -- glibc: 3 s for a name the server does not answer, one try
      local r = netns.run({ CHILD, "bound" }, { DNS_NETNS_OPTIONS = "timeout:3 attempts:1" }, 60)
      print(("\n  B's lookup while A's 4 threads hang: %s ms; A's /etc/hosts name: %s ms; A's queued"
        .. " lookup: %s after %s ms; with libuv's pool full: %s ms; close: %s ms"):format(r.b_ms, r.a_hosts_ms,
        r.a_queued_code, r.a_queued_ms, r.pool_busy_ms, r.close_ms))
      assert.are.equal("ok", r["end"], r.text)
      -- libuv's pool held by this process's own hanging lookups (before:
      -- the proxy's lookup waited behind them, 504)
      assert.are.equal(200, r.pool_busy_status, r.text)
      assert.are.equal(0, r.pool_busy_finished, r.text)
      -- A: 5 lookups that hang, at most 4 threads
      assert.are.equal(4, r.threads_added_a, r.text)
      -- B, A's /etc/hosts name and a luv-mode proxy: answered (before: 504)
      assert.are.equal(200, r.b_status, r.text)
      assert.are.equal(200, r.a_hosts_status, r.text)
      assert.are.equal(200, r.luv_status, r.text)
      -- A's next lookup waits in A's queue; its dns_timeout (1 s) runs
      -- from the request
      assert.are.equal(504, r.a_queued_status, r.text)
      assert.are.equal("dns_timeout", r.a_queued_code, r.text)
      assert.is_true(r.a_queued_ms >= 900 and r.a_queued_ms < 2500, r.text)
      -- once the hanging lookups end, A looks names up again
      assert.are.equal(200, r.a_after_status, r.text)
      -- close() with lookups hanging returns at once; their threads end
      -- when the lookups do
      assert.is_true(r.close_ms < 1000, r.text)
      assert.are.equal(0, r.threads_left, r.text)
    end)

  it("answers names in /etc/hosts without a lookup (aliases in any case, every line of a name), asks the name"
    .. " server for the rest, and checks those answers for private addresses like any other", function()
    if skip_unless_netns() then return end
    local r = netns.run({ CHILD, "hosts" }, { DNS_NETNS_HOSTS = HOSTS }, 60)
    assert.are.equal("ok", r["end"], r.text)
    -- "status pong code tunnel-address"
    assert.are.equal("200 true allowed 127.0.0.1", r["alias.example.net"], r.text)
    assert.are.equal("200 true allowed 127.0.0.1", r["two.example.net"], r.text) -- 127.0.0.2 refused first
    assert.are.equal("200 true allowed 127.0.0.1", r["both.example.net"], r.text) -- the stub says 127.0.0.2
    assert.are.equal("200 true allowed 127.0.0.1", r["dns-only.example.net"], r.text)
    assert.are.equal("504 false dns_timeout -", r["gone.example.net"], r.text)
    -- only dns-only.example.net reached the stub as a name it answers
    assert.are.equal(2, r.dns_answered, r.text) -- its A and AAAA queries
    assert.are.equal(403, r.strict_status, r.text)
    assert.are.equal("private_address", r.strict_code, r.text)
  end)

  it("leaves /etc/hosts to getaddrinfo when nsswitch.conf asks the name server first", function()
    if skip_unless_netns() then return end
    local r = netns.run({ CHILD, "hosts" }, { DNS_NETNS_HOSTS = HOSTS, DNS_NETNS_NSSWITCH = "dns files" }, 60)
    assert.are.equal("ok", r["end"], r.text)
    -- the stub's 127.0.0.2 wins (nothing listens there), as it does for
    -- every other program on this system
    assert.are.equal("502 false connect_failed -", r["both.example.net"], r.text)
    -- a name the name server does not answer waits for it (glibc would
    -- read /etc/hosts only after the server's timeout)
    assert.are.equal("504 false dns_timeout -", r["alias.example.net"], r.text)
  end)
end)
