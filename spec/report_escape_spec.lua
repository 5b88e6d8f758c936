-- The end-of-session reports name paths whose bytes the sandbox chose (a
-- nested repository's directory) or that hold whatever the workdir's name
-- holds. Raw, ESC and BEL set the terminal's title, CR and LF forged whole
-- `isolate: protect: ...` lines, 0x9b is a one-byte CSI (issue 26, item
-- 5). Every line `isolate` prints and the session manager logs or hands to
-- on_end is escaped by isolation.text as the proxy's events are: each byte
-- outside 0x20-0x7e, and `\`, as \xNN. Driven for real: a bwrap sandbox
-- makes the directories, isolate and the manager report them.
--
-- Every byte a name can hold below 0x20 (NUL cannot be in a path), DEL and
-- 0x9b, in nested repositories made inside; a path of more than 4 KB; the
-- same bytes in the workdir's own name, which every report line about a
-- protected path carries (a protected path created inside: moved aside; a
-- protected path that is a symlink: the warning before the launch).
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")
local support = require("support.launch")
local text = require("isolation.text")

local q = helpers.shquote
local PYTHON = "/usr/bin/python3"

-- The bytes, in groups of four: one nested repository each.
local BYTES = {}
for b = 1, 31 do BYTES[#BYTES + 1] = b end
BYTES[#BYTES + 1] = 0x7f
BYTES[#BYTES + 1] = 0x9b
BYTES[#BYTES + 1] = 0x5c -- the backslash: escaped too, so that the text is unambiguous

local function names()
  local out = {}
  for i = 1, #BYTES, 4 do
    local chars = {}
    for j = i, math.min(i + 3, #BYTES) do chars[#chars + 1] = string.char(BYTES[j]) end
    out[#out + 1] = "sub/n" .. i .. "-" .. table.concat(chars) .. "-z"
  end
  -- close to 4 KB (the path, workdir included, stays under PATH_MAX, which
  -- the end walk needs): components of 200 bytes, each with a forged line
  local deep = {}
  local part = "d\27]0;owned\7\r\nisolate: protect: nothing changed\155"
  part = part .. ("a"):rep(200 - #part)
  for i = 1, 19 do deep[i] = part end
  out[#out + 1] = "sub/" .. table.concat(deep, "/")
  return out
end

-- The workdir's own name: a forged line after a CR LF, a title, a CSI.
local WORKDIR_NAME = "w\27]0;owned\7\r\nisolate: protect: nothing changed\155\127\1x"

local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

-- Inside: each name gets a .git that git takes for a repository (HEAD,
-- objects/, refs/) with a config that runs a program (made in the session),
-- and .vscode/tasks.json appears (a protected path that was missing).
local MAKE = [[
import os
for h in open("names.hex").read().split():
    p = bytes.fromhex(h)
    os.makedirs(p + b"/.git/objects")
    os.makedirs(p + b"/.git/refs/heads")
    open(p + b"/.git/HEAD", "wb").write(b"ref: refs/heads/main\n")
    open(p + b"/.git/config", "wb").write(b"[core]\n\tfsmonitor = evil\n")
os.makedirs(".vscode", exist_ok=True)
open(".vscode/tasks.json", "w").write("evil\n")
]]

-- Bytes that must not be there: every one below 0x20 but \n, DEL and
-- everything above (the escape leaves printable ASCII only).
local function raw_byte(s)
  local at = s:find("[\0-\9\11-\31\127-\255]")
  return at and string.format("byte 0x%02x at %d: %q", s:byte(at), at, s:sub(math.max(1, at - 40), at + 40))
end

describe("report lines escape what the sandbox named", function()
  local tmp, home, work
  before_each(function()
    tmp = helpers.tmpdir()
    home = helpers.tmpdir()
    work = tmp .. "/" .. WORKDIR_NAME
    assert(uv.fs_mkdir(work, tonumber("755", 8)))
    -- a protected path that is a symlink (the warning names it), and the files the sandbox uses
    assert(uv.fs_mkdir(work .. "/shared", tonumber("755", 8)))
    assert(uv.fs_symlink("shared", work .. "/.idea"))
    local hexes = {}
    for i, n in ipairs(names()) do hexes[i] = hex(n) end
    helpers.write(work .. "/names.hex", table.concat(hexes, "\n") .. "\n")
    helpers.write(work .. "/make.py", MAKE)
  end)
  after_each(function()
    helpers.rmtree(tmp)
    helpers.rmtree(home)
  end)

  local function skip()
    if helpers.skip_without_bwrap() then return true end
    if not io.open(PYTHON) then
      pending(PYTHON .. " is not installed: the sandbox makes the names with a python script")
      return true
    end
  end

  -- the lines that name each nested repository and the protected paths
  local function assert_reports(lines, without_git)
    local all = table.concat(lines, "\n")
    local wd = text.escape(work)
    for _, n in ipairs(without_git and {} or names()) do
      -- the git check's line for a repository made inside (isolation.gitcheck)
      local want = "git: " .. wd .. "/" .. text.escape(n) .. "/.git"
      assert.truthy(all:find(want, 1, true), "no line names " .. want)
    end
    assert.truthy(all:find("protect: " .. wd .. "/.vscode was created or replaced inside the sandbox", 1, true), all)
    assert.truthy(all:find("protect: " .. wd .. "/.idea is a symlink", 1, true), all)
    -- one line is the deep path, twice (where it was, where it went), whole
    local longest = 0
    for _, l in ipairs(lines) do longest = math.max(longest, #l) end
    assert.is_true(longest > 2 * 19 * 200, "the longest line has " .. longest .. " bytes")
    -- no forged line: the text after CR LF stays inside its own line
    for _, l in ipairs(lines) do
      assert.falsy(l:find("^isolate: protect: nothing changed"), l)
      assert.falsy(l:find("^isolation: protect: nothing changed"), l)
    end
  end

  it("isolate: no byte below 0x20 but the newline, no DEL, no byte above 0x7e reaches stderr", function()
    if skip() then return end
    local status, out, err = cli.isolate({ "--network", "none", "--workdir", work, "--", PYTHON, "make.py" },
      { env = { "HOME=" .. home, "TMPDIR=" .. tmp }, timeout = 120 })
    assert.are.equal(0, status, err)
    assert.are.equal("", out)
    assert.is_nil(raw_byte(err))
    local lines = {}
    for l in err:gmatch("([^\n]*)\n") do
      assert.truthy(l:find("^isolate: "), l)
      lines[#lines + 1] = l
    end
    assert.are.equal(err, table.concat(lines, "\n") .. "\n")
    assert_reports(lines)
    -- each repository keeps its place (the git check moves single entries
    -- aside, by their real names): its config no longer runs a program
    for _, n in ipairs(names()) do
      local config = helpers.read(work .. "/" .. n .. "/.git/config")
      assert.is_nil((config or ""):find("fsmonitor", 1, true), n)
    end
  end)

  it("the session manager: log lines and on_end's reason and lines are escaped; the paths stay real", function()
    if skip() then return end
    local session = require("isolation.session")
    local dir = tmp .. "/run"
    assert(uv.fs_mkdir(dir, tonumber("700", 8)))
    local logged, ended = {}, nil
    local mgr = assert(session.manager({ runtime_dir = dir,
      launcher = function(cmdline) support.run_line(cmdline, home); return {} end,
      alive = function() return false end,
      on_end = function(s, reason, moved) ended = { s = s, reason = reason, moved = moved } end,
      log = function(l) logged[#logged + 1] = l end }))
    assert(mgr:launch({ id = "esc", workdir = work, isolation = { mode = "bwrap", network = "allow" },
      command = "cd " .. q(work) .. " && " .. PYTHON .. " make.py" }))
    assert.are.equal(1, mgr:poll())
    mgr:close()
    for _, l in ipairs(logged) do
      assert.is_nil(raw_byte(l), l)
      assert.falsy(l:find("\n", 1, true), l)
    end
    local lines = {}
    for _, l in ipairs(logged) do lines[#lines + 1] = (l:gsub('^isolation: session "esc": ', "")) end
    assert_reports(lines)
    assert.are.equal("exited", ended.reason)
    assert.is_true(#ended.moved >= 1)
    for _, m in ipairs(ended.moved) do
      assert.is_nil(raw_byte(m.line), m.line)
      assert.truthy(m.line:find(text.escape(m.path), 1, true), m.line)
      assert.truthy(uv.fs_lstat(m.moved_to), m.moved_to)
      assert.are.equal(1, m.path:find(work, 1, true))
    end
  end)
end)

describe("isolation.text.escape", function()
  it("writes each byte outside 0x20-0x7e, and the backslash, as \\xNN, like the proxy's events", function()
    local all = {}
    for b = 0, 255 do all[#all + 1] = string.char(b) end
    local s = text.escape(table.concat(all))
    assert.is_nil(s:find("[^\32-\126]"))
    for b = 0, 255 do
      local want = (b >= 0x20 and b <= 0x7e and b ~= 0x5c) and string.char(b) or string.format("\\x%02x", b)
      assert.are.equal(want, s:sub(1, #want), "byte " .. b)
      s = s:sub(#want + 1)
    end
    assert.are.equal("", s)
    assert.are.equal("a\nb\\x5c\nc\\x09", text.escape_lines("a\nb\\\nc\t"))
  end)
end)
