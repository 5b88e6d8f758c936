local cjson = require("cjson")
local policy = require("isolation.policy")

local NONE = { mode = "", network = "allow" }
local BWRAP_DENY = { mode = "bwrap", network = "deny", allow_hosts = { "example.com" } }

-- A project whose default was set through the PATCH path.
local function project_with(default)
  local p = { id = "p1", name = "demo" }
  assert(policy.patch_project(p, { isolation = default }))
  return p
end

local function deepcopy(t)
  if type(t) ~= "table" then return t end
  local c = {}
  for k, v in pairs(t) do c[k] = deepcopy(v) end
  return setmetatable(c, getmetatable(t))
end

describe("policy.effective", function()
  it("uses the project default when the override is absent", function()
    assert.same(BWRAP_DENY, policy.effective(BWRAP_DENY, nil))
  end)

  it("uses the project default when the override is JSON null", function()
    assert.same(BWRAP_DENY, policy.effective(BWRAP_DENY, cjson.null))
  end)

  it("gives no isolation when there is neither a default nor an override", function()
    assert.same(NONE, policy.effective(nil, nil))
    assert.same(NONE, policy.effective(cjson.null, cjson.null))
  end)

  it("lets a table override replace the default, normalized", function()
    assert.same({ mode = "docker", network = "allow", docker_image = "debian:bookworm-slim" },
      policy.effective(BWRAP_DENY, { mode = "docker" }))
  end)

  it("treats {mode = ''} as an explicit opt-out even when the default is sandboxed", function()
    assert.same(NONE, policy.effective(BWRAP_DENY, { mode = "" }))
  end)

  it("returns nil and a message naming the field for an invalid override", function()
    local cfg, err = policy.effective(BWRAP_DENY, { mode = "bwrap", network = "block" })
    assert.is_nil(cfg)
    assert.matches("network", err)
    assert.matches("block", err)
    cfg, err = policy.effective(nil, { mode = "bwrap", colour = "red" })
    assert.is_nil(cfg)
    assert.matches("colour", err)
    cfg, err = policy.effective(nil, "bwrap")
    assert.is_nil(cfg)
    assert.matches("isolation must be an object or null", err)
  end)

  it("changes neither argument and returns a new table", function()
    local default, override = deepcopy(BWRAP_DENY), { mode = "bwrap" }
    local cfg = policy.effective(default, nil)
    cfg.allow_hosts[1] = "changed.example.net"
    cfg.mode = "docker"
    assert.same(BWRAP_DENY, default)
    policy.effective(default, override)
    assert.same({ mode = "bwrap" }, override)
  end)
end)

describe("policy.project_default", function()
  it("is no isolation when default_isolation_json is nil or empty", function()
    assert.same(NONE, policy.project_default({}))
    assert.same(NONE, policy.project_default({ default_isolation_json = "" }))
  end)

  it("reads the stored JSON as a normalized config", function()
    local p = { default_isolation_json = '{"mode":"bwrap","network":"deny","allow_hosts":["a.example.com"]}' }
    assert.same({ mode = "bwrap", network = "deny", allow_hosts = { "a.example.com" } }, policy.project_default(p))
  end)

  it("returns nil, err for stored text that is not valid JSON or not a valid config", function()
    local cfg, err = policy.project_default({ default_isolation_json = '{"mode":' })
    assert.is_nil(cfg)
    assert.matches("default_isolation_json is not valid JSON", err)
    cfg, err = policy.project_default({ default_isolation_json = '{"mode":"vm"}' })
    assert.is_nil(cfg)
    assert.matches("mode", err)
  end)
end)

