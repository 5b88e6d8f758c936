-- isolate --secret, driven for real: a deny sandbox (bwrap, the bridge,
-- isolate's proxy) reaches a local HTTPS upstream through the route with
-- curl and Python's urllib; the upstream sees the real secret, and the
-- secret is nowhere inside (env, every /proc/*/environ and cmdline) nor in
-- isolate's output or its dry run.
local helpers = require("helpers")
local tls = require("support.tls_upstream")
local isolate_run = require("support.isolate_run")
local launchers = require("support.launchers")

local SECRET = "ghp-route-secret-fedcba9876543210"

describe("isolate --secret", function()
  local dir, fx, tmp, up
  setup(function() dir = tls.ca_and_leaf("DNS:up.example.com,IP:127.0.0.1") end)
  teardown(function() if dir then helpers.rmtree(dir) end end)
  before_each(function()
    fx = isolate_run.new()
    tmp = fx.tmp
  end)
  after_each(function() fx:close() end)

  local function isolate(args)
    local all = { "--workdir", tmp }
    for _, a in ipairs(args) do all[#all + 1] = a end
    return fx:isolate(all, { env = { "MY_TOKEN=" .. SECRET } })
  end

  it("curl and urllib reach the upstream with the real secret; it is nowhere inside", function()
    if not dir then pending("openssl, python3 and curl are needed") return end
    if helpers.skip_without_bwrap() then return end
    up = fx:upstream(tls.start(dir, "good"))
    local url = "https://127.0.0.1:" .. up.port .. "/api"
    local script = [[
curl -sS --max-time 20 -H 'Authorization: Bearer mine' "$ISOLATION_ROUTE_UP/v1/json" > curl.out 2> curl.err
python3 -c 'import os, urllib.request as u
print(u.urlopen(os.environ["ISOLATION_ROUTE_UP"] + "/py").read().decode())' > py.out 2> py.err
if command -v node >/dev/null; then
  node -e 'fetch(process.env.ISOLATION_ROUTE_UP + "/node").then(r => r.text()).then(t => console.log(t))' \
    > node.out 2> node.err
fi
echo "token inside: $MY_TOKEN"
env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n'
]]
    helpers.write(tmp .. "/t.sh", script)
    local status, out, err = isolate({ "--network", "deny",
      "--secret", "up=MY_TOKEN@" .. url .. "#basic:x-access-token", "--upstream-ca", dir .. "/ca.pem",
      "--log", dir .. "/audit.log", "--", "bash", "t.sh" })
    assert.are.equal(0, status, err)
    local has_node = helpers.run("command -v node") == 0
    assert.truthy(err:find("credential routes used: up (" .. (has_node and 3 or 2) .. " requests)", 1, true), err)
    local audit = helpers.read(dir .. "/audit.log")
    assert.truthy(audit:find('"code":"route"', 1, true), audit)
    assert.is_nil(audit:find(SECRET, 1, true), "the secret is in the audit log")
    assert.truthy(helpers.read(tmp .. "/curl.out"):find('"ok": true', 1, true),
      helpers.read(tmp .. "/curl.out") .. helpers.read(tmp .. "/curl.err"))
    assert.truthy(helpers.read(tmp .. "/py.out"):find('"ok": true', 1, true),
      helpers.read(tmp .. "/py.out") .. helpers.read(tmp .. "/py.err"))
    assert.truthy(out:find("token inside: isolation-route-up", 1, true), out)
    for _, text in ipairs({ out, err, helpers.read(tmp .. "/curl.out"), helpers.read(tmp .. "/py.out") }) do
      assert.is_nil(text:find(SECRET, 1, true), "the secret leaked")
    end
    local reqs = up.requests()
    assert.are.equal(has_node and 3 or 2, #reqs, helpers.read(tmp .. "/node.err"))
    if has_node then -- Node's fetch ignores proxy variables: the base URL needs none
      assert.are.equal("/api/node", reqs[3].path)
      assert.truthy(helpers.read(tmp .. "/node.out"):find('"ok": true', 1, true))
    end
    local _, enc = helpers.run("printf %s " .. helpers.shquote("x-access-token:" .. SECRET) .. " | base64 -w0")
    for _, r in ipairs(reqs) do
      assert.are.same({ "Basic " .. enc }, tls.header(r, "authorization"))
    end
    assert.are.equal("/api/v1/json", reqs[1].path)
    assert.are.equal("/api/py", reqs[2].path)
  end)

  it("the placeholder is useless elsewhere: sent to another allowed host it is only the placeholder", function()
    if not dir then pending("openssl, python3 and curl are needed") return end
    if helpers.skip_without_bwrap() then return end
    up = fx:upstream(tls.start(dir, "good"))
    assert(os.execute("cp " .. helpers.shquote(dir .. "/ca.pem") .. " " .. helpers.shquote(tmp .. "/ca.pem")))
    -- the same upstream, reached directly (CONNECT, admitted by --allow-host), not through the route
    helpers.write(tmp .. "/t.sh", ([[
curl -sS --max-time 20 --cacert ca.pem -H "x-api-key: $MY_TOKEN" -H "Authorization: Bearer $MY_TOKEN" \
  https://127.0.0.1:%d/elsewhere > direct.out 2> direct.err
]]):format(up.port))
    local status, out, err = isolate({ "--network", "deny", "--allow-host", "127.0.0.1:" .. up.port,
      "--secret", "up=MY_TOKEN@https://127.0.0.1:" .. up.port, "--upstream-ca", dir .. "/ca.pem",
      "--", "bash", "t.sh" })
    assert.are.equal(0, status, err)
    local reqs = up.requests()
    assert.are.equal(1, #reqs, helpers.read(tmp .. "/direct.err"))
    assert.are.equal("/elsewhere", reqs[1].path)
    assert.are.same({ "isolation-route-up" }, tls.header(reqs[1], "x-api-key"))
    assert.are.same({ "Bearer isolation-route-up" }, tls.header(reqs[1], "authorization"))
    assert.is_nil((out .. err):find(SECRET, 1, true))
  end)

  it("--agent claude with its key set makes its route: a Messages request inside carries the real key", function()
    if not dir then pending("openssl, python3 and curl are needed") return end
    if helpers.skip_without_bwrap() then return end
    up = fx:upstream(tls.start(dir, "good"))
    helpers.write(tmp .. "/t.sh", [[
curl -sS --max-time 20 -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" \
  -H 'content-type: application/json' -d '{"stream": true}' > curl.out 2> curl.err
echo "base $ANTHROPIC_BASE_URL key $ANTHROPIC_API_KEY token $ANTHROPIC_AUTH_TOKEN"
env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'
]])
    local status, out, err = fx:isolate({ "--workdir", tmp, "--network", "deny", "--agent", "claude",
      "--upstream-ca", dir .. "/ca.pem", "--", "bash", "t.sh" }, { env = { "ANTHROPIC_API_KEY=" .. SECRET,
      "ANTHROPIC_AUTH_TOKEN=" .. SECRET .. "-2", "ANTHROPIC_BASE_URL=https://127.0.0.1:" .. up.port } })
    assert.are.equal(0, status, err)
    assert.truthy(out:find("base http://127.0.0.1:3128/claude key isolation-route-claude token isolation-route-claude",
      1, true), out)
    assert.is_nil((out .. err):find(SECRET, 1, true), "the key leaked")
    local reqs = up.requests()
    assert.are.equal(1, #reqs, helpers.read(tmp .. "/curl.err"))
    assert.are.equal("POST", reqs[1].method)
    assert.are.equal("/v1/messages", reqs[1].path)
    assert.are.same({ SECRET }, tls.header(reqs[1], "x-api-key"))
    assert.are.same({}, tls.header(reqs[1], "authorization"))
  end)

  it("--agent claude's route takes the model hosts off the allowlist; --no-routes keeps them", function()
    if helpers.skip_without_bwrap() then return end
    local env = { env = { "ANTHROPIC_API_KEY=" .. SECRET } }
    local status, out, err = fx:isolate({ "--workdir", tmp, "--network", "deny", "--agent", "claude", "--dry-run",
      "--", "true" }, env)
    assert.are.equal(0, status, err)
    assert.truthy(out:find("route claude: https://api.anthropic.com", 1, true), out)
    assert.is_nil(out:find("\n  api.anthropic.com\n", 1, true), out)
    assert.is_nil(out:find(SECRET, 1, true))
    status, out = fx:isolate({ "--workdir", tmp, "--network", "deny", "--agent", "claude", "--no-routes",
      "--dry-run", "--", "true" }, env)
    assert.are.equal(0, status)
    assert.truthy(out:find("\n  api.anthropic.com\n", 1, true), out)
    assert.is_nil(out:find("route claude", 1, true))
  end)

  it("--git sends the --secret routes' hosts through them, never the agent's model API", function()
    if helpers.skip_without_bwrap() then return end
    local status, out, err = fx:isolate({ "--workdir", tmp, "--network", "deny", "--agent", "claude",
      "--secret", "MY_TOKEN@https://git.example.com#basic:x-access-token", "--git", "--", "env" },
      { env = { "MY_TOKEN=" .. SECRET, "ANTHROPIC_API_KEY=sk-ant-" .. SECRET } })
    assert.are.equal(0, status, err)
    assert.is_nil((out .. err):find(SECRET, 1, true))
    assert.truthy(out:find("\nGIT_CONFIG_COUNT=1\n", 1, true), out)
    assert.truthy(out:find("\nGIT_CONFIG_KEY_0=url.http://127.0.0.1:3128/git-example-com/.insteadOf\n", 1, true), out)
    assert.truthy(out:find("\nGIT_CONFIG_VALUE_0=https://git.example.com/\n", 1, true), out)
    assert.truthy(out:find("\nANTHROPIC_API_KEY=isolation-route-claude\n", 1, true), out)
    assert.truthy(out:find("\nANTHROPIC_BASE_URL=http://127.0.0.1:3128/claude\n", 1, true), out)
    assert.truthy(out:find("\nMY_TOKEN=isolation-route-git-example-com\n", 1, true), out)
  end)

  it("--dry-run names the route and its variable, never the secret", function()
    if not dir then pending("openssl, python3 and curl are needed") return end
    if helpers.skip_without_bwrap() then return end
    local status, out, err = isolate({ "--network", "deny", "--dry-run", "--secret",
      "MY_TOKEN@https://git.example.com", "--git", "--", "true" })
    assert.are.equal(0, status, err)
    assert.truthy(out:find("route git-example-com: https://git.example.com", 1, true), out)
    assert.truthy(out:find("ISOLATION_ROUTE_GIT_EXAMPLE_COM", 1, true), out)
    assert.truthy(out:find("insteadOf", 1, true), out)
    assert.is_nil((out .. err):find(SECRET, 1, true))
  end)

  it("refuses a bad --secret, an unset variable, and a network other than deny", function()
    local status, _, err = isolate({ "--secret", "nope", "--", "true" })
    assert.are.equal(2, status)
    assert.truthy(err:find("--secret must be", 1, true), err)
    status, _, err = isolate({ "--network", "deny", "--secret", "UNSET_VAR_X@https://example.com", "--", "true" })
    assert.are.equal(2, status)
    assert.truthy(err:find("UNSET_VAR_X is not set", 1, true), err)
    status, _, err = isolate({ "--network", "allow", "--secret", "MY_TOKEN@https://example.com", "--", "true" })
    assert.are.equal(2, status)
    assert.truthy(err:find("needs --network deny", 1, true), err)
  end)
end)

describe("the session manager's secrets", function()
  local session = require("isolation.session")
  local dir, root, mgr, lines, up
  setup(function() dir = tls.ca_and_leaf("IP:127.0.0.1") end)
  teardown(function() if dir then helpers.rmtree(dir) end end)
  before_each(function()
    root = helpers.tmpdir()
    assert(os.execute("mkdir -p " .. helpers.shquote(root .. "/work")))
    lines = {}
    mgr = assert(session.manager(launchers.recording(lines, { runtime_dir = root .. "/run" })))
  end)
  after_each(function()
    mgr:close()
    if up then up.stop() end
    up = nil
    helpers.rmtree(root)
  end)

  local function project() return launchers.project("deny") end

  it("secrets and agent_keys: the sandbox reaches the upstream with the values, which are in no line or env", function()
    if not dir then pending("openssl, python3 and curl are needed") return end
    if helpers.skip_without_bwrap() then return end
    up = tls.start(dir, "good")
    local cmd = "curl -sS --max-time 20 \"$ISOLATION_ROUTE_UP/git\" > a.out; curl -sS --max-time 20 -X POST "
      .. "\"$ANTHROPIC_BASE_URL/v1/messages\" -H \"x-api-key: $ANTHROPIC_API_KEY\" -d '{}' > b.out;"
      .. " env > env.out; for p in /proc/[0-9]*; do cat \"$p/environ\" 2>/dev/null; done >> env.out; exit 0"
    assert(mgr:launch({ id = "r1", project = project(), agent = "claude", workdir = root .. "/work", command = cmd,
      upstream_ca_file = dir .. "/ca.pem",
      secrets = { { name = "up", env = "GIT_TOKEN", value = SECRET, url = "https://127.0.0.1:" .. up.port,
        header = "basic:x-access-token", git = true } },
      agent_keys = { ANTHROPIC_API_KEY = SECRET .. "-model",
        ANTHROPIC_BASE_URL = "https://127.0.0.1:" .. up.port .. "/anthropic" } }))
    assert.is_nil(lines[1]:find(SECRET, 1, true), "the secret is in the line")
    -- under the HOME the line was built from (its agent config entries are bound by name)
    local code, _, err = helpers.run("exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="
      .. helpers.shquote(os.getenv("HOME")) .. " timeout -k 5 60 sh -c " .. helpers.shquote(lines[1]))
    assert.are.equal(0, code, err)
    local env = helpers.read(root .. "/work/env.out")
    assert.is_nil(env:find(SECRET, 1, true), env)
    assert.truthy(env:find("ANTHROPIC_API_KEY=isolation-route-claude", 1, true), env)
    assert.truthy(env:find("GIT_CONFIG_COUNT=1", 1, true), env)
    local reqs = up.requests()
    assert.are.equal(2, #reqs, helpers.read(root .. "/work/a.out") .. helpers.read(root .. "/work/b.out"))
    local _, enc = helpers.run("printf %s " .. helpers.shquote("x-access-token:" .. SECRET) .. " | base64 -w0")
    assert.are.same({ "Basic " .. enc }, tls.header(reqs[1], "authorization"))
    assert.are.equal("/anthropic/v1/messages", reqs[2].path)
    assert.are.same({ SECRET .. "-model" }, tls.header(reqs[2], "x-api-key"))
  end)
end)

describe("git through a route", function()
  local dir, fx
  setup(function()
    if helpers.run("command -v git") ~= 0 then return end
    dir = tls.ca_and_leaf("IP:127.0.0.1")
  end)
  teardown(function() if dir then helpers.rmtree(dir) end end)
  after_each(function()
    if fx then fx:close() end
    fx = nil
  end)

  it("clone, fetch and push over smart HTTP from a deny sandbox; the server checks the token", function()
    if not dir then pending("openssl, python3, curl and git are needed") return end
    if helpers.skip_without_bwrap() then return end
    fx = isolate_run.new()
    local tmp, home = fx.tmp, fx.home
    local q = helpers.shquote
    local code, _, err = helpers.run(("set -e; D=%s; mkdir -p $D/git; git init -q --bare $D/git/repo.git;"
      .. " git -C $D/git/repo.git config http.receivepack true;"
      .. " git -C $D/git/repo.git symbolic-ref HEAD refs/heads/main; git init -q $D/seed; cd $D/seed;"
      .. " git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m first;"
      .. " git push -q $D/git/repo.git HEAD:refs/heads/main"):format(q(dir)))
    assert.are.equal(0, code, err)
    local _, enc = helpers.run("printf %s " .. helpers.shquote("x-access-token:" .. SECRET) .. " | base64 -w0")
    helpers.write(dir .. "/git_auth", "Basic " .. enc)
    local up = fx:upstream(tls.start(dir, "good"))
    local url = "https://127.0.0.1:" .. up.port .. "/git"
    helpers.write(tmp .. "/t.sh", ([[
set -e
git clone -q %s/repo.git clone
cd clone
git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m second
git push -q origin HEAD:main
git fetch -q origin
git log --format=%%s origin/main
]]):format(url))
    local status, out, errout = fx:isolate({ "--workdir", tmp, "--network", "deny", "--secret",
      "gitup=GIT_TOKEN@" .. url .. "#basic:x-access-token", "--git", "--upstream-ca", dir .. "/ca.pem",
      "--", "bash", "t.sh" }, { env = { "GIT_TOKEN=" .. SECRET } })
    assert.are.equal(0, status, errout)
    assert.are.equal("second\nfirst\n", out)
    assert.is_nil((out .. errout):find(SECRET, 1, true))
    code, out = helpers.run("git --git-dir=" .. q(dir .. "/git/repo.git") .. " log --format=%s main")
    assert.are.equal(0, code)
    assert.are.equal("second\nfirst\n", out, "the push reached the server")
    local files = select(2, helpers.run("grep -rl " .. q(SECRET) .. " " .. q(tmp) .. " " .. q(home) .. " || true"))
    assert.are.equal("", files, "the secret is in no file of the workdir or HOME")
  end)
end)
