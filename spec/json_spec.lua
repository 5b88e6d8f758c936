-- isolation.json, the strict codec that policy, session and isolate share:
-- what lua-cjson 2.1.0 cannot do (tell [] from {}, keep integers, refuse
-- duplicate keys) and the limits every decoder here relies on.
local cjson = require("cjson")
local json = require("isolation.json")

local function refused(pattern, v, err)
  assert.is_nil(v)
  assert.is_string(err)
  assert.matches("^isolation: ", err)
  assert.matches(pattern, err)
end

local function nested_arrays(n) return ("["):rep(n) .. ("]"):rep(n) end

local function nested_tables(n)
  local t = {}
  for _ = 2, n do t = { t } end
  return t
end

describe("isolation.json", function()
  describe("[] and {}", function()
    it("round-trips an empty array as [] and an empty object as {}, at any depth", function()
      for _, text in ipairs({ "[]", "{}", '{"a":[],"b":{}}', "[[],{},[[]]]", '{"x":{"y":[{}]}}' }) do
        local v = assert(json.decode(text))
        assert.equal(text, json.encode(v))
      end
    end)

    it("marks decoded arrays with array_mt, objects with nothing", function()
      local v = assert(json.decode('{"a":[],"o":{}}'))
      assert.equal(json.array_mt, getmetatable(v.a))
      assert.is_nil(getmetatable(v.o))
      assert.is_nil(getmetatable(v))
    end)

    it("writes an unmarked empty Lua table as {}, whatever its key (no allow_hosts case)", function()
      assert.equal("{}", json.encode({}))
      assert.equal('{"allow_hosts":{}}', json.encode({ allow_hosts = {} }))
      assert.equal('{"allow_hosts":[]}', json.encode({ allow_hosts = setmetatable({}, json.array_mt) }))
      assert.equal('["a","b"]', json.encode({ "a", "b" }))
    end)

    it("refuses a table that mixes array items and keys", function()
      -- unmarked, it is an object whose key 1 is not a string
      refused("has a key that is not a string %(1%)", json.encode({ 1, 2, x = 3 }, "list"))
      refused("^isolation: list mixes array items and keys", json.encode(setmetatable({ 1, x = 3 }, json.array_mt),
        "list"))
      refused("not a string", json.encode({ [1] = 1, [3] = 3 }, "sparse"))
    end)
  end)

  describe("numbers", function()
    it("keeps integers integers and floats floats", function()
      local v = assert(json.decode('{"n":3,"f":3.0,"e":1e2,"big":9007199254740993,"neg":-0.125}'))
      assert.equal("integer", math.type(v.n))
      assert.equal("float", math.type(v.f))
      assert.equal("float", math.type(v.e))
      assert.equal(9007199254740993, v.big)
      assert.equal("integer", math.type(v.big))
      assert.equal('{"big":9007199254740993,"e":100.0,"f":3.0,"n":3,"neg":-0.125}', json.encode(v))
    end)

    it("takes the 64-bit integer limits exactly and refuses what lies beyond them", function()
      assert.equal(math.maxinteger, json.decode("9223372036854775807"))
      assert.equal(math.mininteger, json.decode("-9223372036854775808"))
      refused("beyond 64 bits", json.decode("9223372036854775808"))
      refused("beyond 64 bits", json.decode("-9223372036854775809"))
      assert.equal("9223372036854775807", json.encode(math.maxinteger))
    end)

    it("writes floats that read back equal, and refuses non-finite ones", function()
      for _, n in ipairs({ 0.1, 1 / 3, 1e300, -2.5e-300, 2 ^ 53 + 0.0 }) do
        local back = json.decode(assert(json.encode(n)))
        assert.equal(n, back)
        assert.equal("float", math.type(back))
      end
      refused("finite", json.encode(math.huge, "n"))
      refused("finite", json.encode(0 / 0, "n"))
      refused("not finite", json.decode("1e400"))
      refused("trailing characters at byte 2", json.decode("01")) -- no leading zeros
      refused("unexpected character", json.decode("+1"))
    end)
  end)

  describe("keys", function()
    it("refuses a duplicate key, at the top and nested, naming it", function()
      refused('duplicate key "a"', json.decode('{"a":1,"a":2}', "doc"))
      refused('duplicate key "k"', json.decode('{"x":[{"k":1,"k":1}]}'))
      -- the same key spelled with an escape is the same key
      refused('duplicate key "a"', json.decode('{"a":1,"\\u0061":2}'))
    end)

    it("writes keys sorted: the same value gives the same text", function()
      local t = { zeta = 1, alpha = { b = 2, a = 1 }, mid = true }
      assert.equal('{"alpha":{"a":1,"b":2},"mid":true,"zeta":1}', json.encode(t))
    end)

    it("refuses keys that are not strings", function()
      refused("not a string", json.encode({ [true] = 1 }, "t"))
    end)
  end)

  describe("NUL and control bytes", function()
    it("keeps a NUL inside a string value, escaped", function()
      local v = assert(json.decode('["a\\u0000b"]'))
      assert.equal("a\0b", v[1])
      assert.equal('["a\\u0000b"]', json.encode(v))
    end)

    it("refuses a NUL in an object key, decoding and encoding", function()
      refused("NUL byte", json.decode('{"a\\u0000b":1}'))
      refused("NUL byte", json.encode({ ["a\0b"] = 1 }, "t"))
    end)

    it("refuses a raw control byte inside a string", function()
      for _, b in ipairs({ 0, 1, 9, 10, 13, 31 }) do
        refused("control character", json.decode('"a' .. string.char(b) .. 'b"'))
      end
    end)

    it("escapes every control byte on encode, and reads them all back", function()
      local s = {}
      for b = 0, 127 do s[#s + 1] = string.char(b) end
      s = table.concat(s)
      local text = assert(json.encode(s))
      assert.is_nil(text:find("[%z\1-\31\127]"), text)
      assert.equal(s, json.decode(text))
      assert.equal(s, cjson.decode(text)) -- and another parser agrees
      assert.equal('"\\b\\f\\n\\r\\t\\u0001\\u007f/"', json.encode("\b\f\n\r\t\1\127/"))
    end)

    it("refuses text and strings that are not UTF-8", function()
      refused("not valid UTF%-8", json.decode('"\255"', "doc"))
      refused("not valid UTF%-8", json.encode({ "\192\128" }, "argv"))
    end)

    it("refuses bad escapes and unterminated strings", function()
      refused("bad string escape", json.decode('"\\x"'))
      refused("unterminated string", json.decode('"abc'))
    end)
  end)

  describe("nesting", function()
    it("decodes MAX_DEPTH nested arrays and refuses one more", function()
      assert.equal(64, json.MAX_DEPTH)
      assert.is_table(json.decode(nested_arrays(64)))
      refused("nested too deeply", json.decode(nested_arrays(65)))
      refused("nested too deeply", json.decode(('{"a":'):rep(65) .. "1" .. ("}"):rep(65)))
    end)

    it("encodes MAX_DEPTH nested tables and refuses one more", function()
      local text = assert(json.encode(nested_tables(64)))
      assert.same(nested_tables(64), json.decode(text))
      refused("nested too deeply", json.encode(nested_tables(65), "t"))
    end)

    it("refuses a table that contains itself instead of recursing forever", function()
      local t = {}
      t[1] = t
      refused("nested too deeply", json.encode(t, "t"))
    end)
  end)

  describe("text", function()
    it("refuses trailing characters, an empty text and a non-string", function()
      refused("trailing characters", json.decode("{} x"))
      refused("unexpected end", json.decode("   "))
      refused("must be JSON text %(got table%)", json.decode({}, "body"))
    end)

    it("names what was read in its messages", function()
      refused("^isolation: the config is not valid JSON %(expected ',' or '}' at byte 9%)",
        json.decode('{"a": 1 "b": 2}', "the config"))
    end)

    it("decodes null as cjson.null and writes it back", function()
      assert.equal(cjson.null, json.null)
      local v = assert(json.decode('{"a":null}'))
      assert.equal(json.null, v.a)
      assert.equal('{"a":null}', json.encode(v))
    end)

    it("refuses values JSON cannot hold", function()
      refused("cannot be written as JSON %(got a function%)", json.encode({ f = print }, "t"))
    end)
  end)

  describe("show", function()
    it("shows a value on one line, shortened", function()
      assert.equal('"a\\nb"', json.show("a\nb"))
      assert.equal("null", json.show(json.null))
      assert.equal("a table", json.show({}))
      assert.equal("3", json.show(3))
      local long = json.show(("x"):rep(100))
      assert.equal(62, #long)
      assert.matches('%.%.%."$', long)
    end)
  end)

  it("is the codec policy uses (and session through it)", function()
    local policy = require("isolation.policy")
    assert.equal(json.decode, policy.json_decode)
    assert.equal(json.array_mt, policy.array_mt)
    assert.equal(json.show, policy.show)
  end)
end)