describe("policy.patch_project", function()
  it("stores the normalized config as JSON and returns the project", function()
    local p = { id = "p1" }
    assert.equal(p, policy.patch_project(p, { isolation = { mode = "docker" } }))
    assert.equal('{"docker_image":"debian:bookworm-slim","mode":"docker","network":"allow"}',
      p.default_isolation_json)
  end)

  it("accepts the body as JSON text", function()
    local p = {}
    assert.equal(p, policy.patch_project(p, '{"isolation": {"mode": "bwrap", "network": "deny"}}'))
    assert.same({ mode = "bwrap", network = "deny", allow_hosts = {} }, policy.project_default(p))
  end)

  it("stores an empty allow_hosts as a JSON array, not an object", function()
    local p = project_with({ mode = "bwrap", network = "deny" })
    assert.matches('"allow_hosts":%[%]', p.default_isolation_json)
    assert.is_nil(p.default_isolation_json:find('"allow_hosts":{}', 1, true))
  end)

  it("clears the default on {\"isolation\": null}", function()
    local p = project_with(BWRAP_DENY)
    assert.equal(p, policy.patch_project(p, '{"isolation": null}'))
    assert.is_nil(p.default_isolation_json)
    assert.same(NONE, policy.project_default(p))
    p = project_with(BWRAP_DENY)
    assert.equal(p, policy.patch_project(p, { isolation = cjson.null }))
    assert.is_nil(p.default_isolation_json)
  end)

  it("leaves the default alone for a body without isolation", function()
    local p = project_with(BWRAP_DENY)
    local before = p.default_isolation_json
    assert.equal(p, policy.patch_project(p, '{"name": "renamed"}'))
    assert.equal(before, p.default_isolation_json)
  end)

  local bad = {
    { "bad JSON", '{"isolation": {"mode": "bwrap"', "not valid JSON" },
    { "trailing garbage", '{"isolation": null} x', "not valid JSON" },
    { "a duplicate key", '{"isolation": null, "isolation": {"mode": "bwrap"}}', "duplicate key" },
    { "an unknown key", '{"isolation": {"mode": "bwrap", "netwrok": "deny"}}', "netwrok" },
    { "a wrong type", '{"isolation": {"mode": 1}}', "mode" },
    { "isolation not an object", '{"isolation": "bwrap"}', "isolation must be an object or null" },
    { "a body that is an array", '[{"isolation": null}]', "PATCH body must be a JSON object" },
    { "deny without a mode", '{"isolation": {"network": "deny"}}', "network" },
    { "an invalid host pattern", '{"isolation": {"mode": "bwrap", "network": "deny", "allow_hosts": ["http://x"]}}',
      "http://x" },
    { "allow_hosts as a map", '{"isolation": {"mode": "bwrap", "network": "deny", "allow_hosts": {"a": "b"}}}',
      "allow_hosts" },
    { "isolation as an empty array", '{"isolation": []}', "isolation must be an object or null (got an array)" },
  }
  for _, case in ipairs(bad) do
    it("refuses " .. case[1] .. " and leaves the project untouched", function()
      local p = project_with(BWRAP_DENY)
      local before = deepcopy(p)
      local r, err = policy.patch_project(p, case[2])
      assert.is_nil(r)
      assert.is_string(err)
      assert.matches(case[3], err, 1, true)
      assert.same(before, p)
    end)
  end

  it("takes an empty Lua table for allow_hosts as the empty array it is", function()
    local p = project_with(nil)
    assert.equal(p, policy.patch_project(p, { isolation = { mode = "bwrap", network = "deny", allow_hosts = {} } }))
    assert.same({ mode = "bwrap", network = "deny", allow_hosts = {} }, policy.project_default(p))
  end)

  it("takes an empty JSON object for allow_hosts as the empty array lua-cjson writes, and stores []", function()
    local p = project_with(nil)
    assert.equal(p, policy.patch_project(p, '{"isolation": {"mode": "bwrap", "network": "deny", "allow_hosts": {}}}'))
    assert.equal('{"allow_hosts":[],"mode":"bwrap","network":"deny"}', p.default_isolation_json)
  end)

  it("raises for a project that is not a table", function()
    assert.has_error(function() policy.patch_project("p1", {}) end)
  end)
end)

