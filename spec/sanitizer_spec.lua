-- Proves that the spec-asan run really runs under AddressSanitizer: a planted
-- heap overflow, compiled only into the sanitizer build, must be reported.
local helpers = require("helpers")

describe("sanitizer build", function()
  local sanitized = os.getenv("ISOLATION_SANITIZER") == "1"

  it("is active in the spec-asan run and catches a planted overflow", function()
    if not sanitized then
      local isolation = require("isolation")
      assert.is_nil(isolation._asan_probe, "the probe must not exist in a normal build")
      return
    end
    local isolation = require("isolation")
    assert.is_function(isolation._asan_probe)
    local cpath = os.getenv("ISOLATION_CPATH")
    local preload = os.getenv("LD_PRELOAD")
    local base = "env LD_PRELOAD=" .. helpers.shquote(preload)
      .. " ASAN_OPTIONS=detect_leaks=0 lua5.4 -e "
    local function probe(n)
      local out, err = os.tmpname(), os.tmpname()
      local _, _, code = os.execute(base .. helpers.shquote(
        "package.cpath=" .. string.format("%q", cpath) .. "; require('isolation')._asan_probe(" .. n .. ")")
        .. " >" .. out .. " 2>" .. err)
      local e = helpers.read(err)
      os.remove(out); os.remove(err)
      return code, e
    end
    local code, err = probe(8)
    assert.are.equal(0, code, err)
    code, err = probe(9)
    assert.are_not.equal(0, code)
    assert.matches("heap%-buffer%-overflow", err)
  end)
end)
