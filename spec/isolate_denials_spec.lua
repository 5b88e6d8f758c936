-- isolate's exit summary of the proxy's denials, driven for real (bwrap
-- deny sandbox, the proxy, a loopback upstream): a host that is not on the
-- allowlist and an allowed name refused for the address it resolves to
-- need different fixes, and the summary must name the right one. The
-- allowed name is pinned to the upstream's loopback address with
-- --resolve (the proxy's `resolve` option), so no DNS is involved.
local helpers = require("helpers")
local cli = require("support.cli")
local isolate_run = require("support.isolate_run")

local PINNED = "pinned.example.com"

describe("isolate's denial summary", function()
  local fx, tmp, up
  before_each(function()
    fx = isolate_run.new(1)
    tmp, up = fx.tmp, fx.up
  end)
  after_each(function() fx:close() end)

  local function run(extra, script)
    return fx:sh({ "--workdir", tmp, "--resolve", PINNED .. ":127.0.0.1", "--allow-host", PINNED }, extra, script)
  end

  local curl = isolate_run.curl_code

  it("separates hosts not on the allowlist from allowed names refused for their address", function()
    if helpers.skip_without_bwrap() then return end
    local pinned_url = "http://" .. PINNED .. ":" .. up.port .. "/x"
    local status, out, err = run({}, curl(pinned_url, "pinned") .. curl("http://" .. PINNED .. ":" .. up.port
      .. "/y", "pinned") .. curl("http://unlisted.example.com/", "unlisted"))
    assert.are.equal(0, status, err)
    assert.are.equal("pinned 403\npinned 403\nunlisted 403\n", out)
    assert.are.same({}, up.requests())
    -- the host not on the list, with the one fix for it
    assert.truthy(err:find("isolate: the proxy denied 1 request to 1 host not on the allowlist (admit one with "
      .. "--allow-host HOST):\nisolate:   unlisted.example.com:80 (1)\n", 1, true), err)
    -- the allowed name: its address and both ways to admit it, never "--allow-host <that name>"
    local want = "isolate: the proxy refused 2 requests to 1 host on the allowlist for the address it resolves to"
    assert.truthy(err:find(want, 1, true), err)
    assert.truthy(err:find("IP/CIDR --allow-host", 1, true), err)
    assert.truthy(err:find("--allow-private", 1, true), err)
    assert.truthy(err:find("isolate:   " .. PINNED .. ":" .. up.port .. " -> 127.0.0.1 (loopback) (2); admit with "
      .. "--allow-host 127.0.0.1:" .. up.port .. "\n", 1, true), err)
    assert.falsy(err:find("--allow-host " .. PINNED, 1, true), err)
    -- the not-on-the-list section does not list the allowed name
    local first = err:match("not on the allowlist.-\n(.-)isolate: the proxy refused")
    assert.truthy(first, err)
    assert.falsy(first:find(PINNED, 1, true), first)
  end)

  it("--verbose: the event's reason names the address", function()
    if helpers.skip_without_bwrap() then return end
    local status, out, err = run({ "--verbose" }, curl("http://" .. PINNED .. ":" .. up.port .. "/", "pinned"))
    assert.are.equal(0, status, err)
    assert.are.equal("pinned 403\n", out)
    assert.truthy(err:find("deny GET " .. PINNED .. ":" .. up.port .. " 403 (" .. PINNED
      .. " resolves to a loopback address (127.0.0.1)", 1, true), err)
    assert.falsy(err:find("the proxy refused", 1, true), err)
  end)

  it("the suggested IP --allow-host admits it, and so does --allow-private", function()
    if helpers.skip_without_bwrap() then return end
    local url = "http://" .. PINNED .. ":" .. up.port .. "/ip"
    local status, out, err = run({ "--allow-host", "127.0.0.1:" .. up.port }, curl(url, "ip"))
    assert.are.equal(0, status, err)
    assert.are.equal("ip 200\n", out)
    assert.falsy(err:find("refused", 1, true), err)
    url = "http://" .. PINNED .. ":" .. up.port .. "/private"
    status, out, err = run({ "--allow-private" }, curl(url, "private"))
    assert.are.equal(0, status, err)
    assert.are.equal("private 200\n", out)
    assert.falsy(err:find("refused", 1, true), err)
    assert.are.same({ "GET /ip HTTP/1.1", "GET /private HTTP/1.1" }, up.requests())
  end)

  it("an IP --allow-host with another port does not admit it", function()
    if helpers.skip_without_bwrap() then return end
    local status, out, err = run({ "--allow-host", "127.0.0.1:1" },
      curl("http://" .. PINNED .. ":" .. up.port .. "/", "pinned"))
    assert.are.equal(0, status, err)
    assert.are.equal("pinned 403\n", out)
    assert.truthy(err:find("the proxy refused 1 request", 1, true), err)
  end)

  for _, case in ipairs({
    { "--allow-private without the proxy", { "--network", "allow", "--allow-private", "--", "true" },
      "%-%-allow%-private has no effect" },
    { "--resolve without the proxy", { "--mode", "none", "--resolve", "a.example.com:10.0.0.1", "--", "true" },
      "%-%-resolve has no effect" },
    { "--resolve without an address", { "--resolve", "a.example.com", "--", "true" }, "%-%-resolve must be" },
    { "--resolve with a bad address", { "--resolve", "a.example.com:1.2.3", "--", "true" }, "%-%-resolve" },
  }) do
    it("usage error: " .. case[1], function()
      local args = { "--workdir", tmp }
      for _, a in ipairs(case[2]) do args[#args + 1] = a end
      local status, out, err = cli.isolate(args)
      assert.are.equal(2, status, err)
      assert.are.equal("", out)
      assert.truthy(err:match("^isolate: [^\n]*\n$"), err)
      assert.truthy(err:find(case[3]), err)
    end)
  end
  it("the agent reads the refusal: curl inside shows X-Isolation-Error and the option that admits the host", function()
    if helpers.skip_without_bwrap() then return end
    -- HTTP forward request and HTTPS (CONNECT) to hosts off the allowlist,
    -- then an allowed name refused for its address
    local status, out, err = run({}, "curl -s -i --max-time 20 http://unlisted.example.com:8080/x; echo; echo ==; "
      .. "curl -s -v --max-time 20 https://unlisted.example.net/ 2>&1; echo ==; "
      .. "curl -s -i --max-time 20 http://" .. PINNED .. ":" .. up.port .. "/x")
    assert.are.equal(0, status, err)
    local plain, tls, pinned = out:match("^(.-)\n==\n(.-)==\n(.*)$")
    assert.truthy(plain, out)
    assert.truthy(plain:find("^HTTP/1.1 403 Forbidden\r\n"), plain)
    assert.truthy(plain:find("\r\nX%-Isolation%-Error: not_allowed\r\n"), plain)
    assert.truthy(plain:find("\nhost: unlisted.example.com:8080\n", 1, true), plain)
    assert.truthy(plain:find("to allow it: isolate --allow-host unlisted.example.com:8080\n", 1, true), plain)
    -- curl shows a refused CONNECT's head with -v
    assert.truthy(tls:find("X-Isolation-Error: not_allowed", 1, true), tls)
    assert.truthy(pinned:find("\r\nX%-Isolation%-Error: private_address\r\n"), pinned)
    assert.truthy(pinned:find("--allow-private", 1, true), pinned)
    assert.truthy(pinned:find("--allow-host 127.0.0.1:" .. up.port, 1, true), pinned)
    assert.are.same({}, up.requests())
  end)
end)