describe("policy.session_isolation", function()
  it("gives a fresh launch the project default when isolation is absent", function()
    local p = project_with(BWRAP_DENY)
    assert.same(BWRAP_DENY, policy.session_isolation(p, '{"agent": "claude", "command": "claude"}'))
    assert.same(BWRAP_DENY, policy.session_isolation(p, nil))
  end)

  it("gives the project default when isolation is null", function()
    local p = project_with(BWRAP_DENY)
    assert.same(BWRAP_DENY, policy.session_isolation(p, '{"isolation": null}'))
  end)

  it("lets an explicit opt-out win over a sandboxed default", function()
    local p = project_with(BWRAP_DENY)
    assert.same(NONE, policy.session_isolation(p, '{"isolation": {"mode": ""}}'))
  end)

  it("treats an empty object as an override (no isolation), unlike an absent one", function()
    local p = project_with(BWRAP_DENY)
    assert.same(NONE, policy.session_isolation(p, '{"isolation": {}}'))
    assert.same(BWRAP_DENY, policy.session_isolation(p, '{}'))
  end)

  it("lets an object override the default", function()
    local p = project_with(BWRAP_DENY)
    assert.same({ mode = "bwrap", network = "allow" }, policy.session_isolation(p, { isolation = { mode = "bwrap" } }))
  end)

  it("returns nil, err for an invalid override or body", function()
    local p = project_with(BWRAP_DENY)
    local cfg, err = policy.session_isolation(p, '{"isolation": {"mode": "vm"}}')
    assert.is_nil(cfg)
    assert.matches("mode", err)
    cfg, err = policy.session_isolation(p, "{")
    assert.is_nil(cfg)
    assert.matches("POST body is not valid JSON", err)
  end)
end)

describe("policy.encode_launch / decode_launch", function()
  local text = '{"extra":{"empty_array":[],"empty_object":{},"list":[1,2.5,-0.125,1.0,1e+100,null,true,"é\\n\\"q\\""],'
    .. '"nested":{"deep":[[]]}},"isolation":{"allow_hosts":[],"mode":"bwrap","network":"deny"},'
    .. '"profile_name":"default","yolo":false}'

  it("round-trips a launch configuration exactly, unknown fields included", function()
    local lc = assert(policy.decode_launch(text))
    assert.equal(text, policy.encode_launch(lc))
    assert.equal("default", lc.profile_name)
    assert.is_false(lc.yolo)
    assert.equal(cjson.null, lc.extra.list[6])
  end)

  it("keeps integers integers and floats floats", function()
    local lc = assert(policy.decode_launch('{"n":3,"f":3.0,"big":9007199254740993}'))
    assert.equal("integer", math.type(lc.n))
    assert.equal("float", math.type(lc.f))
    assert.equal(9007199254740993, lc.big)
    assert.equal('{"big":9007199254740993,"f":3.0,"n":3}', policy.encode_launch(lc))
  end)

  it("keeps an empty allow_hosts an array even in a table built in Lua", function()
    local lc = { profile_name = "p", yolo = true, isolation = { mode = "bwrap", network = "deny", allow_hosts = {} } }
    local json = assert(policy.encode_launch(lc))
    assert.matches('"allow_hosts":%[%]', json)
    local back = assert(policy.decode_launch(json))
    assert.same(lc, back)
    assert.equal(json, policy.encode_launch(back))
  end)

  it("gives the same text for the same value (sorted keys)", function()
    local a = policy.encode_launch({ yolo = true, profile_name = "x", z = 1, a = 2 })
    local b = policy.encode_launch({ a = 2, z = 1, profile_name = "x", yolo = true })
    assert.equal(a, b)
    assert.equal('{"a":2,"profile_name":"x","yolo":true,"z":1}', a)
  end)

  it("refuses, on decode, a launch configuration whose isolation is invalid", function()
    local lc, err = policy.decode_launch('{"profile_name":"p","isolation":{"mode":"bwrap","network":"block"}}')
    assert.is_nil(lc)
    assert.matches('network must be "allow", "deny" or "none"', err)
    lc, err = policy.decode_launch('{"isolation":{"mode":"bwrap","extra":1}}')
    assert.is_nil(lc)
    assert.matches("extra", err)
  end)

  it("refuses wrong types of the fields it knows, naming them", function()
    local lc, err = policy.decode_launch('{"profile_name": 7}')
    assert.is_nil(lc)
    assert.matches("profile_name must be a string", err)
    lc, err = policy.decode_launch('{"yolo": "yes"}')
    assert.is_nil(lc)
    assert.matches("yolo must be a boolean", err)
    lc, err = policy.encode_launch({ yolo = 1 })
    assert.is_nil(lc)
    assert.matches("yolo must be a boolean", err)
  end)

  it("refuses text that is not a JSON object", function()
    for _, t in ipairs({ "", "[]", "null", '"x"', "{} {}", '{"a":1,}', "{'a':1}", '{"a":01}', '{"a":"\1"}' }) do
      local lc, err = policy.decode_launch(t)
      assert.is_nil(lc, t)
      assert.matches("launch configuration", err)
    end
  end)

  it("refuses a value JSON cannot hold", function()
    local r, err = policy.encode_launch({ f = function() end })
    assert.is_nil(r)
    assert.matches("launch configuration.f cannot be written as JSON", err)
    r, err = policy.encode_launch({ n = 0 / 0 })
    assert.is_nil(r)
    assert.matches("finite", err)
    r, err = policy.encode_launch({ s = "\255" })
    assert.is_nil(r)
    assert.matches("UTF%-8", err)
  end)

  it("does not change the table it encodes", function()
    local lc = { isolation = { mode = "bwrap" }, tags = {} }
    local before = deepcopy(lc)
    assert(policy.encode_launch(lc))
    assert.same(before, lc)
    assert.is_nil(getmetatable(lc.tags))
  end)
end)

