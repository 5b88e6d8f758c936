-- Git keeps working inside the sandbox, and what it leaves in the workdir is
-- usable on the host (issue 27, "How it is proved"): one run clones from a
-- loopback `git daemon` (git://, through the proxy), then init, commit,
-- branch, rebase, stash, worktree add and submodule add from a local
-- repository; afterwards the host's git status, log, fsck and fetch work on
-- what was made, and the end check (isolation.gitcheck) moved nothing aside
-- and said nothing.
--
-- The daemon is reached with the network denied: `--allow-host
-- 127.0.0.1:PORT` (an IP pattern: the address rule admits a loopback
-- address only when named), and git's GIT_PROXY_COMMAND, a two-line script
-- made inside that runs socat's PROXY address through the proxy's CONNECT
-- (git:// honours no proxy variable). Real bwrap, a real daemon, real git.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")
local session = require("isolation.session")

local shq = helpers.shquote
local GIT = "git -c user.email=a@example.com -c user.name=a -c init.defaultBranch=main"

local function sh(cmd)
  local code, out, err = helpers.run(cmd)
  assert.equal(0, code, cmd .. "\n" .. out .. err)
  return out
end

-- A free loopback port (bound, read, closed: the daemon takes it next).
local free_port = require("support.proxy").closed_port

-- The command run inside: `url` is the daemon's repository.
local function inside(url)
  return table.concat({
    "set -e",
    -- git runs the proxy command with the host and port as $1 and $2
    "printf '#!/bin/sh\\nexec socat - \"PROXY:127.0.0.1:$1:$2,proxyport=${HTTP_PROXY##*:}\"\\n' > /tmp/gitproxy",
    "chmod +x /tmp/gitproxy", "export GIT_PROXY_COMMAND=/tmp/gitproxy",
    GIT .. " clone -q " .. url .. " clone",
    "cd clone",
    "echo a > a && git add a && " .. GIT .. " commit -q -m a", GIT .. " branch b",
    GIT .. " checkout -q b && echo b > b && git add b && " .. GIT .. " commit -q -m b",
    GIT .. " checkout -q main && echo c > c && git add c && " .. GIT .. " commit -q -m c",
    GIT .. " rebase -q main b", GIT .. " checkout -q main",
    "echo d >> a && " .. GIT .. " stash -q && " .. GIT .. " stash pop -q",
    GIT .. " worktree add -q ../wt b",
    GIT .. " init -q ../lib && " .. GIT .. " -C ../lib commit -q --allow-empty -m l",
    -- a relative URL would be taken relative to origin's (the daemon)
    GIT .. " -c protocol.file.allow=always submodule add -q \"$(cd ../lib && pwd)\" lib",
    GIT .. " commit -q -m sub",
    GIT .. " fetch -q origin",
    "git status --porcelain > ../inside-status",
    "echo done > ../inside-done",
  }, "\n")
end

describe("git keeps working inside, and the clone is usable on the host", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end
  local missing
  for _, program in ipairs({ "git", "socat" }) do
    if helpers.run("command -v " .. program) ~= 0 then missing = program end
  end
  if missing then
    it("is skipped: no " .. missing .. " here", function() pending("no " .. missing) end)
    return
  end

  local root, srv, daemon, port, url
  setup(function()
    root = helpers.tmpdir()
    srv = root .. "/srv"
    -- the daemon's repository, with two commits
    sh("mkdir -p " .. shq(srv) .. " && " .. GIT .. " init -q " .. shq(root .. "/seed") .. " && cd "
      .. shq(root .. "/seed") .. " && echo one > one && git add one && " .. GIT .. " commit -q -m one && echo two"
      .. " > two && git add two && " .. GIT .. " commit -q -m two && " .. GIT .. " clone -q --bare . "
      .. shq(srv .. "/up.git"))
    port = free_port()
    daemon = cli.spawn({ "git", "daemon", "--reuseaddr", "--export-all", "--base-path=" .. srv,
      "--listen=127.0.0.1", "--port=" .. port, srv })
    url = "git://127.0.0.1:" .. port .. "/up.git"
    assert.is_true(cli.wait_for(function()
      return helpers.run("git ls-remote " .. shq(url) .. " >/dev/null 2>&1") == 0 or daemon.status ~= nil
    end, 20) and daemon.status == nil, "git daemon did not start: " .. daemon.err)
  end)

  teardown(function()
    if daemon then
      daemon.kill("sigterm")
      daemon.wait(10)
    end
    if root then helpers.rmtree(root) end
  end)

  -- What the host's git does with what the run left in wd; `said` is the
  -- run's report (isolate's stderr, the manager's log lines).
  local function usable_on_host(wd, said, base)
    -- the end check found nothing to move: no git line, nothing moved
    assert.is_nil(said:find("git: ", 1, true), said)
    assert.is_nil(said:find("moved aside", 1, true), said)
    assert.equal("done\n", helpers.read(wd .. "/inside-done"), said)
    assert.equal(" M a\n", helpers.read(wd .. "/inside-status"))
    local c = wd .. "/clone"
    assert.equal(url .. "\n", sh("git -C " .. shq(c) .. " remote get-url origin"))
    assert.equal(" M a\n", sh("git -C " .. shq(c) .. " status --porcelain"))
    -- the history inside: the rebase put b on c; the submodule commit last
    assert.equal("sub\nc\na\n" .. base, sh("git -C " .. shq(c) .. " log --format=%s main"))
    assert.equal("b\nc\na\n" .. base, sh("git -C " .. shq(c) .. " log --format=%s b"))
    sh("git -C " .. shq(c) .. " fsck --no-progress --no-dangling")
    -- the host fetches from the daemon (its own route), from the clone, and
    -- through the worktree and the submodule
    local msg = "after-" .. wd:match("[^/]+$")
    sh("cd " .. shq(root .. "/seed") .. " && " .. GIT .. " commit -q --allow-empty -m " .. msg
      .. " && git push -q " .. shq(srv .. "/up.git") .. " main")
    sh("git -C " .. shq(c) .. " fetch -q origin")
    assert.equal(msg .. "\n", sh("git -C " .. shq(c) .. " log -1 --format=%s origin/main"))
    local copy = wd .. "-copy"
    sh(GIT .. " init -q " .. shq(copy) .. " && git -C " .. shq(copy) .. " fetch -q " .. shq(c) .. " main b")
    assert.equal("sub\n", sh("git -C " .. shq(copy) .. " log -1 --format=%s FETCH_HEAD"))
    sh("git -C " .. shq(wd .. "/wt") .. " status --porcelain && git -C " .. shq(c .. "/lib") .. " status")
    assert.equal("b\n", sh("git -C " .. shq(wd .. "/wt") .. " rev-parse --abbrev-ref HEAD"))
    helpers.rmtree(copy)
  end

  it("isolate --network deny --allow-host 127.0.0.1:PORT: clone over git:// from a loopback daemon, then init, "
    .. "commit, branch, rebase, stash, worktree add, submodule add; nothing moved aside; the host's status, log, "
    .. "fsck and fetch work", function()
    local wd, home = root .. "/isolate", root .. "/home-isolate"
    assert(uv.fs_mkdir(wd, 448))
    assert(uv.fs_mkdir(home, 448))
    local base = sh("git --git-dir " .. shq(srv .. "/up.git") .. " log --format=%s main")
    local code, out, err = cli.isolate({ "--network", "deny", "--allow-host", "127.0.0.1:" .. port, "--workdir", wd,
      "--", "bash", "-c", inside(url) }, { env = { "HOME=" .. home }, cwd = wd, timeout = 300 })
    assert.equal(0, code, out .. err)
    usable_on_host(wd, err, base)
  end)

  it("the session manager (default launcher), network deny, allow_hosts 127.0.0.1:PORT: the same run; nothing "
    .. "moved aside; the host's status, log, fsck and fetch work", function()
    local wd = root .. "/session"
    assert(uv.fs_mkdir(wd, 448))
    local base = sh("git --git-dir " .. shq(srv .. "/up.git") .. " log --format=%s main")
    local said, cut = {}, nil
    local mgr = assert(session.manager({
      runtime_dir = root .. "/run", stdio = { 0, 1, 2 },
      log = function(l) said[#said + 1] = l end,
      on_end = function(_, _, _, why) cut = why end,
    }))
    local ok, e = pcall(function()
      local s = assert(mgr:launch({ id = "g", isolation = { mode = "bwrap", network = "deny",
        allow_hosts = { "127.0.0.1:" .. port } }, workdir = wd, command = "bash -c " .. shq(inside(url)) }))
      assert.is_true(cli.wait_for(function() return s.state == "ended" end, 300), "the session did not end")
      assert.equal(0, s.exit_status, table.concat(said, "\n"))
      assert.is_nil(cut)
      usable_on_host(wd, table.concat(said, "\n"), base)
    end)
    mgr:close()
    assert(ok, e)
  end)
end)
