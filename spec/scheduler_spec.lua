local helpers = require("helpers")
local scheduler = require("isolation.scheduler")

local NONE = { mode = "", network = "allow" }

local deepcopy = require("support.tables").deep_copy

-- A log function that records its lines.
local function recorder()
  local lines = {}
  return lines, function(line) lines[#lines + 1] = line end
end

describe("scheduler.task_isolation", function()
  it("gives an attempt the project default", function()
    local lines, log = recorder()
    assert.same({ mode = "bwrap", network = "allow" },
      scheduler.task_isolation({ mode = "bwrap" }, { id = "t-1" }, log))
    assert.same({ mode = "docker", network = "allow", docker_image = "example.net/img:1" },
      scheduler.task_isolation({ mode = "docker", docker_image = "example.net/img:1" }, { id = "t-1" }, log))
    assert.same({}, lines)
  end)

  it("gives no isolation when the project has no default", function()
    local lines, log = recorder()
    assert.same(NONE, scheduler.task_isolation(nil, { id = "t-1" }, log))
    assert.same({}, lines)
  end)

  it("clamps network deny to allow and logs exactly one line naming the attempt", function()
    local lines, log = recorder()
    local cfg = scheduler.task_isolation({ mode = "bwrap", network = "deny", allow_hosts = { "example.com" } },
      { id = "task-42/attempt-3" }, log)
    assert.same({ mode = "bwrap", network = "allow" }, cfg)
    assert.equal(1, #lines)
    assert.matches("task-42/attempt-3", lines[1], 1, true)
    assert.matches("deny clamped to allow", lines[1], 1, true)
    assert.is_nil(lines[1]:find("\n"))
  end)

  it("clamps docker deny to docker allow, keeping the image", function()
    local lines, log = recorder()
    assert.same({ mode = "docker", network = "allow", docker_image = "debian:bookworm-slim" },
      scheduler.task_isolation({ mode = "docker", network = "deny" }, { id = 7 }, log))
    assert.equal(1, #lines)
    assert.matches("attempt 7:", lines[1], 1, true)
  end)

  it("keeps the log line on one line whatever the attempt id holds", function()
    local lines, log = recorder()
    scheduler.task_isolation({ mode = "bwrap", network = "deny" }, { id = "a\nb\rc" }, log)
    assert.equal(1, #lines)
    assert.is_nil(lines[1]:find("[\r\n]"))
    assert.matches("a\\x0ab\\x0dc", lines[1], 1, true)
  end)

  it("gives no isolation to an attempt already inside the sandbox tier", function()
    local lines, log = recorder()
    local default = { mode = "bwrap", network = "deny" }
    assert.same(NONE, scheduler.task_isolation(default, { id = "t", in_sandbox = true }, log))
    assert.same(NONE, scheduler.task_isolation(default, { id = "t", target = "sandbox" }, log))
    assert.same(NONE, scheduler.task_isolation(default, { id = "t", target = { kind = "sandbox" } }, log))
    assert.same({}, lines)
  end)

  -- The attack: a queued attempt decoded from {"in_sandbox": null} (or 0,
  -- "false", "no") ran with no isolation, since the check was truthiness.
  -- Only the boolean true says "inside the sandbox tier".
  local cjson = require("cjson")
  local NOT_TRUE = {
    { "cjson.null", cjson.null }, { "0", 0 }, { "1", 1 }, { '"false"', "false" }, { '"no"', "no" },
    { '"true"', "true" }, { '"yes"', "yes" }, { '""', "" }, { "false", false }, { "{}", {} },
    { "a function", print },
  }
  for _, case in ipairs(NOT_TRUE) do
    it("keeps the project default for in_sandbox = " .. case[1] .. " (only true counts)", function()
      local lines, log = recorder()
      local default = { mode = "bwrap", network = "allow" }
      assert.same({ mode = "bwrap", network = "allow" },
        scheduler.task_isolation(default, { id = "t", in_sandbox = case[2] }, log))
      -- deny is still clamped (and said), not dropped with the isolation
      assert.same({ mode = "docker", network = "allow", docker_image = "debian:bookworm-slim" },
        scheduler.task_isolation({ mode = "docker", network = "deny" }, { id = "t", in_sandbox = case[2] }, log))
      assert.equal(1, #lines)
    end)
  end

  it("takes only the exact target \"sandbox\" for the sandbox tier", function()
    local default = { mode = "bwrap", network = "allow" }
    for _, target in ipairs({ "Sandbox", "sandbox ", "sandbox\0", " sandbox", cjson.null, 0, true,
      { kind = "SANDBOX" }, { kind = cjson.null }, { kind = "sandbox\0" } }) do
      assert.same(default, scheduler.task_isolation(default, { id = "t", target = target }, function() end))
    end
  end)

  it("does not treat other targets as the sandbox tier", function()
    local lines, log = recorder()
    assert.same({ mode = "bwrap", network = "allow" },
      scheduler.task_isolation({ mode = "bwrap" }, { id = "t", target = "ssh", in_sandbox = false }, log))
    assert.same({}, lines)
  end)

  it("changes neither the default nor the attempt", function()
    local default = { mode = "bwrap", network = "deny", allow_hosts = { "example.com" } }
    local attempt = { id = "t", target = { kind = "local" } }
    local d0, a0 = deepcopy(default), deepcopy(attempt)
    local cfg = scheduler.task_isolation(default, attempt, function() end)
    cfg.mode = "docker"
    assert.same(d0, default)
    assert.same(a0, attempt)
  end)

  it("returns nil, err for an invalid project default", function()
    local cfg, err = scheduler.task_isolation({ mode = "vm" }, { id = "t" }, function() end)
    assert.is_nil(cfg)
    assert.matches("mode", err)
  end)

  it("writes the line to stderr when no log function is given", function()
    local code, out, err = helpers.run("lua5.4 -e " .. helpers.shquote(
      "package.path = 'lua/?.lua;' .. package.path; package.cpath = 'build/?.so;' .. package.cpath; "
      .. "local s = require('isolation.scheduler'); "
      .. "local c = s.task_isolation({mode = 'bwrap', network = 'deny'}, {id = 'from-stderr'}); "
      .. "io.write(c.network)"))
    assert.equal(0, code, err)
    assert.equal("allow", out)
    local n = select(2, err:gsub("\n", ""))
    assert.equal(1, n)
    assert.matches("from-stderr", err, 1, true)
    assert.matches("deny clamped to allow", err, 1, true)
  end)

  it("raises for an attempt that is not a table", function()
    assert.has_error(function() scheduler.task_isolation(nil, "t-1") end)
  end)
end)