describe("policy.json_decode / json_encode limits", function()
  -- decode_launch must never accept what encode_launch cannot write back
  local function nested_arrays(n) return ("["):rep(n) .. ("]"):rep(n) end
  local function nested_objects(n) return ('{"a":'):rep(n - 1) .. "{}" .. ("}"):rep(n - 1) end
  local function nested_tables(n)
    local t = {}
    local at = t
    for _ = 2, n do
      at.a = {}
      at = at.a
    end
    return t
  end

  it("refuses a number that is not finite: 1e400, -1e400, a 400-digit float", function()
    for _, t in ipairs({ "1e400", "-1e400", "1.5e99999", "-2E+400", "1" .. ("0"):rep(400) .. ".0",
      "1" .. ("0"):rep(400) .. "e0" }) do
      for _, doc in ipairs({ t, "[" .. t .. "]", '{"n":' .. t .. "}" }) do
        local v, err = policy.json_decode(doc)
        assert.is_nil(v, doc:sub(1, 40))
        assert.matches("finite", err)
      end
      local lc, err = policy.decode_launch('{"extra":' .. t .. "}")
      assert.is_nil(lc)
      assert.matches("launch configuration", err)
    end
  end)

  it("refuses an integer beyond 64 bits (a million digits too) instead of rounding it", function()
    for _, t in ipairs({ "9223372036854775808", "-9223372036854775809", "18446744073709551616",
      ("9"):rep(400), ("9"):rep(1000000), "-" .. ("1"):rep(20) }) do
      local v, err = policy.json_decode(t)
      assert.is_nil(v, t:sub(1, 40))
      assert.matches("64 bits", err)
    end
  end)

  it("keeps the 64-bit integers at both ends and finite floats at their limits", function()
    assert.equal(math.maxinteger, policy.json_decode("9223372036854775807"))
    assert.equal(math.mininteger, policy.json_decode("-9223372036854775808"))
    assert.equal("integer", math.type(policy.json_decode("-9223372036854775808")))
    assert.equal(1e308, policy.json_decode("1e308"))
    assert.equal(-1.7976931348623157e308, policy.json_decode("-1.7976931348623157e308"))
    assert.equal(9.2233720368547758e18, policy.json_decode("9223372036854775808.0"))
    assert.equal(0.0, policy.json_decode("1e-400")) -- underflow is finite
    local lc = assert(policy.decode_launch('{"n":9223372036854775807,"f":1e308}'))
    assert.equal('{"f":1e+308,"n":9223372036854775807}', policy.encode_launch(lc))
  end)

  it("decodes exactly 64 levels of nesting and refuses 65", function()
    for _, make in ipairs({ nested_arrays, nested_objects }) do
      assert.is_table(policy.json_decode(make(64)))
      assert.is_table(policy.json_decode("[" .. make(63) .. ", 1]"))
      local v, err = policy.json_decode(make(65))
      assert.is_nil(v)
      assert.matches("nested too deeply", err)
    end
    -- a scalar inside 64 containers is at the limit, not beyond it
    assert.is_table(policy.json_decode(("["):rep(64) .. "1" .. ("]"):rep(64)))
    assert.is_table(policy.decode_launch(nested_objects(64)))
    assert.is_nil(policy.decode_launch(nested_objects(65)))
  end)

  it("encodes exactly 64 levels of nesting and refuses 65, as decode does", function()
    local text = assert(policy.json_encode(nested_tables(64)))
    assert.same(nested_tables(64), policy.json_decode(text))
    local v, err = policy.json_encode(nested_tables(65))
    assert.is_nil(v)
    assert.matches("nested too deeply", err)
    assert.is_nil(policy.encode_launch(nested_tables(65)))
  end)
end)

