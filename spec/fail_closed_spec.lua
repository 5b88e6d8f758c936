-- A value decoded from JSON that merely looks false (null, 0, "false",
-- "no", "") never turns isolation off or down: only the booleans and the
-- exact strings of the contract decide. cjson.null is a light userdata, so
-- a Lua truthiness test takes it for true; the issue found a queued attempt
-- with {"in_sandbox": null} run unsandboxed (spec/scheduler_spec.lua).
-- These are the other places where a decoded value decides a security
-- choice, each with every look-alike value.
local cjson = require("cjson")
local helpers = require("helpers")
local policy = require("isolation.policy")

local LOOK_ALIKES = {
  { "cjson.null", cjson.null }, { "false", false }, { "0", 0 }, { '"false"', "false" }, { '"no"', "no" },
  { '""', "" }, { '"none"', "none" }, { "an array", setmetatable({}, policy.array_mt) },
}

local BWRAP = { mode = "bwrap", network = "deny", allow_hosts = {} }

describe("policy: a falsy-looking isolation is an error, never no isolation", function()
  for _, case in ipairs(LOOK_ALIKES) do
    local name, v = case[1], case[2]
    if v ~= cjson.null then -- null means "the project default", tested below
      it("effective(default, " .. name .. ") is nil, err", function()
        local cfg, err = policy.effective(BWRAP, v)
        assert.is_nil(cfg, name)
        assert.matches("isolation", err)
      end)

      it("patch_project with isolation " .. name .. " is nil, err and leaves the default", function()
        local p = { default_isolation_json = '{"mode":"bwrap","network":"allow"}' }
        assert.is_nil(policy.patch_project(p, { isolation = v }))
        assert.equal('{"mode":"bwrap","network":"allow"}', p.default_isolation_json)
      end)

      it("for_continuation of a saved launch whose isolation is " .. name .. " is nil, err", function()
        assert.is_nil(policy.for_continuation({ isolation = v }))
      end)
    end
  end

  it("a null override or a null saved isolation is what the API says: the default, and none", function()
    assert.same(BWRAP, policy.effective(BWRAP, cjson.null))
    assert.same(BWRAP, policy.session_isolation({ default_isolation_json = assert(policy.json_encode(BWRAP)) },
      '{"isolation": null}'))
  end)

  it("a stored default that is not JSON text is nil, err, not no isolation", function()
    for _, v in ipairs({ false, 0, true, {} }) do
      assert.is_nil(policy.project_default({ default_isolation_json = v }))
    end
  end)

  it("yolo must be a boolean: \"no\", 0 and \"false\" are refused, not saved for a reader that tests truth", function()
    for _, v in ipairs({ "no", 0, "false", "", 1 }) do
      assert.is_nil(policy.encode_launch({ yolo = v }))
      assert.is_nil(policy.decode_launch('{"yolo":' .. assert(policy.json_encode(v)) .. '}'))
    end
  end)
end)

describe("session manager: falsy-looking request fields", function()
  local launchers = require("support.launchers")
  local c, root, mgr

  before_each(function()
    c = launchers.counting()
    root, mgr = c.root, c.mgr
  end)
  after_each(function() c:close() end)

  local function request(extra)
    local r = { id = "s", workdir = root .. "/work", command = "true",
      project = { default_isolation_json = '{"mode":"bwrap","network":"allow"}' } }
    for k, v in pairs(extra) do r[k] = v end
    return r
  end

  for _, v in ipairs({ "no", 0, "false", "" }) do
    it("refuses yolo = " .. string.format("%q", v) .. " before anything starts", function()
      local s, err = mgr:launch(request({ yolo = v }))
      assert.is_nil(s)
      assert.matches("yolo", err, 1, true)
      assert.equal(0, c.launched)
    end)
  end

  for _, case in ipairs(LOOK_ALIKES) do
    local name, v = case[1], case[2]
    if v ~= cjson.null then
      it("refuses isolation = " .. name .. " and continuation = " .. name .. " (no silent opt-out)", function()
        assert.is_nil(mgr:launch(request({ isolation = v })))
        assert.is_nil(mgr:launch(request({ continuation = v })))
        assert.equal(0, c.launched)
      end)
    end
  end

  it("gives a null isolation the project default (bwrap), not none", function()
    local s = assert(mgr:launch(request({ isolation = cjson.null, yolo = cjson.null })))
    assert.equal("bwrap", s.isolation.mode)
    assert.equal("🔒 bwrap", s.badge)
  end)
end)

describe("isolate --config: null and falsy-looking values", function()
  local cli = require("support.cli")
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  local function dry_run(text)
    helpers.write(dir .. "/c.json", text)
    return cli.isolate({ "--config", dir .. "/c.json", "--dry-run", "--json", "--", "true" }, { cwd = dir })
  end

  it("takes a null mode or network for not given: bwrap and deny, isolate's defaults", function()
    local code, out, err = dry_run('{"mode": null, "network": null}')
    assert.equal(0, code, err)
    -- the reaper, the clean environment's `env -i ...`, then bwrap
    assert.matches('^%[".-/isolation%-bridge", "%-%-reap", "5", "%-%-env", "%-%-", "%-i", .-, "bwrap", '
      .. '"%-%-ro%-bind"', out)
    assert.truthy(out:find('"--unshare-net"', 1, true), out)
  end)

  for _, v in ipairs({ "false", "0", '"none"', '"false"', '"no"', "[]", "{}" }) do
    it("refuses mode " .. v .. " and network " .. v, function()
      local code, _, err = dry_run('{"mode": ' .. v .. '}')
      assert.equal(2, code)
      assert.matches("mode", err, 1, true)
      if v ~= '"none"' then -- network "none" is a value of its own: no route at all
        code, _, err = dry_run('{"mode": "bwrap", "network": ' .. v .. '}')
        assert.equal(2, code)
        assert.matches("network", err, 1, true)
      end
    end)
  end
end)
