-- The sandbox's environment, in real bwrap sandboxes built by wrap() and
-- run by /bin/sh under an environment this spec controls completely (env
-- -i): a canary secret there must be invisible inside by every route a
-- shell in the sandbox has (its environment, /proc/*/environ and cmdline,
-- bwrap's own pid 1 included); each agent's own key, env_pass and env_set
-- must arrive byte for byte; env_inherit restores the old behaviour.
local isolation = require("isolation")
local helpers = require("helpers")

local q = helpers.shquote

local CANARY = "AKIA-canary-4f1d2e"
-- What a user's shell typically holds beside the agent's key.
local SECRETS = {
  AWS_SECRET_ACCESS_KEY = CANARY, GITHUB_TOKEN = CANARY .. "-gh", SSH_AUTH_SOCK = "/tmp/ssh-" .. CANARY,
  DATABASE_URL = "postgres://u:" .. CANARY .. "@db.example.com/x",
}
local HOSTILE = "a'b\"c $HOME `id` $(touch pwned-value) \\ ; | & * ?\nline two\ttab \27[0m end"

local PROBE = require("support.environ_probe")

describe("sandbox environment", function()
  local skip = helpers.skip_without_bwrap()
  local T, home, work, proxy

  setup(function()
    if skip then return end
    T = helpers.tmpdir()
    home, work = T .. "/home", T .. "/work"
    assert(os.execute("mkdir -p " .. q(home) .. " " .. q(work) .. " " .. q(T .. "/run")))
    proxy = assert(isolation.proxy({ unix = T .. "/run/proxy.sock", allow = {} }))
  end)

  teardown(function()
    if skip then return end
    proxy:close()
    helpers.rmtree(T)
  end)

  -- Runs the spec's line with /bin/sh under exactly PATH, HOME, the
  -- secrets and `vars`; returns exit code, stdout, stderr.
  local function run(spec, vars, prefix)
    spec.config = spec.config or { mode = "bwrap" }
    spec.workdir = spec.workdir or work
    if spec.config.network == "deny" then spec.proxy_socket = T .. "/run/proxy.sock" end
    local line = (prefix or "") .. assert(isolation.wrap(spec))
    local assigns = {}
    for k, v in pairs(SECRETS) do assigns[#assigns + 1] = q(k .. "=" .. v) end
    for k, v in pairs(vars or {}) do assigns[#assigns + 1] = q(k .. "=" .. v) end
    return helpers.run("cd " .. q(work) .. " && exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=" .. q(home)
      .. " " .. table.concat(assigns, " ") .. " timeout -k 5 60 /bin/sh -c " .. q(line))
  end

  -- The value of NAME inside, written to a file (exact bytes), or nil when
  -- NAME is unset there.
  local function value_inside(spec, name, vars)
    os.remove(work .. "/value")
    spec.command = "if [ -n \"${" .. name .. "+set}\" ]; then printf %s \"$" .. name .. "\" > value; fi"
    local code, _, err = run(spec, vars)
    assert.are.equal(0, code, err)
    return helpers.read(work .. "/value")
  end

  for _, network in ipairs({ "allow", "deny" }) do
    it("bwrap " .. network .. ": no secret of the launching environment is readable inside, "
      .. "not in env, /proc/*/environ, /proc/*/cmdline nor bwrap's pid 1", function()
      if skip then return end
      local code, out, err = run({ config = { mode = "bwrap", network = network }, agent = "claude",
        command = PROBE }, { ANTHROPIC_API_KEY = "sk-own-key" })
      assert.are.equal(0, code, err)
      assert.truthy(out:find("ANTHROPIC_API_KEY=sk-own-key", 1, true), out) -- the probe reads what is there
      assert.is_nil(out:find(CANARY, 1, true), out)
      for name in pairs(SECRETS) do assert.is_nil(out:find(name, 1, true), name) end
      -- the agent's key is not on any command line (ps on the host would show it)
      local _, cmdlines = run({ config = { mode = "bwrap", network = network }, agent = "claude",
        command = "cat /proc/[0-9]*/cmdline" }, { ANTHROPIC_API_KEY = "sk-own-key" })
      assert.is_nil(cmdlines:find("sk-own-key", 1, true), cmdlines)
      if network == "deny" then
        assert.truthy(out:find("\nHTTPS_PROXY=http://127.0.0.1:3128\n", 1, true), out)
        assert.truthy(out:find("\nNODE_USE_ENV_PROXY=1\n", 1, true), out)
      end
    end)
  end

  it("keeps the base: PATH, HOME (the sandbox's), the locale, TERM, TZ, USER, LOGNAME", function()
    if skip then return end
    local vars = { LANG = "C.UTF-8", LC_ALL = "C", LC_TIME = "C", TERM = "xterm-256color", COLORTERM = "truecolor",
      TZ = "UTC", USER = "agent", LOGNAME = "agent" }
    local code, out, err = run({ command = "env" }, vars)
    assert.are.equal(0, code, err)
    out = "\n" .. out
    for k, v in pairs(vars) do assert.truthy(out:find("\n" .. k .. "=" .. v .. "\n", 1, true), k .. "\n" .. out) end
    assert.truthy(out:find("\nHOME=" .. home .. "\n", 1, true), out)
    assert.truthy(out:find("PATH=/usr/sbin:/usr/bin:/sbin:/bin\n", 1, true), out)
  end)

  it("drops what would change how the sandbox's shells and programs run (BASH_ENV, exported functions, "
    .. "LD_PRELOAD, ENV)", function()
    if skip then return end
    helpers.write(work .. "/rc.sh", "echo sourced > " .. work .. "/sourced\n")
    local code, out, err = run({ command = "env; bash -c true" }, { BASH_ENV = work .. "/rc.sh",
      ENV = work .. "/rc.sh", LD_PRELOAD = "/nonexistent/evil.so", PROMPT_COMMAND = "touch pwned",
      ["BASH_FUNC_true%%"] = "() { echo hijacked; }" })
    assert.are.equal(0, code, err)
    assert.is_nil(out:find("hijacked", 1, true), out)
    assert.is_nil(helpers.read(work .. "/sourced"))
    assert.is_nil(out:find("LD_PRELOAD", 1, true), out)
    assert.is_nil(out:find("BASH_ENV", 1, true), out)
  end)

  for agent, own in pairs({ claude = { "ANTHROPIC_API_KEY", "CLAUDE_CODE_USE_BEDROCK" }, codex = { "OPENAI_API_KEY" },
    gemini = { "GEMINI_API_KEY", "GOOGLE_API_KEY" } }) do
    it(agent .. ": its own key reaches it, no other agent's", function()
      if skip then return end
      local vars = { ANTHROPIC_API_KEY = "k-anthropic", CLAUDE_CODE_USE_BEDROCK = "1", OPENAI_API_KEY = "k-openai",
        GEMINI_API_KEY = "k-gemini", GOOGLE_API_KEY = "k-google" }
      local code, out, err = run({ agent = agent, command = "env" }, vars)
      assert.are.equal(0, code, err)
      out = "\n" .. out
      local mine = {}
      for _, n in ipairs(own) do
        mine[n] = true
        assert.truthy(out:find("\n" .. n .. "=" .. vars[n] .. "\n", 1, true), n .. "\n" .. out)
      end
      for n in pairs(vars) do
        if not mine[n] then assert.is_nil(out:find(n, 1, true), n .. " reached " .. agent) end
      end
    end)
  end

  it("another agent name gets no agent variables", function()
    if skip then return end
    local code, out, err = run({ agent = "aider", command = "env" }, { ANTHROPIC_API_KEY = "k", OPENAI_API_KEY = "k" })
    assert.are.equal(0, code, err)
    assert.is_nil(out:find("API_KEY", 1, true), out)
  end)

  it("env_pass: a hostile value arrives byte for byte; unset stays unset; empty stays set and empty", function()
    if skip then return end
    for _, network in ipairs({ "allow", "deny" }) do
      local spec = { config = { mode = "bwrap", network = network }, env_pass = { "MY_VAR", "NOT_SET", "EMPTY" } }
      assert.are.equal(HOSTILE, value_inside(spec, "MY_VAR", { MY_VAR = HOSTILE, EMPTY = "" }))
      assert.is_nil(value_inside(spec, "NOT_SET", { MY_VAR = HOSTILE, EMPTY = "" }))
      assert.are.equal("", value_inside(spec, "EMPTY", { MY_VAR = HOSTILE, EMPTY = "" }))
      -- a name not passed is not there, even when set
      assert.is_nil(value_inside({ config = spec.config }, "MY_VAR", { MY_VAR = HOSTILE }))
    end
    assert.is_nil(helpers.read(work .. "/pwned-value"))
  end)

  it("a hostile IFS in the shell running the line splits nothing: values and names arrive whole", function()
    if skip then return end
    os.remove(work .. "/value")
    local spec = { env_pass = { "MY_VAR" }, command = "printf %s \"$MY_VAR\" > value; printf %s \"$PATH\" > path" }
    local code, _, err = run(spec, { MY_VAR = "one two=three_A" }, "IFS='=_ AEHMOPTVYR'; ")
    assert.are.equal(0, code, err)
    assert.are.equal("one two=three_A", helpers.read(work .. "/value"))
    assert.are.equal("/usr/sbin:/usr/bin:/sbin:/bin", helpers.read(work .. "/path"))
  end)

  it("env_set: hostile literal values arrive byte for byte and run nothing; they win over the launching shell",
    function()
    if skip then return end
    for _, network in ipairs({ "allow", "deny" }) do
      local spec = { config = { mode = "bwrap", network = network },
        env_set = { SET_ME = HOSTILE, LANG = "C", EMPTY = "" } }
      assert.are.equal(HOSTILE, value_inside(spec, "SET_ME"))
      assert.are.equal("C", value_inside(spec, "LANG", { LANG = "de_DE.UTF-8" }))
      assert.are.equal("", value_inside(spec, "EMPTY"))
    end
    assert.is_nil(helpers.read(work .. "/pwned-value"))
  end)

  it("env_inherit = true: the old behaviour, everything inherited, and dry_run says so loudly", function()
    if skip then return end
    local spec = { env_inherit = true, env_set = { EXTRA = "x" }, command = "env" }
    local code, out, err = run(spec)
    assert.are.equal(0, code, err)
    out = "\n" .. out
    assert.truthy(out:find("AWS_SECRET_ACCESS_KEY=" .. CANARY, 1, true), out)
    assert.truthy(out:find("\nEXTRA=x\n", 1, true), out)
    local text = assert(isolation.dry_run(spec))
    assert.truthy(text:find("environment: WARNING: INHERITED IN FULL (env_inherit = true)", 1, true), text)
    -- without it the same line keeps the canary out
    spec.env_inherit = nil
    code, out = run(spec)
    assert.are.equal(0, code)
    assert.is_nil(out:find(CANARY, 1, true), out)
  end)

  it("docker argv: names only (-e NAME), never a value of the launching environment; env_set as -e NAME=value",
    function()
    local spec = { config = { mode = "docker" }, agent = "codex", workdir = "/srv/p", command = "env",
      env_pass = { "MY_VAR" }, env_set = { SET_ME = "v" } }
    local argv = assert(isolation.docker_argv(spec))
    local names = {}
    for i, v in ipairs(argv) do
      if argv[i - 1] == "-e" then names[#names + 1] = v end
      assert.is_nil(v:find(CANARY, 1, true))
      assert.is_nil(v:find("AWS_", 1, true))
      assert.are_not.equal("--env-file", v)
    end
    local want = { "HOME=$HOME" }
    for _, n in ipairs({ "LANG", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY",
      "LC_MESSAGES", "LC_PAPER", "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
      "TERM", "COLORTERM", "TZ", "USER", "LOGNAME", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MY_VAR", "SET_ME=v" }) do
      want[#want + 1] = n
    end
    assert.are.same(want, names)
    -- the line passes the names as words: no value from the launching shell is in docker's argv
    local line = assert(isolation.wrap(spec))
    -- (the run-time HOME check in front has parameter expansions of its own)
    assert.is_nil(helpers.line_body(line):find("${", 1, true), line)
    assert.is_nil(line:find("$MY_VAR", 1, true), line)
  end)

  it("dry_run names what is passed, set and dropped, and no value it cannot know", function()
    local spec = { config = { mode = "bwrap" }, agent = "codex", workdir = "/srv/p", command = "c",
      env_pass = { "MY_VAR" }, env_set = { SET_ME = "secret-literal" } }
    local text = assert(isolation.dry_run(spec))
    assert.truthy(text:find("environment: cleared (bwrap starts from an empty environment", 1, true), text)
    assert.truthy(text:find("\n  base: PATH, LANG, LC_ALL,", 1, true), text)
    assert.truthy(text:find("\n  agent codex (isolation.AGENT_ENV): OPENAI_API_KEY, OPENAI_BASE_URL\n", 1, true), text)
    assert.truthy(text:find("\n  env_pass: MY_VAR\n", 1, true), text)
    assert.truthy(text:find("\n  dropped: every other variable of the launching environment\n", 1, true), text)
    assert.truthy(text:find("\n  env_set (literal values from the spec, not shown): SET_ME\n", 1, true), text)
    assert.is_nil(text:find("secret-literal", 1, true), text)
    spec.config.mode = "docker"
    text = assert(isolation.dry_run(spec))
    assert.truthy(text:find("environment: the image's own; from the launching shell only these names", 1, true),
      text)
    assert.truthy(text:find("\n  base (not PATH: the image's): LANG,", 1, true), text)
    assert.is_nil(text:find("secret-literal", 1, true), text)
    spec.env_inherit = true
    text = assert(isolation.dry_run(spec))
    assert.truthy(text:find("env_inherit: no effect under docker", 1, true), text)
    -- mode "": no sandbox, and the keys are accepted but say they do nothing
    text = assert(isolation.dry_run({ command = "c", env_pass = { "A" }, env_set = { B = "x" } }))
    assert.truthy(text:find("environment: the launching shell's, unchanged (env_pass, env_set and env_inherit "
      .. "apply to bwrap and docker only)", 1, true), text)
    assert.are.same({ "bash", "-c", "--", "c" }, assert(isolation.argv({ command = "c", env_set = { B = "x" } })))
  end)

  it("AGENT_ENV lists each agent's own names; the base is SANDBOX_ENV", function()
    assert.are.same({ "OPENAI_API_KEY", "OPENAI_BASE_URL" }, isolation.AGENT_ENV.codex)
    assert.are.same({ "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
      "GOOGLE_GENAI_USE_VERTEXAI", "GEMINI_MODEL" }, isolation.AGENT_ENV.gemini)
    for _, n in ipairs({ "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_USE_BEDROCK",
      "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_OAUTH_TOKEN" }) do
      local found = false
      for _, m in ipairs(isolation.AGENT_ENV.claude) do found = found or m == n end
      assert.is_true(found, n)
    end
    for _, list in pairs(isolation.AGENT_ENV) do
      for _, n in ipairs(list) do assert.is_nil(n:find("^AWS_"), n) end
    end
    assert.is_nil(isolation.AGENT_ENV.aider)
    assert.are.equal("PATH", isolation.SANDBOX_ENV[1])
  end)

  describe("refuses, naming the field and the value", function()
    for _, case in ipairs({
      { "a name that is not a shell name", { env_pass = { "A;touch x" } }, "env_pass[1] must be a variable name" },
      { "a name starting with a digit", { env_pass = { "1A" } }, "env_pass[1] must be a variable name" },
      { "an empty name", { env_pass = { "" } }, "env_pass[1] must be a variable name" },
      { "a name with a NUL", { env_pass = { "A\0B" } }, "env_pass[1] must be a variable name" },
      { "a name with =", { env_set = { ["A=B"] = "x" } }, "env_set key must be a variable name" },
      { "HOME", { env_pass = { "HOME" } }, "must not be HOME" },
      { "HOME set", { env_set = { HOME = "/" } }, "must not be HOME" },
      { "a proxy variable under deny", { config = { mode = "bwrap", network = "deny" }, proxy_socket = "/p.sock",
        env_set = { NO_PROXY = "*" } }, "must not be a proxy variable under network deny" },
      { "a passed proxy variable under deny", { config = { mode = "bwrap", network = "deny" },
        proxy_socket = "/p.sock", env_pass = { "HTTPS_PROXY" } }, "must not be a proxy variable" },
      { "a name passed twice", { env_pass = { "A", "A" } }, "env_pass[2] repeats" },
      { "a name both passed and set", { env_pass = { "A" }, env_set = { A = "x" } }, "also in env_pass" },
      { "env_pass as a map", { env_pass = { A = "B" } }, "env_pass must be an array of variable names, not a map" },
      { "env_pass as a string", { env_pass = "A" }, "env_pass must be an array" },
      { "env_set as an array", { env_set = { "A=B" } }, "env_set must be a table of variable name -> value" },
      { "an env_set value that is not a string", { env_set = { A = 1 } }, "env_set.A must be a string" },
      { "an env_set value with a NUL", { env_set = { A = "x\0y" } }, "env_set.A must not contain NUL" },
      { "env_inherit not a boolean", { env_inherit = "true" }, "env_inherit must be a boolean" },
    }) do
      it(case[1], function()
        local spec = { config = { mode = "bwrap" }, workdir = "/w", command = "c" }
        for k, v in pairs(case[2]) do spec[k] = v end
        for _, fn in ipairs({ "bwrap_argv", "argv", "wrap", "dry_run", "docker_argv" }) do
          local res, err = isolation[fn](spec)
          if not (fn == "docker_argv" and case[2].proxy_socket) then
            assert.is_nil(res, fn)
            assert.truthy(err:find("^isolation: "), err)
            assert.truthy(err:find(case[3], 1, true), fn .. ": " .. err)
          end
        end
      end)
    end

    it("accepts an empty JSON object as an empty env_pass, and json null as absent", function()
      local cjson = require("cjson")
      for _, v in ipairs({ {}, cjson.null }) do
        assert.truthy(isolation.wrap({ config = { mode = "bwrap" }, workdir = "/w", command = "c", env_pass = v,
          env_set = v, env_inherit = (v == cjson.null) and v or nil }))
      end
    end)
  end)
end)
