-- isolation.validate_for_target(config, target): the contract's table (README), cell by cell,
-- with messages that name the rule that refused and what would work instead.
local isolation = require("isolation")

local deep_copy = require("support.tables").deep_copy

local CONFIGS = {
  none = { mode = "" },
  bwrap_allow = { mode = "bwrap", network = "allow" },
  bwrap_deny = { mode = "bwrap", network = "deny", allow_hosts = { "example.com" } },
  docker_allow = { mode = "docker", network = "allow" },
  docker_deny = { mode = "docker", network = "deny" },
}

-- The contract's table: true = ok, else a word of the rule that refuses.
local SANDBOX = "sandbox target's cloned container already is the isolation"
local DENY = "network \"deny\" needs a local target"
local PCT = "bwrap cannot count on creating namespaces inside a pct container"
local TABLE = {
  none = { ["local"] = true, ssh = true, pct = true, sandbox = true },
  bwrap_allow = { ["local"] = true, ssh = true, pct = PCT, sandbox = SANDBOX },
  bwrap_deny = { ["local"] = true, ssh = DENY, pct = DENY, sandbox = SANDBOX },
  docker_allow = { ["local"] = true, ssh = true, pct = true, sandbox = SANDBOX },
  docker_deny = { ["local"] = true, ssh = DENY, pct = DENY, sandbox = SANDBOX },
}

describe("validate_for_target", function()
  for name, row in pairs(TABLE) do
    for kind, want in pairs(row) do
      for _, form in ipairs({ "string", "table" }) do
        it(name .. " on " .. kind .. " (" .. form .. " target) is "
          .. (want == true and "ok" or "refused"), function()
          local config = deep_copy(CONFIGS[name])
          local target = form == "string" and kind or { kind = kind, host = "box.example.com" }
          local config_before, target_before = deep_copy(config), deep_copy(target)
          local ok, err = isolation.validate_for_target(config, target)
          if want == true then
            assert.is_true(ok, err)
            assert.is_nil(err)
          else
            assert.is_nil(ok)
            assert.is_string(err)
            assert.matches("^isolation: ", err)
            assert.is_truthy(err:find(want, 1, true), err)
            assert.is_truthy(err:find('target "' .. kind .. '"', 1, true), err)
            assert.is_truthy(err:find("; use ", 1, true), "says what would work: " .. err)
          end
          assert.are.same(config_before, config)
          assert.are.same(target_before, target)
        end)
      end
    end
  end

  it("accepts a normalized config as well as a raw one", function()
    local normalized, err = isolation.config({ mode = "bwrap", network = "deny" })
    assert.is_table(normalized, err)
    assert.is_true(isolation.validate_for_target(normalized, "local"))
    assert.is_nil((isolation.validate_for_target(normalized, "ssh")))
  end)

  it("treats a nil config as all defaults (no isolation): ok everywhere", function()
    for _, kind in ipairs({ "local", "ssh", "pct", "sandbox" }) do
      assert.is_true(isolation.validate_for_target(nil, kind))
    end
  end)

  it("defaults the network to allow", function()
    assert.is_true(isolation.validate_for_target({ mode = "bwrap" }, "ssh"))
    assert.is_true(isolation.validate_for_target({ mode = "docker", network = "" }, "pct"))
  end)

  it("suggests what works on the target itself", function()
    local _, err = isolation.validate_for_target({ mode = "docker", network = "deny" }, "ssh")
    assert.is_truthy(err:find('use network "allow" or a local target', 1, true), err)
    _, err = isolation.validate_for_target({ mode = "bwrap", network = "deny" }, "pct")
    assert.is_truthy(err:find("use a local target", 1, true), err)
    assert.is_truthy(err:find('mode "docker"', 1, true), err)
    _, err = isolation.validate_for_target({ mode = "bwrap" }, "pct")
    assert.is_truthy(err:find('use mode "docker" or "" on target "pct"', 1, true), err)
    _, err = isolation.validate_for_target({ mode = "docker" }, "sandbox")
    assert.is_truthy(err:find('use mode "" on target "sandbox"', 1, true), err)
  end)

  it("returns the config's own error for an invalid config", function()
    local ok, err = isolation.validate_for_target({ mode = "bwrap", network = "block" }, "local")
    assert.is_nil(ok)
    assert.matches("network", err, 1, true)
    assert.matches("block", err, 1, true)
    ok, err = isolation.validate_for_target({ mode = "", network = "deny" }, "local")
    assert.is_nil(ok)
    assert.matches("^isolation: ", err)
    ok, err = isolation.validate_for_target({ mode = "bwrap", network = "deny", allow_hosts = { "127.1" } },
      "local")
    assert.is_nil(ok)
    assert.matches("127.1", err, 1, true)
  end)

  it("refuses an unknown target kind, naming it", function()
    local cases = {
      { "remote", 'target must be "local", "ssh", "pct" or "sandbox" (got "remote")' },
      { "LOCAL", '(got "LOCAL")' },
      { "", '(got "")' },
      { { kind = "docker" }, 'target.kind must be "local", "ssh", "pct" or "sandbox" (got "docker")' },
      { { kind = 1 }, 'target.kind must be "local", "ssh", "pct" or "sandbox" (got number 1)' },
      { { kind = true }, "(got true)" },
      { { kind = {} }, "(got table)" },
      { { kind = "l\27[2Jocal" }, '(got "l\\x1b[2Jocal")' },
      { "local\0x", '(got "local\\x00x")' },
      { {}, "(got nil)" },
      { { "local" }, "(got nil)" },
      { 42, "(got number 42)" },
      { nil, "(got nil)" },
      { true, "(got true)" },
    }
    for _, case in ipairs(cases) do
      local target = deep_copy(case[1])
      local ok, err = isolation.validate_for_target({ mode = "" }, target)
      assert.is_nil(ok)
      assert.is_truthy(err:find("isolation: target", 1, true), err)
      assert.is_truthy(err:find(case[2], 1, true), err)
      assert.are.same(case[1], target)
    end
  end)

  it("checks the target even when the config needs no isolation", function()
    assert.is_nil((isolation.validate_for_target(nil, "moon")))
  end)

  it("raises for a config that is not a table", function()
    assert.has_error(function() isolation.validate_for_target("bwrap", "local") end)
  end)
end)
