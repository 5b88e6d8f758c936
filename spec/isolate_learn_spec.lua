-- isolate --learn, driven for real (bwrap deny sandbox, the proxy, three
-- loopback upstreams): a command reaches three hosts that nobody put on the
-- allowlist; learn mode admits them, prints exactly their host:ports, and
-- those options admit them again under deny while a fourth host is refused.
--
-- The names are pinned to 127.0.0.1 with --resolve. Learn mode admits a
-- host that is not on the list, not an address: a name resolving to
-- loopback is still refused by the private-address rule, so the runs admit
-- the loopback address itself with the IP pattern 127.0.0.1 (what a real
-- upstream on a public address does not need). A name pinned to 127.0.0.2,
-- which that pattern does not admit, and a tunnel whose TLS server name is
-- not its CONNECT host are refused in learn mode too, each with its own
-- code, and are not learned.
local cjson = require("cjson")
local helpers = require("helpers")
local isolate_run = require("support.isolate_run")

local NAMES = { "one.example.com", "two.example.com", "three.example.com" }
local FOURTH = "four.example.com"
local PRIVATE = "private.example.com" -- pinned to 127.0.0.2
local SNI_HOST = "tunnel.example.com" -- CONNECTed to; the ClientHello names another

describe("isolate --learn", function()
  local fx, tmp, home, ups
  before_each(function()
    fx = isolate_run.new(3)
    tmp, home, ups = fx.tmp, fx.home, fx.ups
  end)
  after_each(function() fx:close() end)

  local function run(extra, script)
    local head = isolate_run.resolve(NAMES, nil, { "--workdir", tmp, "--allow-host", "127.0.0.1" })
    for _, a in ipairs({ "--resolve", FOURTH .. ":127.0.0.1", "--resolve", PRIVATE .. ":127.0.0.2",
      "--resolve", SNI_HOST .. ":127.0.0.1" }) do
      head[#head + 1] = a
    end
    return fx:sh(head, extra, script)
  end

  local curl = isolate_run.curl_code

  local function log_lines(path)
    local out = {}
    for l in io.lines(path) do out[#out + 1] = cjson.decode(l) end
    return out
  end

  it("admits three unlisted hosts, prints exactly them, and they alone pass a rerun under deny", function()
    if helpers.skip_without_bwrap() then return end
    local script = ""
    for i, n in ipairs(NAMES) do script = script .. curl("http://" .. n .. ":" .. ups[i].port .. "/learn", n) end
    -- still refused in learn mode: a loopback address no pattern admits,
    -- and a ClientHello for another name than the CONNECT host
    script = script .. curl("http://" .. PRIVATE .. ":" .. ups[1].port .. "/private", "private")
    script = script .. curl("https://other.example.net:" .. ups[1].port .. "/", "sni",
      "--connect-to other.example.net:" .. ups[1].port .. ":" .. SNI_HOST .. ":" .. ups[1].port .. " ") .. "true"
    local log = home .. "/learn.log" -- not in the workdir (spec/hostpaths_spec.lua)
    local status, out, err = run({ "--learn", "--log", log }, script)
    assert.are.equal(0, status, err)
    assert.are.equal("one.example.com 200\ntwo.example.com 200\nthree.example.com 200\nprivate 403\nsni 000\n", out)
    assert.truthy(err:find("^isolate: learn mode: the proxy admits every host that is not on the allowlist"), err)
    for i = 1, 3 do assert.are.same({ "GET /learn HTTP/1.1" }, ups[i].requests()) end

    -- exactly the three host:ports, as options and as a config
    local want = {}
    for i, n in ipairs(NAMES) do want[i] = n .. ":" .. ups[i].port end
    local line = err:match("isolate: learn mode: the command used 3 hosts; these options admit them:\n"
      .. "isolate:   ([^\n]*)\n")
    assert.truthy(line, err)
    local learned = {}
    for h in line:gmatch("%-%-allow%-host (%S+)") do learned[#learned + 1] = h end
    assert.are.same(want, learned)
    assert.are.equal("--allow-host " .. table.concat(want, " --allow-host "), line)
    local config = err:match("isolate: or, in a %-%-config file:\nisolate:   ([^\n]*)\n")
    assert.are.same({ allow_hosts = want }, cjson.decode(config))

    -- the refusals, each with its own code, in the summary and in the log
    assert.truthy(err:find("isolate:   " .. PRIVATE .. ":" .. ups[1].port .. " -> 127.0.0.2 (loopback) (1)", 1, true),
      err)
    assert.truthy(err:find("isolate:   " .. SNI_HOST .. ":" .. ups[1].port .. " (1): sni_mismatch: ", 1, true), err)
    local kinds = {}
    for _, e in ipairs(log_lines(log)) do kinds[#kinds + 1] = e.type .. " " .. e.code .. " " .. e.host end
    assert.are.same({ "report not_allowed one.example.com", "report not_allowed two.example.com",
      "report not_allowed three.example.com", "deny private_address " .. PRIVATE,
      "deny sni_mismatch " .. SNI_HOST }, kinds)

    -- rerun under deny with what was printed: the three pass, a fourth does not
    local extra = {}
    for h in line:gmatch("%-%-allow%-host (%S+)") do
      extra[#extra + 1] = "--allow-host"
      extra[#extra + 1] = h
    end
    script = ""
    for i, n in ipairs(NAMES) do script = script .. curl("http://" .. n .. ":" .. ups[i].port .. "/again", n) end
    script = script .. curl("http://" .. FOURTH .. ":" .. ups[1].port .. "/fourth", "fourth")
    status, out, err = run(extra, script)
    assert.are.equal(0, status, err)
    assert.are.equal("one.example.com 200\ntwo.example.com 200\nthree.example.com 200\nfourth 403\n", out)
    assert.truthy(err:find("not on the allowlist (admit one with --allow-host HOST):\nisolate:   " .. FOURTH .. ":"
      .. ups[1].port .. " (1)\n", 1, true), err)
    assert.falsy(err:find("learn mode", 1, true), err)
    for i = 1, 3 do assert.are.same({ "GET /learn HTTP/1.1", "GET /again HTTP/1.1" }, ups[i].requests()) end
  end)

  it("says so when the command used no host", function()
    if helpers.skip_without_bwrap() then return end
    local status, _, err = run({ "--learn" }, "true")
    assert.are.equal(0, status, err)
    assert.truthy(err:find("isolate: learn mode: the command made no request through the proxy\n", 1, true), err)
  end)

  it("--learn and --log need the proxy (bwrap, network deny)", function()
    for _, opt in ipairs({ { "--learn" }, { "--log", tmp .. "/x.log" } }) do
      local args = { "--network", "allow" }
      for _, a in ipairs(opt) do args[#args + 1] = a end
      args[#args + 1] = "--"
      args[#args + 1] = "true"
      local status, _, err = fx:isolate(args)
      assert.are.equal(2, status, err)
      assert.truthy(err:find(opt[1] .. " has no effect here", 1, true), err)
    end
  end)
end)
