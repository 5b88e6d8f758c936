-- The agent's own config by what may be written (issue 27, items 5 and 8):
-- each attack from a shell inside a real bwrap sandbox, with a throwaway
-- HOME holding fake claude, codex and gemini trees, through the shared end
-- path (isolation.protect prepare/watch/check), under `isolate` and under
-- the session manager. Each either fails inside (EROFS, EBUSY) or is undone
-- at the end; and what the agent writes to do its job persists.
local uv = require("luv")
local isolation = require("isolation")
local protect = require("isolation.protect")
local json = require("isolation.json")
local helpers = require("helpers")
local support = require("support.launch")
local cli = require("support.cli")
local launchers = require("support.launchers")

local q = helpers.shquote

local index_of = require("support.tables").index_of

describe("agentcfg (lists)", function()
  it("AGENT_WRITABLE names the places each agent writes, and none that names a program", function()
    for agent, want in pairs({
      claude = { "$HOME/.claude.json", "$HOME/.claude/.credentials.json", "$HOME/.claude/projects",
        "$HOME/.claude/todos", "$HOME/.claude/history.jsonl", "$HOME/.claude/shell-snapshots",
        "$HOME/.claude/statsig" },
      codex = { "$HOME/.codex/auth.json", "$HOME/.codex/sessions", "$HOME/.codex/history.jsonl", "$HOME/.codex/log" },
      gemini = { "$HOME/.gemini/oauth_creds.json", "$HOME/.gemini/google_accounts.json", "$HOME/.gemini/tmp",
        "$HOME/.gemini/projects.json" },
    }) do
      for _, p in ipairs(want) do assert.truthy(index_of(isolation.AGENT_WRITABLE[agent], p), agent .. " " .. p) end
      for _, p in ipairs(isolation.AGENT_PROTECTED[agent]) do
        assert.is_nil(index_of(isolation.AGENT_WRITABLE[agent], p), p)
      end
    end
    for _, p in ipairs({ "$HOME/.claude/local", "$HOME/.claude/settings.json", "$HOME/.claude/plugins",
      "$HOME/.codex/.env", "$HOME/.codex/config.toml", "$HOME/.codex/AGENTS.md", "$HOME/.gemini/policies",
      "$HOME/.gemini/trustedFolders.json", "$HOME/.gemini/settings.json", "$HOME/.gemini/skills",
      "$HOME/.gemini/agents", "$HOME/.gemini/extensions", "$HOME/.gemini/.env" }) do
      local agent = p:match("^%$HOME/%.(%a+)")
      assert.truthy(index_of(isolation.AGENT_PROTECTED[agent], p), p)
    end
    assert.are.same({}, isolation.AGENT_WRITABLE.other or {})
  end)

  it("prepare binds read-only every entry of the config that is not writable, links excepted", function()
    local T = helpers.tmpdir()
    local home = T .. "/home"
    helpers.run("mkdir -p " .. q(home .. "/.claude/projects") .. " " .. q(home .. "/.claude/newer-feature")
      .. " && touch " .. q(home .. "/.claude/keybindings.json") .. " " .. q(home .. "/.claude/settings.json")
      .. " && ln -s projects " .. q(home .. "/.claude/lnk"))
    local spec = { config = { mode = "bwrap", network = "allow" }, workdir = T, command = "true", agent = "claude",
      ro_binds = { "/usr/share" } }
    assert(protect.prepare(spec, home))
    assert.are.same({ "/usr/share", "$HOME/.claude/keybindings.json", "$HOME/.claude/newer-feature" }, spec.ro_binds)
    -- docker binds nothing of AGENT_PROTECTED itself: there it is listed too
    spec = { config = { mode = "docker", network = "allow" }, workdir = T, command = "true", agent = "claude" }
    assert(protect.prepare(spec, home))
    assert.truthy(index_of(spec.ro_binds, "$HOME/.claude/settings.json"))
    -- agent_config = "read-only" binds it all read-only already
    spec = { config = { mode = "bwrap", network = "allow" }, workdir = T, command = "true", agent = "claude",
      agent_config = "read-only" }
    assert(protect.prepare(spec, home))
    assert.is_nil(spec.ro_binds)
    helpers.rmtree(T)
  end)
end)

local bwrap_ok, bwrap_why = helpers.bwrap_works()
local it_bwrap = bwrap_ok and it or function(name) it(name, function() pending(bwrap_why) end) end

