-- isolation.gitcheck (issue 27 items 1 and 2, the walk): git directories
-- checked at the end against what git writes, in real bwrap sandboxes under
-- `isolate` and under the session manager. After each attack the host's git
-- (status, log, checkout, commit, fetch) runs nothing and writes nothing
-- outside the workdir; git keeps working inside, and a repository cloned
-- inside works on the host afterwards.
local uv = require("luv")
local helpers = require("helpers")
local glue = require("support.glue")
local gitcheck = require("isolation.gitcheck")
local launchers = require("support.launchers")
local session = require("isolation.session")

local shq = helpers.shquote
local ISOLATE = shq(require("support.cli").ISOLATE)
local GIT = "git -c user.email=a@example.com -c user.name=a -c init.defaultBranch=main"

describe("gitcheck: ref names and contents (git check-ref-format)", function()
  it("accepts what git accepts", function()
    for _, n in ipairs({ "refs/heads/main", "refs/heads/agent;touch${IFS}/tmp/pwned", "refs/tags/v1.0",
      "refs/heads/a-b_c/d", "refs/remotes/origin/HEAD", "refs/heads/caf\xc3\xa9" }) do
      assert.is_true(gitcheck.valid_refname(n), n)
    end
  end)
  it("refuses what git refuses", function()
    for _, n in ipairs({ "", "@", "main", "refs/heads/a..b", "refs/heads/.hidden", "refs/heads/a.lock",
      "refs/heads/a/", "/refs/heads/a", "refs//heads", "refs/heads/a.", "refs/heads/a@{1}", "refs/heads/a b",
      "refs/heads/a~1", "refs/heads/a^", "refs/heads/a:b", "refs/heads/a?", "refs/heads/a*", "refs/heads/a[",
      "refs/heads/a\\b", "refs/heads/a\tb", "refs/heads/a\nb", "refs/heads/a\127", "refs/heads/a\0b" }) do
      assert.is_false(gitcheck.valid_refname(n), n)
    end
  end)
  it("HEAD and loose refs: an object id or ref: plus a valid name under refs/", function()
    assert.is_true(gitcheck.valid_ref_content(("a"):rep(40) .. "\n"))
    assert.is_true(gitcheck.valid_ref_content(("0"):rep(64)))
    assert.is_true(gitcheck.valid_ref_content("ref: refs/heads/main\n"))
    for _, c in ipairs({ ("a"):rep(39), ("a"):rep(41), ("A"):rep(40), "ref: HEAD\n", "ref: refs/heads/a..b\n",
      "ref: /etc/passwd", "ref:refs/heads/main", ("a"):rep(40) .. " x", "" }) do
      assert.is_false(gitcheck.valid_ref_content(c), c)
    end
  end)
end)

describe("gitcheck: config kept by key", function()
  it("keeps the keys git init and git clone write, removes every other (sections on one line, legacy "
    .. "subsections, includes, aliases)", function()
    local text = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[core]fsmonitor = evil\n"
      .. "[remote \"origin\"]\n\turl = /src/x\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
      .. "\tuploadpack = evil\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n"
      .. "[alias]\n\tst = !evil\n[include]\n\tpath = /tmp/x\n[core.x]\n\tbare = true\n"
      .. "[user]\n\tname = \"a ; b\" # comment\n\tEmail = a@example.com\n[CORE]\n\tHooksPath = /tmp\n"
    local new, removed = gitcheck.filter_config(text)
    assert.equal("[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = /src/x\n"
      .. "\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n"
      .. "\tmerge = refs/heads/main\n[user]\n\tname = \"a ; b\"\n\temail = a@example.com\n", new)
    assert.same({ "core.fsmonitor", "remote.origin.uploadpack", "alias.st", "include.path", "core.x.bare",
      "core.hookspath" }, removed)
  end)
  it("a line git would refuse drops the rest and says so; a value with a control byte is dropped", function()
    local new, removed = gitcheck.filter_config("[user]\n\tname = \"a\\x\"\n[core]\n\tfsmonitor = x\n")
    assert.equal("", new)
    assert.matches("^everything after a bad escape", removed[1])
    new, removed = gitcheck.filter_config("[user]\n\tname = a\1b\n")
    assert.equal("", new)
    assert.same({ "user.name" }, removed)
  end)
end)

