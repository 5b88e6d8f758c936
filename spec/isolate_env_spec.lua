-- The environment through isolate and the session manager, driven for real
-- (bwrap sandboxes, isolate's proxy, the manager's wrap() line run by sh):
-- a canary in the launching environment stays outside by default; --env,
-- --setenv, --inherit-env and the launch request's env_pass, env_set and
-- env_inherit do what they say.
local helpers = require("helpers")
local cli = require("support.cli")
local launchers = require("support.launchers")
local session = require("isolation.session")

local q = helpers.shquote
local CANARY = "AKIA-isolate-canary-77"
local HOSTILE = "a'b\"c $HOME `id` $(touch pwned) ;|&*\nline two"

describe("isolate's environment", function()
  local tmp, home
  before_each(function()
    tmp = helpers.tmpdir()
    home = helpers.tmpdir() -- a HOME of its own: CI may run without one
  end)
  after_each(function()
    helpers.rmtree(tmp)
    helpers.rmtree(home)
  end)

  local function isolate(args, env)
    local all = { "--workdir", tmp }
    for _, a in ipairs(args) do all[#all + 1] = a end
    local e = { "AWS_SECRET_ACCESS_KEY=" .. CANARY, "TMPDIR=" .. tmp, "HOME=" .. home }
    for _, v in ipairs(env or {}) do e[#e + 1] = v end
    return cli.isolate(all, { env = e })
  end

  -- Under deny the agent's key goes through its route (spec/isolate_route_spec):
  -- inside it is a placeholder; --no-routes passes it in as before.
  for _, case in ipairs({ { "deny", "--no-routes" }, { "allow" } }) do
    local network = case[1]
    it("network " .. network .. ": a canary secret stays outside; the agent's own key gets in", function()
      if helpers.skip_without_bwrap() then return end
      local args = { "--network", network, "--agent", "claude" }
      if case[2] then args[#args + 1] = case[2] end
      for _, a in ipairs({ "--", "sh", "-c", "env; cat /proc/1/environ" }) do args[#args + 1] = a end
      local status, out, err = isolate(args, { "ANTHROPIC_API_KEY=sk-own" })
      assert.are.equal(0, status, err)
      assert.is_nil(out:find(CANARY, 1, true), out)
      assert.truthy(out:find("ANTHROPIC_API_KEY=sk-own", 1, true), out)
    end)
  end

  it("network deny: the agent's key is only a placeholder inside (its route)", function()
    if helpers.skip_without_bwrap() then return end
    local status, out, err = isolate({ "--network", "deny", "--agent", "claude", "--", "sh", "-c",
      "env; cat /proc/[0-9]*/environ" }, { "ANTHROPIC_API_KEY=sk-own" })
    assert.are.equal(0, status, err)
    assert.is_nil(out:find("sk-own", 1, true), out)
    assert.truthy(out:find("ANTHROPIC_API_KEY=isolation-route-claude", 1, true), out)
  end)

  it("--env passes a name (byte for byte), an unset one stays unset; --setenv sets a literal value", function()
    if helpers.skip_without_bwrap() then return end
    local status, out, err = isolate({ "--env", "MY_VAR", "--env", "NOT_SET", "--setenv", "SET_ME=" .. HOSTILE,
      "--", "sh", "-c", "printf '%s' \"$MY_VAR\" > my; printf '%s' \"$SET_ME\" > set; echo \"${NOT_SET-unset}\"" },
      { "MY_VAR=" .. HOSTILE })
    assert.are.equal(0, status, err)
    assert.are.equal("unset\n", out)
    assert.are.equal(HOSTILE, helpers.read(tmp .. "/my"))
    assert.are.equal(HOSTILE, helpers.read(tmp .. "/set"))
    assert.is_nil(helpers.read(tmp .. "/pwned"))
  end)

  it("--inherit-env: the old behaviour, and --dry-run says so loudly", function()
    if helpers.skip_without_bwrap() then return end
    local status, out, err = isolate({ "--inherit-env", "--", "sh", "-c", "echo \"$AWS_SECRET_ACCESS_KEY\"" })
    assert.are.equal(0, status, err)
    assert.are.equal(CANARY .. "\n", out)
    status, out = isolate({ "--dry-run", "--inherit-env", "--", "true" })
    assert.are.equal(0, status)
    assert.truthy(out:find("environment: WARNING: INHERITED IN FULL", 1, true), out)
  end)

  it("--dry-run lists what is passed and set by name, never a value", function()
    local status, out = isolate({ "--dry-run", "--agent", "codex", "--env", "MY_VAR", "--setenv", "SET_ME=s3cret",
      "--", "true" }, { "MY_VAR=v4lue" })
    assert.are.equal(0, status)
    assert.truthy(out:find("\n  env_pass: MY_VAR\n", 1, true), out)
    assert.truthy(out:find("\n  agent codex (isolation.AGENT_ENV): OPENAI_API_KEY, OPENAI_BASE_URL\n", 1, true), out)
    assert.truthy(out:find("): SET_ME\n", 1, true), out)
    assert.is_nil(out:find("v4lue", 1, true), out)
    assert.is_nil(out:find(CANARY, 1, true), out)
  end)

  for _, case in ipairs({
    { "--env with a name that is not a shell name", { "--env", "A;B" }, "%-%-env needs a variable name" },
    { "--setenv without =", { "--setenv", "A" }, "%-%-setenv must be NAME=VALUE" },
    { "--setenv with a bad name", { "--setenv", "1A=x" }, "%-%-setenv needs a variable name" },
    { "--env HOME", { "--env", "HOME" }, "%-%-env must not be HOME" },
    { "--setenv of a proxy variable under deny", { "--setenv", "HTTPS_PROXY=x" }, "must not be a proxy variable" },
    { "--inherit-env with a value", { "--inherit-env=yes" }, "unknown option" },
  }) do
    it("usage error: " .. case[1], function()
      local args = {}
      for _, a in ipairs(case[2]) do args[#args + 1] = a end
      args[#args + 1] = "--"
      args[#args + 1] = "true"
      local status, out, err = isolate(args)
      assert.are.equal(2, status, err)
      assert.are.equal("", out)
      assert.truthy(err:match("^isolate: [^\n]*\n$"), err)
      assert.truthy(err:find(case[3]), err)
    end)
  end
end)

describe("the session manager's environment", function()
  local root, mgr, lines
  before_each(function()
    root = helpers.tmpdir()
    assert(os.execute("mkdir -p " .. q(root .. "/work")))
    lines = {}
    mgr = assert(session.manager(launchers.recording(lines, { runtime_dir = root .. "/run" })))
  end)
  after_each(function()
    mgr:close()
    helpers.rmtree(root)
  end)

  -- Runs the manager's line with sh under a canary and `vars`; the command
  -- writes its environment to a file in the workdir.
  local function run(line, vars)
    local assigns = {}
    for k, v in pairs(vars or {}) do assigns[#assigns + 1] = q(k .. "=" .. v) end
    local code, _, err = helpers.run("exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=" .. q(root)
      .. " AWS_SECRET_ACCESS_KEY=" .. CANARY .. " " .. table.concat(assigns, " ") .. " timeout -k 5 60 sh -c "
      .. q(line))
    assert.are.equal(0, code, err)
    return helpers.read(root .. "/work/env.out") or ""
  end

  local function project() return launchers.project("allow") end

  it("launches with the clean base by default: a canary stays out, the agent's key gets in", function()
    if helpers.skip_without_bwrap() then return end
    assert(mgr:launch({ id = "s1", project = project(), agent = "codex", workdir = root .. "/work",
      command = "env > env.out" }))
    local env = run(lines[1], { OPENAI_API_KEY = "sk-codex" })
    assert.is_nil(env:find(CANARY, 1, true), env)
    assert.truthy(env:find("OPENAI_API_KEY=sk-codex", 1, true), env)
  end)

  it("a launch request's env_pass, env_set and env_inherit reach the line", function()
    if helpers.skip_without_bwrap() then return end
    assert(mgr:launch({ id = "s2", project = project(), agent = "other", workdir = root .. "/work",
      command = "env > env.out", env_pass = { "MY_VAR" }, env_set = { SET_ME = "literal" } }))
    local env = run(lines[1], { MY_VAR = "passed" })
    assert.truthy(env:find("\nMY_VAR=passed\n", 1, true) or env:find("^MY_VAR=passed\n"), env)
    assert.truthy(env:find("SET_ME=literal", 1, true), env)
    assert.is_nil(env:find(CANARY, 1, true), env)
    assert(mgr:launch({ id = "s3", project = project(), agent = "other", workdir = root .. "/work",
      command = "env > env.out", env_inherit = true }))
    env = run(lines[2])
    assert.truthy(env:find(CANARY, 1, true), env)
  end)

  it("a bad env_pass is refused before anything starts", function()
    local s, err = mgr:launch({ id = "s4", project = project(), agent = "other", workdir = root .. "/work",
      command = "true", env_pass = { "A B" } })
    assert.is_nil(s)
    assert.truthy(tostring(err):find("env_pass[1] must be a variable name", 1, true), err)
    assert.are.equal(0, #lines)
  end)
end)
