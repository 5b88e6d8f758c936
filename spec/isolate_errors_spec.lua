-- The errors a user reads first (issue 26, item 7), each from `isolate` run
-- as a real subprocess: a missing bwrap (or docker, podman), a workdir the
-- user cannot read, `isolate doctor`'s statuses, learn mode's last words,
-- an option typo.
--
-- A missing program is made by a PATH of its own: a directory of symbolic
-- links to every program of /usr/bin and /bin but the ones hidden.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")

local q = helpers.shquote

-- A directory of links to every program of /usr/bin and /bin except
-- `hidden` (names); returns its path.
local function path_without(parent, hidden)
  local dir = parent .. "/bin-without-" .. table.concat(hidden, "-")
  assert(uv.fs_mkdir(dir, tonumber("755", 8)))
  local skip = {}
  for _, h in ipairs(hidden) do skip[h] = true end
  for _, from in ipairs({ "/usr/bin", "/bin" }) do
    local scan = uv.fs_scandir(from)
    while scan do
      local name = uv.fs_scandir_next(scan)
      if not name then break end
      if not skip[name] and not uv.fs_lstat(dir .. "/" .. name) then
        assert(uv.fs_symlink(from .. "/" .. name, dir .. "/" .. name))
      end
    end
  end
  return dir
end

-- The lines of a text.
local function lines(s)
  local out = {}
  for l in s:gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

-- Entries of a directory, sorted.
local function entries(dir)
  local out, scan = {}, uv.fs_scandir(dir)
  while scan do
    local name = uv.fs_scandir_next(scan)
    if not name then break end
    out[#out + 1] = name
  end
  table.sort(out)
  return out
end

describe("isolate: a program the run needs is not on PATH", function()
  local tmp, home, work, nobin
  setup(function()
    tmp = helpers.tmpdir()
    -- bwrap, docker and podman hidden; lua5.4 and env, which bin/isolate
    -- itself needs, stay
    nobin = path_without(tmp, { "bwrap", "docker", "podman", "socat" })
  end)
  teardown(function() helpers.rmtree(tmp) end)
  before_each(function()
    home = helpers.tmpdir(tmp)
    work = helpers.tmpdir(tmp)
  end)

  local function isolate(args, path)
    local proxydirs = helpers.tmpdir(tmp)
    local status, out, err = cli.isolate(args, { cwd = work,
      env = { "PATH=" .. (path or nobin), "HOME=" .. home, "TMPDIR=" .. proxydirs } })
    return status, out, err, entries(proxydirs)
  end

  it("without bwrap: one line naming bubblewrap and `isolate doctor`, exit 125, nothing started", function()
    -- before: `env: 'bwrap': No such file or directory`, exit 127
    for _, args in ipairs({
      { "--", "touch", "ran" },
      { "--network", "allow", "--", "touch", "ran" },
      { "--network", "none", "--", "touch", "ran" },
      { "--learn", "--", "touch", "ran" },
    }) do
      local status, out, err, made = isolate(args)
      local what = table.concat(args, " ")
      assert.are.equal(125, status, what .. ": " .. err)
      assert.are.equal("", out)
      assert.are.equal(1, #lines(err), err)
      assert.matches("^isolate: bwrap %(bubblewrap%) is not on PATH .*apt%-get install bubblewrap.*"
        .. "`isolate doctor` checks the rest\n$", err)
      assert.falsy(err:find("env:", 1, true), err)
      assert.are.same({}, made, "no proxy directory: " .. what) -- the check comes before the proxy
      assert.is_nil(uv.fs_stat(work .. "/ran"))
    end
  end)

  it("without docker or podman, for that mode: one line naming it, exit 125", function()
    for _, mode in ipairs({ "docker", "podman" }) do
      local status, out, err, made = isolate({ "--mode", mode, "--", "true" })
      assert.are.equal(125, status, err)
      assert.are.equal("", out)
      assert.are.equal(1, #lines(err), err)
      assert.matches("^isolate: " .. mode .. " is not on PATH .*apt%-get install .*`isolate doctor` checks the rest\n$",
        err)
      assert.are.same({}, made)
    end
  end)

  it("without socat, for --bridge socat under bwrap deny: one line naming it, exit 125", function()
    -- bwrap stays on PATH here: socat is the one missing
    local nosocat = path_without(tmp, { "socat" })
    local status, _, err = isolate({ "--bridge", "socat", "--", "true" }, nosocat)
    assert.are.equal(125, status, err)
    assert.matches("^isolate: socat %(the relay of %-%-bridge socat%) is not on PATH .*apt%-get install socat.*"
      .. "%-%-bridge builtin", err)
  end)

  it("what needs no bwrap still works without it: --mode none, --dry-run", function()
    local status, _, err = isolate({ "--mode", "none", "--", "touch", "ran" })
    assert.are.equal(0, status, err)
    assert.truthy(uv.fs_stat(work .. "/ran"))
    local out
    status, out, err = isolate({ "--dry-run", "--", "true" })
    assert.are.equal(0, status, err)
    assert.truthy(out:find("\nbwrap\n", 1, true), out)
  end)

  it("with bwrap on PATH the same run starts (the check finds it)", function()
    if helpers.skip_without_bwrap() then return end
    local status, _, err = isolate({ "--network", "none", "--", "touch", "ran" }, os.getenv("PATH"))
    assert.are.equal(0, status, err)
    assert.truthy(uv.fs_stat(work .. "/ran"))
  end)
  local _ = q
end)