local project = launchers.project

-- Runs `command` in a sandbox on `wd` the way `how` says ("isolate" or
-- "session"); returns isolate's exit code (0 for the manager), the report
-- (stderr, or the manager's log lines) and the end check's failure.
local function run_inside(how, root, wd, command)
  if how == "isolate" then
    local code, _, err = helpers.run(ISOLATE .. " --workdir " .. shq(wd) .. " -- bash -c " .. shq(command))
    return code, err
  end
  local said, cut = {}, nil
  local mgr = assert(session.manager(launchers.glue(root, {
    runtime_dir = root .. "/run",
    log = function(l) said[#said + 1] = l end,
    on_end = function(_, _, _, why) cut = why end,
  })))
  local s = assert(mgr:launch({ id = "s1", project = project("none"), agent = "claude", workdir = wd,
    command = "(" .. command .. ") > /dev/null 2>&1; echo done > " .. shq(root .. "/wd-done") }))
  -- the done file is outside the workdir: only the line's end is waited for
  local ok = glue.wait(function() mgr:poll() return s.state == "ended" end, 400)
  mgr:close()
  assert.is_true(ok, tostring(helpers.read(root .. "/launch.log")))
  return 0, table.concat(said, "\n"), cut
end

local function sh(cmd)
  local code, out, err = helpers.run(cmd)
  assert.equal(0, code, cmd .. "\n" .. out .. err)
  return out
end

for _, how in ipairs({ "isolate", "session" }) do
  describe("gitcheck attacks under " .. how, function()
    local root, wd, host
    before_each(function()
      root = helpers.tmpdir()
      wd = root .. "/wd"
      host = root .. "/host" -- stands for the user's home: nothing may change there
      assert(uv.fs_mkdir(wd, 448))
      assert(uv.fs_mkdir(host, 448))
      helpers.write(host .. "/bashrc", "original\n")
      helpers.write(host .. "/msg", "original\n")
      helpers.write(host .. "/fetch", "original\n")
      sh("cd " .. shq(wd) .. " && " .. GIT .. " init -q . && " .. GIT .. " commit -q --allow-empty -m init && "
        .. GIT .. " init -q --bare " .. shq(root .. "/remote") .. " && " .. GIT .. " push -q "
        .. shq(root .. "/remote") .. " main")
    end)
    after_each(function() helpers.rmtree(root) end)

    local function unchanged()
      for _, f in ipairs({ "bashrc", "msg", "fetch" }) do
        assert.equal("original\n", helpers.read(host .. "/" .. f), f)
      end
      assert.is_false(helpers.exists(root .. "/pwned"), "a program the sandbox named ran on the host")
      assert.is_false(helpers.exists("/tmp/pwned-" .. root:match("[^/]+$")))
    end

    it("logs/HEAD, COMMIT_EDITMSG and FETCH_HEAD made symbolic links to host files, HEAD on a hostile branch: "
      .. "the host's checkout, commit and fetch write nothing outside", function()
      if helpers.skip_without_bwrap() then return end
      local code, report = run_inside(how, root, wd, table.concat({
        GIT .. " checkout -q -b 'agent;touch${IFS}" .. root .. "/pwned'",
        "rm -f .git/logs/HEAD && ln -s " .. shq(host .. "/bashrc") .. " .git/logs/HEAD",
        "ln -sf " .. shq(host .. "/msg") .. " .git/COMMIT_EDITMSG",
        "ln -sf " .. shq(host .. "/fetch") .. " .git/FETCH_HEAD",
      }, " && "))
      assert.equal(0, code, report)
      for _, p in ipairs({ "logs/HEAD", "COMMIT_EDITMSG", "FETCH_HEAD" }) do
        assert.matches(p .. " (a symbolic link)", report, 1, true)
        assert.equal("file", (uv.fs_lstat(wd .. "/.git/" .. p) or { type = "file" }).type, p)
      end
      assert.matches("git: " .. wd .. "/.git: moved aside to " .. wd .. "/.git/isolation-quarantine-", report, 1, true)
      -- the user's next commands
      sh("cd " .. shq(wd) .. " && " .. GIT .. " checkout -q main && " .. GIT .. " commit -q --allow-empty -m x && "
        .. GIT .. " fetch -q " .. shq(root .. "/remote") .. " && git log --oneline >/dev/null && git status >/dev/null")
      unchanged()
      -- moved, not deleted: each link is there to inspect
      local q = assert(report:match("moved aside to (%S+/%.git/isolation%-quarantine%-[^,]+),"))
      assert.equal(host .. "/bashrc", uv.fs_readlink(q .. "/%2Flogs%2FHEAD"))
    end)

    local PAGER = "echo pager > " .. "%s/pwned; cat"

    it("src/ made a bare repository with core.pager (and core.worktree): the host's git log there runs nothing "
      .. "and checkout writes nothing outside", function()
      if helpers.skip_without_bwrap() then return end
      local code, report = run_inside(how, root, wd, GIT .. " clone -q --bare . src && cd src && "
        .. "git config core.pager " .. shq(PAGER:format(root)) .. " && git config core.worktree " .. shq(host))
      assert.equal(0, code, report)
      assert.matches("git: " .. wd .. "/src: moved aside to ", report, 1, true)
      assert.matches("the keys core.pager, core.worktree removed", report, 1, true)
      -- a terminal, so that git pages
      sh("cd " .. shq(wd .. "/src") .. " && script -qec 'git log; git status' /dev/null >/dev/null 2>&1; true")
      unchanged()
      assert.equal("true", sh("cd " .. shq(wd .. "/src") .. " && git rev-parse --is-bare-repository"):match("%S+"))
    end)

    it("the workdir itself made a bare repository (no .git) with core.pager: the host's git log runs nothing",
      function()
        if helpers.skip_without_bwrap() then return end
        sh("rm -rf " .. shq(wd .. "/.git"))
        -- with a commit, so that git log has something to page
        local code, report = run_inside(how, root, wd, GIT .. " init -q --bare . && c=$(" .. GIT .. " commit-tree "
          .. "-m x $(git mktree </dev/null)) && git update-ref refs/heads/main $c && git symbolic-ref HEAD "
          .. "refs/heads/main && git config core.pager " .. shq(PAGER:format(root)))
        assert.equal(0, code, report)
        assert.matches("git: " .. wd .. ": moved aside to ", report, 1, true)
        sh("cd " .. shq(wd) .. " && script -qec 'git log' /dev/null >/dev/null 2>&1; true")
        unchanged()
      end)

    it("commondir made in the workdir's .git and in a nested repository's, naming a directory whose config "
      .. "sets core.fsmonitor: the host's git status runs nothing", function()
      if helpers.skip_without_bwrap() then return end
      sh("cd " .. shq(wd) .. " && " .. GIT .. " init -q sub && " .. GIT .. " -C sub commit -q --allow-empty -m s")
      local code, report = run_inside(how, root, wd, table.concat({
        "mkdir -p evil/objects evil/refs",
        "printf '[core]\\n\\tfsmonitor = touch " .. root .. "/pwned\\n' > evil/config",
        "echo ../evil > .git/commondir", "echo ../../evil > sub/.git/commondir" }, " && "))
      assert.equal(0, code, report)
      assert.matches("sub/.git: moved aside to ", report, 1, true)
      assert.matches("commondir (a commondir git worktree add did not write)", report, 1, true)
      assert.matches(wd .. "/.git/commondir was created or replaced inside the sandbox", report, 1, true)
      sh("cd " .. shq(wd) .. " && git status >/dev/null && cd sub && git status >/dev/null")
      unchanged()
    end)

    it("a repository made inside with core.fsmonitor, core.hooksPath, an alias and a non-sample hook: the "
      .. "host's status, commit and alias run nothing; what git init wrote stays", function()
      if helpers.skip_without_bwrap() then return end
      local hook = "#!/bin/sh\\ntouch " .. root .. "/pwned\\n"
      local code, report = run_inside(how, root, wd, table.concat({
        GIT .. " init -q made", "cd made", GIT .. " commit -q --allow-empty -m m",
        "git config core.fsmonitor 'touch " .. root .. "/pwned'", "git config alias.st '!touch " .. root .. "/pwned'",
        "mkdir -p ../hk && printf '" .. hook .. "' > ../hk/pre-commit && chmod +x ../hk/pre-commit",
        "git config core.hooksPath ../hk", "printf '" .. hook .. "' > .git/hooks/post-checkout",
        "chmod +x .git/hooks/post-checkout" }, " && "))
      assert.equal(0, code, report)
      assert.matches("hooks/post-checkout (a hook made or changed inside the sandbox", report, 1, true)
      assert.matches("the keys core.fsmonitor, core.hookspath, alias.st removed", report, 1, true)
      sh("cd " .. shq(wd .. "/made") .. " && git status >/dev/null && " .. GIT .. " commit -q --allow-empty -m h && "
        .. GIT .. " checkout -q -b b2 && (git st 2>/dev/null; true)")
      unchanged()
      local config = helpers.read(wd .. "/made/.git/config")
      assert.matches("repositoryformatversion = 0", config, 1, true)
      assert.is_nil(config:find("fsmonitor"), config)
      for _, s in ipairs({ "pre-commit.sample", "pre-push.sample" }) do
        assert.is_true(helpers.exists(wd .. "/made/.git/hooks/" .. s), s)
      end
    end)

    it("git keeps working inside (init, clone from a local path, commit, branch, rebase, stash, worktree add, "
      .. "submodule add); nothing is moved, and the clone works on the host (status, log, fetch)", function()
      if helpers.skip_without_bwrap() then return end
      local code, report = run_inside(how, root, wd, table.concat({
        GIT .. " init -q up && " .. GIT .. " -C up commit -q --allow-empty -m u", GIT .. " clone -q up clone",
        "cd clone",
        "echo a > a && git add a && " .. GIT .. " commit -q -m a", GIT .. " branch b",
        GIT .. " checkout -q b && echo b > b && git add b && " .. GIT .. " commit -q -m b",
        GIT .. " checkout -q main && echo c > c && git add c && " .. GIT .. " commit -q -m c",
        GIT .. " rebase -q main b", "echo d >> a && " .. GIT .. " stash -q && " .. GIT .. " stash pop -q",
        GIT .. " worktree add -q ../wt main -f", GIT .. " init -q ../lib && " .. GIT .. " -C ../lib commit -q "
        .. "--allow-empty -m l", GIT .. " -c protocol.file.allow=always submodule add -q ../lib lib",
        GIT .. " commit -q -m sub", "git status --porcelain > ../inside-status" }, " && "))
      assert.equal(0, code, report)
      assert.is_nil(report:find("git: ", 1, true), report)
      assert.equal(" M a\n", helpers.read(wd .. "/inside-status"))
      local c = wd .. "/clone"
      sh("cd " .. shq(c) .. " && git status >/dev/null && git log --oneline | grep -q sub && git fetch -q origin && "
        .. "git -C ../wt status >/dev/null && git -C lib status >/dev/null")
      assert.matches(wd .. "/up", sh("git -C " .. shq(c) .. " remote get-url origin"), 1, true)
    end)

    it("500,000 empty files do not blind the walk: a bare repository made beside them is still checked",
      function()
        if helpers.skip_without_bwrap() then return end
        -- The entries go in a tmpfs where this process may mount one (root):
        -- on a disk's file system half a million creates cost from 15 s to
        -- over a minute here, and the walk reads a tmpfs as it reads a disk
        -- (it does not stop at a mount).
        local many = wd .. "/many"
        if uv.getuid() == 0 and uv.fs_mkdir(many, 448)
          and helpers.run("mount -t tmpfs -o size=256m,nr_inodes=0 isolation-spec-many " .. shq(many)) == 0 then
          finally(function() helpers.run("umount " .. shq(many)) end)
        end
        local code, report, cut = run_inside(how, root, wd, "mkdir -p many && cd many && seq 500000 | xargs touch "
          .. "&& cd .. && git init -q --bare src && git -C src config core.pager x")
        assert.equal(0, code, report)
        assert.is_nil(cut)
        assert.matches("git: " .. wd .. "/src: moved aside to ", report, 1, true)
      end)
  end)
end

describe("gitcheck: the report", function()
  local root
  before_each(function()
    root = helpers.tmpdir()
    assert(uv.fs_mkdir(root .. "/wd", 448))
  end)
  after_each(function() helpers.rmtree(root) end)

  it("isolate: a repository whose path holds a newline and an escape sequence is named with each such byte as "
    .. "\\xNN, on one line", function()
    if helpers.skip_without_bwrap() then return end
    local code, _, err = helpers.run(ISOLATE .. " --workdir " .. shq(root .. "/wd") .. " -- bash -c "
      .. shq("d=$'r\\n\\033[31mx' && git init -q \"$d\" && echo x > \"$d/.git/hooks/pre-commit\""))
    assert.equal(0, code, err)
    local line = assert(err:match("isolate: protect: git: [^\n]*"), err)
    assert.matches("/wd/r\\x0a\\x1b[31mx/.git: moved aside to ", line, 1, true)
    assert.matches("hooks/pre-commit (a hook made or changed inside the sandbox", line, 1, true)
    assert.is_nil(err:find("\27", 1, true), err)
  end)

  it("isolate: a protected path made a link whose target holds an escape sequence is reported escaped", function()
    if helpers.skip_without_bwrap() then return end
    local code, _, err = helpers.run(ISOLATE .. " --workdir " .. shq(root .. "/wd") .. " -- bash -c "
      .. shq("ln -s $'t\\n\\033]0;x\\007' .mcp.json"))
    assert.equal(0, code, err)
    assert.matches("symlink:t\\x0a\\x1b]0;x\\x07 after); moved aside to ", err, 1, true)
    assert.is_nil(err:find("\27", 1, true), err)
  end)
end)

describe("gitcheck: dry_run", function()
  it("says that the git directories are checked at the end, and that a cut walk fails the run", function()
    local text = assert(require("isolation").dry_run({ config = { mode = "bwrap", network = "none" },
      workdir = "/w", command = "true" }))
    assert.matches("git directories below the workdir (.git, bare repositories, modules, worktrees): checked when "
      .. "the session ends against what git writes", text, 1, true)
    assert.matches("a walk cut short fails the run", text, 1, true)
  end)
end)

describe("gitcheck: what was there at launch", function()
  local root
  before_each(function() root = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(root) end)

  it("a symbolic link the user made before (.git/hooks to a shared directory) stays, and nothing is moved "
    .. "through it, even a file there changed meanwhile", function()
    local wd = root .. "/wd"
    sh("mkdir -p " .. shq(root .. "/shared") .. " && echo x > " .. shq(root .. "/shared/pre-commit") .. " && "
      .. GIT .. " init -q " .. shq(wd .. "/sub") .. " && rm -rf " .. shq(wd .. "/sub/.git/hooks") .. " && ln -s "
      .. shq(root .. "/shared") .. " " .. shq(wd .. "/sub/.git/hooks") .. " && sleep 0.05")
    local s, us = uv.gettimeofday()
    helpers.write(root .. "/shared/pre-commit", "changed on the host during the session\n")
    local moved, failed, lines, cut = gitcheck.check(wd, s + us / 1e6, "t")
    assert.same({}, moved)
    assert.same({}, failed)
    assert.same({}, lines)
    assert.is_nil(cut)
    assert.equal("link", uv.fs_lstat(wd .. "/sub/.git/hooks").type)
    assert.is_true(helpers.exists(root .. "/shared/pre-commit"))
  end)
end)

describe("gitcheck: a walk cut short", function()
  local root
  before_each(function()
    root = helpers.tmpdir()
    assert(uv.fs_mkdir(root .. "/wd", 448))
  end)
  after_each(function() helpers.rmtree(root) end)

  it("isolate: a directory too deep to read fails the run with 125 after the command's own status", function()
    if helpers.skip_without_bwrap() then return end
    local deep = ("d"):rep(200)
    local code, _, err = helpers.run(ISOLATE .. " --workdir " .. shq(root .. "/wd") .. " -- bash -c "
      .. shq("for i in $(seq 25); do mkdir " .. deep .. " && cd " .. deep .. "; done; exit 3"))
    assert.equal(125, code, err)
    assert.matches("isolate: the command exited with status 3; the end check of the workdir was cut short "
      .. "(cannot read ", err, 1, true)
    assert.matches("ENAMETOOLONG", err, 1, true)
  end)
end)