describe("policy.for_continuation", function()
  it("keeps the captured isolation, not a later edit of the project default", function()
    local p = project_with(BWRAP_DENY)
    local saved = policy.encode_launch({ profile_name = "p", isolation = policy.session_isolation(p, nil) })
    assert(policy.patch_project(p, { isolation = { mode = "docker" } }))
    assert.same(BWRAP_DENY, policy.for_continuation(saved, p))
  end)

  it("keeps a captured opt-out even when the project later becomes sandboxed", function()
    local p = project_with(nil)
    local saved = { isolation = policy.session_isolation(p, nil) }
    assert(policy.patch_project(p, { isolation = BWRAP_DENY }))
    assert.same(NONE, policy.for_continuation(saved, p))
  end)

  it("gives no isolation for a saved launch from before isolation existed", function()
    local p = project_with(BWRAP_DENY)
    assert.same(NONE, policy.for_continuation('{"profile_name":"p","yolo":true}', p))
    assert.same(NONE, policy.for_continuation({ isolation = cjson.null }, p))
  end)

  it("returns nil, err for an invalid saved launch", function()
    local cfg, err = policy.for_continuation('{"isolation":{"mode":"vm"}}', {})
    assert.is_nil(cfg)
    assert.matches("mode", err)
    cfg, err = policy.for_continuation(42, {})
    assert.is_nil(cfg)
    assert.matches("continuation", err)
  end)
end)

describe("policy.badge", function()
  it("is nil without isolation", function()
    assert.is_nil(policy.badge({ mode = "" }))
    assert.is_nil(policy.badge(nil))
  end)

  it("names the tier, and adds deny when the network is denied", function()
    assert.equal("🔒 bwrap", policy.badge({ mode = "bwrap" }))
    assert.equal("🔒 docker", policy.badge({ mode = "docker", network = "allow" }))
    assert.equal("🔒 bwrap · deny", policy.badge({ mode = "bwrap", network = "deny" }))
    assert.equal("🔒 docker · deny", policy.badge({ mode = "docker", network = "deny" }))
  end)
end)