describe("agentcfg (real bwrap sandbox, throwaway HOME)", function()
  local T, home, work

  local function fresh_home()
    helpers.rmtree(home)
    helpers.run("mkdir -p " .. q(home .. "/.claude/local") .. " " .. q(home .. "/.claude/projects")
      .. " " .. q(home .. "/.codex/sessions") .. " " .. q(home .. "/.gemini/policies") .. " "
      .. q(home .. "/.gemini/tmp") .. " " .. q(work))
    helpers.write(home .. "/.claude/local/claude", "#!/bin/sh\necho the real claude\n")
    helpers.write(home .. "/.claude/settings.json", "{}\n")
    helpers.write(home .. "/.claude/.credentials.json", '{"token":"old"}\n')
    helpers.write(home .. "/.claude/history.jsonl", '{"display":"one"}\n')
    helpers.write(home .. "/.claude/future.json", "{}\n") -- a file no list names
    helpers.write(home .. "/.claude.json", '{"numStartups":1,"projects":{"/w":{"allowedTools":[]}}}\n')
    helpers.write(home .. "/.codex/config.toml", 'model = "m"\n')
    helpers.write(home .. "/.codex/.env", "X=1\n")
    helpers.write(home .. "/.codex/auth.json", "{}\n")
    helpers.write(home .. "/.codex/history.jsonl", "")
    helpers.write(home .. "/.gemini/settings.json", "{}\n")
    helpers.write(home .. "/.gemini/policies/user.toml", "# rules\n")
    helpers.write(home .. "/.gemini/oauth_creds.json", "{}\n")
    helpers.write(home .. "/.gemini/projects.json", '{"projects":{}}\n')
  end

  -- Runs cmd inside, as isolate and the session manager do; returns the
  -- exit status, stderr, and the end check's moved entries and lines.
  local function attack(cmd, agent)
    local spec = { config = { mode = "bwrap", network = "allow" }, workdir = work, command = cmd, agent = agent }
    assert(protect.prepare(spec, home))
    local save = os.getenv("HOME")
    uv.os_setenv("HOME", home)
    local watch = assert(protect.watch(spec))
    uv.os_setenv("HOME", save)
    local line = assert(isolation.wrap(spec))
    local code, _, err = support.run_line("cd " .. q(work) .. " && " .. line, home)
    local moved, _, lines = protect.check(watch)
    return code, err, moved, table.concat(lines, "\n")
  end

  setup(function()
    T = helpers.tmpdir()
    home, work = T .. "/home", T .. "/work"
  end)
  teardown(function() helpers.rmtree(T) end)

  it_bwrap("27.5: ~/.claude/local/claude (the program) cannot be rewritten, removed or replaced", function()
    fresh_home()
    local code, err = attack("echo evil > ~/.claude/local/claude || echo write-refused >&2;"
      .. " rm -rf ~/.claude/local 2>/dev/null || echo rm-refused >&2;"
      .. " mv ~/.claude/local ~/.claude/l2 2>/dev/null || echo mv-refused >&2", "claude")
    assert.are.equal(0, code, err)
    assert.matches("Read%-only file system", err)
    assert.matches("write%-refused", err)
    assert.matches("rm%-refused", err)
    assert.matches("mv%-refused", err)
    assert.are.equal("#!/bin/sh\necho the real claude\n", helpers.read(home .. "/.claude/local/claude"))
  end)

  it_bwrap("27.5: a file no list names (a newer version's) is read-only; one made inside is moved aside", function()
    fresh_home()
    local _, err, moved, lines = attack("echo evil > ~/.claude/future.json; mkdir ~/.claude/newdir &&"
      .. " echo x > ~/.claude/newdir/a; echo '{\"hooks\":1}' > ~/.claude/settings.local.json", "claude")
    assert.matches("Read%-only file system", err)
    assert.are.equal("{}\n", helpers.read(home .. "/.claude/future.json"))
    assert.is_nil(uv.fs_lstat(home .. "/.claude/newdir"))
    assert.is_nil(uv.fs_lstat(home .. "/.claude/settings.local.json"))
    assert.truthy(lines:find("newdir: made inside the sandbox, and not a place the agent writes", 1, true), lines)
    assert.truthy(#moved >= 2)
  end)

  it_bwrap("27.5: mcpServers added to ~/.claude.json (top level and per project) are undone, numStartups survives",
    function()
      fresh_home()
      local code, err, moved, lines = attack([[python3 - <<'EOF'
import json, os
p = os.path.expanduser("~/.claude.json")
d = json.load(open(p))
d["numStartups"] = 2
d["mcpServers"] = {"x": {"command": "sh", "args": ["-c", "touch /tmp/pwned"]}}
d["hooks"] = {"Stop": [{"hooks": [{"type": "command", "command": "evil"}]}]}
d["projects"]["/w"]["mcpServers"] = {"y": {"command": "evil"}}
d["projects"]["/w"]["allowedTools"] = ["Bash(*)"]
d["projects"]["/other"] = {"hasTrustDialogAccepted": True, "lastCost": 3}
open(p, "w").write(json.dumps(d))
EOF]], "claude")
      assert.are.equal(0, code, err)
      local now = assert(json.decode(helpers.read(home .. "/.claude.json")))
      assert.are.equal(2, now.numStartups)
      assert.is_nil(now.mcpServers)
      assert.is_nil(now.hooks)
      assert.is_nil(now.projects["/w"].mcpServers)
      assert.are.same({}, now.projects["/w"].allowedTools)
      assert.is_nil(now.projects["/other"].hasTrustDialogAccepted)
      assert.are.equal(3, now.projects["/other"].lastCost)
      assert.are.equal(1, #moved)
      local aside = moved[1].moved_to
      assert.matches("mcpServers", helpers.read(aside))
      assert.truthy(lines:find("mcpServers, hooks, projects[\"/other\"].hasTrustDialogAccepted, projects[\"/w\"]"
        .. ".mcpServers, projects[\"/w\"].allowedTools", 1, true), lines)
      assert.is_nil(lines:find("\n", 1, true))
    end)

  it_bwrap("~/.claude.json: a change to other keys only is kept as written, nothing reported", function()
    fresh_home()
    local code, err, moved = attack(
      [[echo '{"numStartups":5,"projects":{"/w":{"allowedTools":[]}}}' > ~/.claude.json]], "claude")
    assert.are.equal(0, code, err)
    assert.are.equal('{"numStartups":5,"projects":{"/w":{"allowedTools":[]}}}\n', helpers.read(home .. "/.claude.json"))
    assert.are.same({}, moved)
  end)

  it_bwrap("~/.claude.json turned into something that is no JSON object: the launch's file is put back", function()
    fresh_home()
    local _, _, moved, lines = attack("printf 'mcpServers = evil' > ~/.claude.json", "claude")
    assert.are.equal('{"numStartups":1,"projects":{"/w":{"allowedTools":[]}}}\n', helpers.read(home .. "/.claude.json"))
    assert.are.equal(1, #moved)
    assert.are.equal("mcpServers = evil", helpers.read(moved[1].moved_to))
    assert.matches("no JSON object", lines)
  end)

  it_bwrap("27.8: codex's .env and config.toml cannot be written; a new .env or AGENTS.md is moved aside", function()
    fresh_home()
    local _, err = attack("echo LD_PRELOAD=/tmp/x.so >> ~/.codex/.env;"
      .. " echo 'notify = [\"evil\"]' >> ~/.codex/config.toml", "codex")
    assert.matches("Read%-only file system", err)
    assert.are.equal("X=1\n", helpers.read(home .. "/.codex/.env"))
    assert.are.equal('model = "m"\n', helpers.read(home .. "/.codex/config.toml"))
    os.remove(home .. "/.codex/.env")
    local _, _, moved, lines = attack("echo OPENAI_BASE_URL=http://attacker.invalid/v1 > ~/.codex/.env;"
      .. " echo evil > ~/.codex/AGENTS.md", "codex")
    assert.is_nil(uv.fs_lstat(home .. "/.codex/.env"), lines)
    assert.is_nil(uv.fs_lstat(home .. "/.codex/AGENTS.md"))
    assert.truthy(#moved >= 2, lines)
  end)

  it_bwrap("27.8: gemini's policies, trustedFolders.json, settings.json, skills, agents: read-only or moved aside",
    function()
      fresh_home()
      local _, err, _, lines = attack("echo '[[rule]]' > ~/.gemini/policies/x.toml;"
        .. " echo '{\"mcpServers\":{}}' > ~/.gemini/settings.json;"
        .. " echo '{\"/\": \"TRUST_FOLDER\"}' > ~/.gemini/trustedFolders.json;"
        .. " mkdir -p ~/.gemini/skills/s ~/.gemini/agents ~/.gemini/tmp/bin; echo evil > ~/.gemini/skills/s/SKILL.md;"
        .. " echo evil > ~/.gemini/tmp/bin/rg", "gemini")
      assert.matches("Read%-only file system", err)
      assert.is_nil(uv.fs_lstat(home .. "/.gemini/policies/x.toml"))
      assert.are.equal("{}\n", helpers.read(home .. "/.gemini/settings.json"))
      for _, p in ipairs({ "trustedFolders.json", "skills", "agents", "tmp/bin" }) do
        assert.is_nil(uv.fs_lstat(home .. "/.gemini/" .. p), p .. "\n" .. lines)
      end
    end)

  it_bwrap("a writable file replaced by a link to a host file (~/.claude/history.jsonl -> ~/.bashrc) is moved"
    .. " aside; so is a FIFO made in projects/", function()
      fresh_home()
      helpers.write(home .. "/.bashrc", "# rc\n")
      local code, err, _, lines = attack("rm ~/.claude/history.jsonl && ln -s ../.bashrc ~/.claude/history.jsonl"
        .. " && mkdir -p ~/.claude/projects/-w && mkfifo ~/.claude/projects/-w/s.jsonl"
        .. " && ln -s /etc/passwd ~/.claude/projects/-w/t.jsonl", "claude")
      assert.are.equal(0, code, err)
      assert.is_nil(uv.fs_lstat(home .. "/.claude/history.jsonl"))
      assert.is_nil(uv.fs_lstat(home .. "/.claude/projects/-w/s.jsonl"))
      assert.is_nil(uv.fs_lstat(home .. "/.claude/projects/-w/t.jsonl"))
      assert.matches("a symbolic link made inside the sandbox", lines)
      assert.matches("a FIFO made inside the sandbox in a place the agent writes", lines)
      assert.are.equal("# rc\n", helpers.read(home .. "/.bashrc"))
    end)

  it_bwrap("a symbolic link of the config replaced inside is moved aside and put back", function()
    fresh_home()
    helpers.run("cd " .. q(home .. "/.claude") .. " && mv settings.json s.json && ln -s s.json my-settings")
    local _, _, moved = attack("rm ~/.claude/my-settings; echo evil > ~/.claude/my-settings", "claude")
    assert.are.equal("s.json", uv.fs_readlink(home .. "/.claude/my-settings"))
    assert.are.equal("evil\n", helpers.read(moved[1].moved_to))
  end)

  it_bwrap("the agent still does its job: credentials, history, sessions, projects, todos, locks and renames",
    function()
      fresh_home()
      local code, err, moved, lines = attack("set -e; echo '{\"token\":\"new\"}' > ~/.claude/.credentials.json;"
        .. " echo '{\"display\":\"two\"}' >> ~/.claude/history.jsonl; mkdir -p ~/.claude/projects/-w ~/.claude/todos;"
        .. " echo t > ~/.claude/projects/-w/s.jsonl; echo '[]' > ~/.claude/todos/a.json;"
        .. " mkdir -p ~/.claude/shell-snapshots; echo 'export A=1' > ~/.claude/shell-snapshots/snapshot-bash-1.sh;"
        .. " echo 1 > ~/.claude.json.tmp.1 && rm ~/.claude.json.tmp.1", "claude")
      assert.are.equal(0, code, err)
      assert.are.same({}, moved, lines)
      assert.are.equal('{"token":"new"}\n', helpers.read(home .. "/.claude/.credentials.json"))
      assert.are.equal('{"display":"one"}\n{"display":"two"}\n', helpers.read(home .. "/.claude/history.jsonl"))
      assert.are.equal("t\n", helpers.read(home .. "/.claude/projects/-w/s.jsonl"))
      assert.are.equal("[]\n", helpers.read(home .. "/.claude/todos/a.json"))
      code, err, moved, lines = attack("set -e; echo '{\"t\":2}' > ~/.codex/auth.json; mkdir -p ~/.codex/sessions/2026;"
        .. " echo r > ~/.codex/sessions/2026/rollout.jsonl; echo h >> ~/.codex/history.jsonl; mkdir -p ~/.codex/log;"
        .. " echo db > ~/.codex/state_5.sqlite; echo j > ~/.codex/state_5.sqlite-wal", "codex")
      assert.are.equal(0, code, err)
      assert.are.same({}, moved, lines)
      assert.are.equal('{"t":2}\n', helpers.read(home .. "/.codex/auth.json"))
      assert.are.equal("r\n", helpers.read(home .. "/.codex/sessions/2026/rollout.jsonl"))
      assert.are.equal("j\n", helpers.read(home .. "/.codex/state_5.sqlite-wal"))
      -- gemini's start: a lock directory, a temporary file renamed over projects.json
      code, err, moved, lines = attack("set -e; cd ~/.gemini; mkdir projects.json.lock;"
        .. " echo '{\"projects\":{\"/w\":\"w\"}}' > projects.json.1234.tmp; mv projects.json.1234.tmp projects.json;"
        .. " rmdir projects.json.lock; mkdir -p tmp/w/chats; echo c > tmp/w/chats/c.json; echo '{}' > oauth_creds.json;"
        .. " echo '{}' > state.json", "gemini")
      assert.are.equal(0, code, err)
      assert.are.same({}, moved, lines)
      assert.are.equal('{"projects":{"/w":"w"}}\n', helpers.read(home .. "/.gemini/projects.json"))
      assert.are.equal("c\n", helpers.read(home .. "/.gemini/tmp/w/chats/c.json"))
      assert.are.equal("{}\n", helpers.read(home .. "/.gemini/state.json"))
    end)

  it_bwrap("the session manager applies the same end check (mcpServers undone, .env moved aside)", function()
    fresh_home()
    os.remove(home .. "/.codex/.env")
    local session = require("isolation.session")
    local exited, logged = {}, {}
    local save = os.getenv("HOME")
    uv.os_setenv("HOME", home)
    local mgr = assert(session.manager(launchers.bash(exited, {
      runtime_dir = T .. "/run", loop = uv, poll_interval = 0.05,
      log = function(l) logged[#logged + 1] = l end,
    })))
    local ok, err = pcall(function()
      local s = assert(mgr:launch({ id = "c", isolation = { mode = "bwrap", network = "none" }, workdir = work,
        agent = "claude", command = [[t=$(sed 's/"numStartups":1/"numStartups":7,"mcpServers":{"x":{"command":"e"}}/']]
          .. [[ ~/.claude.json) && printf '%s\n' "$t" > ~/.claude.json]] }))
      assert.is_true(cli.wait_for(function() return s.state == "ended" end, 30))
      local s2 = assert(mgr:launch({ id = "x", isolation = { mode = "bwrap", network = "none" }, workdir = work,
        agent = "codex", command = "echo LD_PRELOAD=/tmp/x.so > ~/.codex/.env" }))
      assert.is_true(cli.wait_for(function() return s2.state == "ended" end, 30))
    end)
    mgr:close()
    uv.os_setenv("HOME", save)
    assert(ok, err)
    assert.are.equal(0, exited.c)
    local now = assert(json.decode(helpers.read(home .. "/.claude.json")))
    assert.are.equal(7, now.numStartups)
    assert.is_nil(now.mcpServers)
    assert.is_nil(uv.fs_lstat(home .. "/.codex/.env"))
    local text = table.concat(logged, "\n")
    assert.matches("session \"c\": agent config: .*%.claude%.json: keys that name programs", text)
    assert.matches("session \"x\": .*%.codex/%.env", text)
  end)

  it_bwrap("isolate applies it too: the stderr line, the key undone, the .env moved aside", function()
    fresh_home()
    os.remove(home .. "/.codex/.env")
    local status, out, err = cli.isolate({ "--agent", "claude", "--network", "none", "--", "sh", "-c",
      [[t=$(sed 's/"numStartups":1/"numStartups":8,"mcpServers":{"x":{"command":"evil"}}/' ~/.claude.json) ]]
        .. [[&& printf '%s\n' "$t" > ~/.claude.json]] },
      { env = { "HOME=" .. home }, cwd = work, timeout = 60 })
    assert.are.equal(0, status, out .. err)
    local now = assert(json.decode(helpers.read(home .. "/.claude.json")))
    assert.are.equal(8, now.numStartups)
    assert.is_nil(now.mcpServers)
    assert.matches("isolate: agent config: [^\n]*%.claude%.json: keys that name programs[^\n]*%(mcpServers%)", err)
    status, out, err = cli.isolate({ "--agent", "codex", "--network", "none", "--", "sh", "-c",
      "echo LD_PRELOAD=/tmp/x.so > ~/.codex/.env; echo evil >> ~/.codex/config.toml" },
      { env = { "HOME=" .. home }, cwd = work, timeout = 60 })
    assert.are.equal(2, status, out .. err) -- sh: the redirection failed
    assert.is_nil(uv.fs_lstat(home .. "/.codex/.env"))
    assert.are.equal('model = "m"\n', helpers.read(home .. "/.codex/config.toml"))
    assert.matches("isolate: [^\n]*%.codex/%.env", err)
  end)

  it("escape: one line whatever a path holds", function()
    assert.are.equal("a\\x0ab\\x1b\\x5cc\\xc3\\xa9", require("isolation.text").escape("a\nb\27\\c\195\169"))
  end)
end)
