-- Host patterns and host matching: isolation.host_allowed, and the address
-- classes behind the proxy's private-address rule (isolation._private_address,
-- internal, exposed for these specs).
local isolation = require("isolation")

local deep_copy = require("support.tables").deep_copy

local function allowed(patterns, host, port)
  if type(patterns) == "string" then patterns = { patterns } end
  local ok, err = isolation.host_allowed(patterns, host, port)
  assert(ok ~= nil, err)
  return ok
end

describe("host patterns", function()
  describe("valid patterns", function()
    local valid = {
      "example.com", "EXAMPLE.COM", "example.com.", "*.example.com", "*.example.com.",
      "example.com:443", "*.example.com:8443", "a-b.example.com", "_svc.example.com",
      "xn--bcher-kva.example", "localhost", "10.0.0.1", "10.0.0.1:8080", "0.0.0.0",
      "255.255.255.255", "[::1]", "[::1]:9110", "[2001:db8::1]", "[::ffff:10.0.0.1]",
      "10.0.0.0/8", "0.0.0.0/0", "192.168.1.0/24", "10.1.2.3/32", "fd00::/8", "::/0",
      "2001:db8::/32", "2001:db8::1/128", "a.b.c.d.e.f.example.net", "example.com:65535",
      "example.com:1", ("a"):rep(63) .. ".example.com", "*.com", "9gag.example.com",
      "a.b1", "x.0x1g",
    }
    for _, p in ipairs(valid) do
      it("accepts " .. string.format("%q", p), function()
        local ok, err = isolation.host_allowed({ p }, "unrelated.example.org", 443)
        assert.is_false(ok, err)
      end)
    end

    it("accepts a name of exactly 253 bytes and refuses 254", function()
      local label = ("a"):rep(61)
      local name253 = table.concat({ label, label, label, label }, ".") .. "." .. ("b"):rep(5)
      assert.are.equal(253, #name253)
      assert.is_true(allowed(name253, name253, 443))
      assert.is_true(allowed(name253 .. ".", name253, 443))
      local ok, err = isolation.host_allowed({ name253 .. "b" }, "x.example.com", 443)
      assert.is_nil(ok)
      assert.matches("longer than 253", err, 1, true)
    end)
  end)

  describe("invalid patterns", function()
    -- pattern -> a word the reason must contain
    local invalid = {
      { "", "empty" },
      { "http://example.com", "scheme" },
      { "https://example.com:443", "scheme" },
      { "example.com/path", "CIDR" },
      { "user@example.com", "userinfo" },
      { "user:pw@example.com", "userinfo" },
      { " example.com", "whitespace" },
      { "example.com ", "whitespace" },
      { "exa mple.com", "whitespace" },
      { "example..com", "empty" },
      { ".example.com", "empty" },
      { "example.com..", "empty" },
      { ".", "empty" },
      { "*", "'*'" },
      { "*.", "followed by a name" },
      { "*example.com", "'*'" },
      { "a.*.example.com", "'*'" },
      { "*.*.example.com", "'*'" },
      { "example.*", "'*'" },
      { "**.example.com", "'*'" },
      { "example.com:0", "port" },
      { "example.com:65536", "port" },
      { "example.com:99999", "port" },
      { "example.com:abc", "port" },
      { "example.com:", "port" },
      { "example.com:-1", "port" },
      { "example.com:080", "port" },
      { "example.com:443:443", "brackets" },
      { "::1", "brackets" },
      { "2001:db8::1", "brackets" },
      { "[::1", "']'" },
      { "[::1]x", "port" },
      { "[::1]:0", "port" },
      { "[fe80::1%eth0]", "zone" },
      { "[1.2.3.4]", "IPv6" },
      { "[example.com]", "IPv6" },
      { "[]", "IPv6" },
      { "127.1", "canonical" },
      { "2130706433", "canonical" },
      { "0x7f000001", "canonical" },
      { "0177.0.0.1", "canonical" },
      { "1.2.3.04", "canonical" },
      { "1.2.3", "canonical" },
      { "1.2.3.4.5", "canonical" },
      { "256.0.0.1", "canonical" },
      { "0x7f.0.0.1", "canonical" },
      { "example.123", "last label" },
      { "example.0x10", "last label" },
      { "127.0.0.1.", "canonical" },
      { "-example.com", "'-'" },
      { "example-.com", "'-'" },
      { "exa!mple.com", "character" },
      { "ex\"ample.com", "character" },
      { ("a"):rep(64) .. ".com", "63" },
      { "*.10.0.0.1", "wildcard" },
      { "*.10.0.0.1:80", "wildcard" },
      { "10.0.0.1/8", "bits" },
      { "fd00::1/8", "bits" },
      { "10.0.0.0/33", "0..32" },
      { "fd00::/129", "0..128" },
      { "10.0.0.0/", "0..32" },
      { "10.0.0.0/08", "0..32" },
      { "10.0.0.0/8:80", "port" },
      { "fd00::/8:80", "port" },
      { "[fd00::]/8", "without brackets" },
      { "example.com/8", "CIDR" },
      { "127.1/8", "CIDR" },
      { "ex\tample.com", "whitespace" },
      -- a NUL byte ("ex\0ample.com"): the standard NUL message, spec/nul_spec.lua
      { "bücher.example", "non-ASCII" },
    }
    assert(#invalid >= 30)

    local function shown(p)
      return (p:gsub("[\\\"]", "\\%0"):gsub("[^\32-\126]", function(c)
        return string.format("\\x%02x", c:byte())
      end))
    end

    for _, case in ipairs(invalid) do
      local p, word = case[1], case[2]
      it("refuses " .. string.format("%q", p) .. " and names it", function()
        local list = { "ok.example.com", p }
        local before = deep_copy(list)
        local ok, err = isolation.host_allowed(list, "ok.example.com", 443)
        assert.is_nil(ok)
        assert.is_string(err)
        assert.matches("^isolation: patterns%[2%]: ", err)
        assert.is_truthy(err:find('host pattern "' .. shown(p) .. '" is invalid', 1, true), err)
        assert.is_truthy(err:find(word, 1, true), "reason should mention " .. word .. ": " .. err)
        assert.is_truthy(err:find("accepted:", 1, true), err)
        assert.are.same(before, list)
      end)
    end

    it("truncates a very long pattern in the message", function()
      local p = ("a"):rep(300) .. ".com"
      local ok, err = isolation.host_allowed({ p }, "x.example.com", 1)
      assert.is_nil(ok)
      assert.is_truthy(err:find(("a"):rep(96) .. '..."', 1, true), err)
      assert.is_true(#err < 400)
    end)
  end)

  describe("the pattern list", function()
    it("must be an array of strings", function()
      local ok, err = isolation.host_allowed({ a = "example.com" }, "example.com", 443)
      assert.is_nil(ok)
      assert.matches("patterns must be an array", err, 1, true)
      ok, err = isolation.host_allowed({ "example.com", nil, "example.net" }, "example.com", 443)
      assert.is_nil(ok)
      assert.matches("patterns must be an array", err, 1, true)
      ok, err = isolation.host_allowed({ "example.com", 42 }, "example.com", 443)
      assert.is_nil(ok)
      assert.matches("patterns[2] must be a string (got number 42)", err, 1, true)
      ok, err = isolation.host_allowed({ "example.com", true }, "example.com", 443)
      assert.is_nil(ok)
      assert.matches("patterns[2] must be a string (got true)", err, 1, true)
      ok, err = isolation.host_allowed({ [1.5] = "x" }, "example.com", 443)
      assert.is_nil(ok)
      assert.matches("patterns must be an array", err, 1, true)
    end)

    it("raises for wrong argument types", function()
      assert.has_error(function() isolation.host_allowed("example.com", "example.com", 443) end)
      assert.has_error(function() isolation.host_allowed({}, nil, 443) end)
      assert.has_error(function() isolation.host_allowed({}, "example.com", "https") end)
      assert.has_error(function() isolation.host_allowed({}, "example.com", 1.5) end)
    end)

    it("empty matches nothing", function()
      assert.is_false(allowed({}, "example.com", 443))
      assert.is_false(allowed({}, "127.0.0.1", 443))
    end)

    it("does not change its arguments", function()
      local list = { "Example.COM.", "*.example.net:443", "10.0.0.0/8", "[::1]" }
      local before = deep_copy(list)
      assert.is_true(allowed(list, "example.com", 443))
      assert.is_true(allowed(list, "a.example.net", 443))
      assert.are.same(before, list)
    end)

    it("compiles a large list and finds every entry (hash collisions, many ports)", function()
      local list = {}
      for i = 1, 2000 do
        list[#list + 1] = "h" .. i .. ".example.com"
        list[#list + 1] = "*.w" .. i .. ".example.net:" .. (1000 + i)
      end
      for i = 1, 2000, 37 do
        assert.is_true(allowed(list, "h" .. i .. ".example.com", 1))
        assert.is_true(allowed(list, "x.w" .. i .. ".example.net", 1000 + i))
        assert.is_false(allowed(list, "x.w" .. i .. ".example.net", 1001 + i))
        assert.is_false(allowed(list, "w" .. i .. ".example.net", 1000 + i))
        assert.is_false(allowed(list, "h" .. i .. ".example.co", 1))
      end
      assert.is_false(allowed(list, "h0.example.com", 1))
      assert.is_false(allowed(list, "h2001.example.com", 1))
    end)
  end)

  describe("matching", function()
    it("is case-insensitive and ignores one trailing dot, on either side", function()
      assert.is_true(allowed("Example.COM", "example.com", 443))
      assert.is_true(allowed("example.com", "EXAMPLE.com", 443))
      assert.is_true(allowed("example.com.", "example.com", 443))
      assert.is_true(allowed("example.com", "example.com.", 443))
      assert.is_true(allowed("*.EXAMPLE.com", "A.b.example.COM.", 443))
      assert.is_false(allowed("example.com", "example.com..", 443))
    end)

    it("matches exact names only exactly", function()
      assert.is_false(allowed("example.com", "a.example.com", 443))
      assert.is_false(allowed("example.com", "example.com.evil.example.net", 443))
      assert.is_false(allowed("example.com", "xexample.com", 443))
      assert.is_false(allowed("a.example.com", "example.com", 443))
    end)

    it("matches a wildcard at any depth, never the apex", function()
      assert.is_true(allowed("*.example.com", "a.example.com", 443))
      assert.is_true(allowed("*.example.com", "a.b.c.example.com", 443))
      assert.is_false(allowed("*.example.com", "example.com", 443))
      assert.is_false(allowed("*.example.com", "example.com.", 443))
      assert.is_false(allowed("*.example.com", "aexample.com", 443))
      assert.is_false(allowed("*.example.com", "example.com.example.net", 443))
      assert.is_true(allowed({ "*.example.com", "example.com" }, "example.com", 443))
    end)

    it("honours ports: with a port only that port, without any port", function()
      assert.is_true(allowed("example.com:443", "example.com", 443))
      assert.is_false(allowed("example.com:443", "example.com", 80))
      assert.is_true(allowed("example.com", "example.com", 80))
      assert.is_true(allowed("example.com", "example.com", 65535))
      assert.is_true(allowed({ "example.com:80", "example.com:443" }, "example.com", 80))
      assert.is_true(allowed({ "example.com:80", "example.com:443" }, "example.com", 443))
      assert.is_false(allowed({ "example.com:80", "example.com:443" }, "example.com", 8080))
      assert.is_true(allowed("*.example.com:8443", "a.example.com", 8443))
      assert.is_false(allowed("*.example.com:8443", "a.example.com", 443))
    end)

    it("without a port argument, only port-less patterns match", function()
      assert.is_true(allowed("example.com", "example.com"))
      assert.is_false(allowed("example.com:443", "example.com"))
      assert.is_false(allowed({ "example.com:1", "example.com:2" }, "example.com"))
      assert.is_true(allowed("10.0.0.0/8", "10.9.9.9"))
      assert.is_false(allowed("[::1]:80", "::1"))
    end)

    it("treats an out-of-range port as not allowed", function()
      for _, port in ipairs({ 0, -1, 65536, 1e6 }) do
        assert.is_false(allowed("example.com", "example.com", port))
      end
    end)

    it("matches IPv4 literals and CIDR blocks", function()
      assert.is_true(allowed("10.0.0.1", "10.0.0.1", 1))
      assert.is_false(allowed("10.0.0.1", "10.0.0.2", 1))
      assert.is_true(allowed("10.0.0.1:8080", "10.0.0.1", 8080))
      assert.is_false(allowed("10.0.0.1:8080", "10.0.0.1", 8081))
      assert.is_true(allowed("10.0.0.0/8", "10.255.255.255", 1))
      assert.is_false(allowed("10.0.0.0/8", "11.0.0.0", 1))
      assert.is_true(allowed("192.168.4.0/22", "192.168.7.1", 1))
      assert.is_false(allowed("192.168.4.0/22", "192.168.8.1", 1))
      assert.is_true(allowed("0.0.0.0/0", "203.0.113.9", 1))
      assert.is_false(allowed("0.0.0.0/0", "::1", 1))
      assert.is_true(allowed("10.1.2.3/32", "10.1.2.3", 1))
      assert.is_false(allowed("10.1.2.3/32", "10.1.2.4", 1))
    end)

    it("matches IPv6 literals, bracketed or not, in any spelling", function()
      assert.is_true(allowed("[::1]", "::1", 1))
      assert.is_true(allowed("[::1]", "[::1]", 1))
      assert.is_true(allowed("[::1]", "0:0:0:0:0:0:0:1", 1))
      assert.is_true(allowed("[2001:DB8::1]:443", "[2001:db8:0::1]", 443))
      assert.is_false(allowed("[2001:db8::1]:443", "2001:db8::1", 80))
      assert.is_true(allowed("fd00::/8", "fdff:1::2", 1))
      assert.is_false(allowed("fd00::/8", "fe00::1", 1))
      assert.is_true(allowed("2001:db8::/33", "2001:db8:7fff::1", 1))
      assert.is_false(allowed("2001:db8::/33", "2001:db8:8000::1", 1))
      assert.is_true(allowed("::/0", "2001:db8::1", 1))
      assert.is_false(allowed("::/0", "10.0.0.1", 1))
    end)

    it("keeps IPv4 and IPv4-mapped IPv6 apart", function()
      assert.is_false(allowed("10.0.0.1", "::ffff:10.0.0.1", 1))
      assert.is_false(allowed("[::ffff:10.0.0.1]", "10.0.0.1", 1))
      assert.is_true(allowed("[::ffff:10.0.0.1]", "::ffff:a00:1", 1))
    end)

    it("lets an IP literal host match only IP and CIDR patterns", function()
      assert.is_false(allowed({ "localhost" }, "127.0.0.1", 80))
      assert.is_false(allowed({ "example.com" }, "93.184.215.14", 443))
      assert.is_true(allowed({ "example.com", "127.0.0.1" }, "127.0.0.1", 80))
      -- and a name never matches an IP pattern
      assert.is_false(allowed({ "127.0.0.0/8", "[::1]" }, "localhost", 80))
    end)

    it("refuses numeric host forms that are not canonical IP literals", function()
      local every = { "127.0.0.0/8", "0.0.0.0/0", "::/0", "*.example.com" }
      for _, host in ipairs({ "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "1.2.3.04",
        "1.2.3", "127.0.0.1.", "0x7f.1", "example.0x10", "1.0.0.1.example.123" }) do
        assert.is_false(allowed(every, host, 80), host)
      end
    end)

    it("gives false for malformed hosts instead of raising", function()
      local every = { "*.example.com", "example.com", "0.0.0.0/0", "::/0" }
      for _, host in ipairs({ "", ".", "example.com:443", "[::1]:443", "a..example.com",
        "a b.example.com", "a.example.com\0", "[fe80::1%eth0]", "fe80::1%eth0", "[::1",
        "::1]", "[10.0.0.1]", "*.example.com", "http://a.example.com", "a@a.example.com",
        ("a"):rep(64) .. ".example.com", ("a."):rep(130) .. "example.com" }) do
        assert.is_false(allowed(every, host, 443), host)
      end
    end)
  end)
end)

describe("private address classes", function()
  local private = {
    -- IPv4
    "0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.255",
    "127.0.0.1", "127.255.255.254", "169.254.169.254", "169.254.0.1", "172.16.0.1",
    "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.168.0.1", "198.18.0.1", "198.19.255.255",
    "198.51.100.7", "203.0.113.7", "224.0.0.1", "239.255.255.250", "240.0.0.1",
    "255.255.255.255",
    -- IPv6
    "::", "::1", "fe80::1", "febf::1", "fc00::1", "fd12:3456::1", "ff02::1", "ff0e::1",
    "fec0::1", "100::1", "2001:db8::1", "3fff::1",
    -- embedded IPv4, private inside
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
    "::ffff:0:10.0.0.1", "64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::8.8.8.8",
    "2002:7f00:1::1", "2002:a9fe:a9fe::", "2002:c0a8:101::",
    -- Teredo: client 10.0.0.1 is stored inverted (f5ff:fffe); server 192.168.1.1
    "2001:0:808:808::f5ff:fffe", "2001:0:c0a8:101::f7f7:f7f7",
  }
  local public = {
    "8.8.8.8", "1.1.1.1", "93.184.215.14", "100.63.255.255", "100.128.0.0", "172.15.255.255",
    "172.32.0.0", "169.253.255.255", "192.167.255.255", "198.17.255.255", "198.20.0.0",
    "223.255.255.255", "11.0.0.0", "126.255.255.255", "128.0.0.0",
    "2606:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8",
    "2002:808:808::1", "2001:0:808:808::f7f7:f7f7",
  }
  for _, a in ipairs(private) do
    it(a .. " is private", function()
      assert.is_true(isolation._private_address(a))
    end)
  end
  for _, a in ipairs(public) do
    it(a .. " is public", function()
      assert.is_false(isolation._private_address(a))
    end)
  end
  it("accepts bracketed IPv6 and refuses names and numeric shorthands", function()
    assert.is_true(isolation._private_address("[::1]"))
    for _, bad in ipairs({ "localhost", "127.1", "2130706433", "0x7f000001", "", "[::1]:80" }) do
      local ok, err = isolation._private_address(bad)
      assert.is_nil(ok)
      assert.matches("isolation: address", err, 1, true)
    end
  end)
end)
