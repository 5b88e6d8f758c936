-- The first Lua an orchestrator author copies ends with status 0: the
-- README's quick start, taken from the README itself, runs in a child
-- interpreter from the repo root; and a script whose session manager polls
-- on luv's loop ends normally after close(), called after uv.run() or
-- inside a luv callback. (luv frees a handle's memory at exit before it
-- runs the handle's pending close callback: a handle closed and never
-- given a loop iteration made the script die of SIGSEGV after printing
-- the right output.)
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")

-- The README's first ```lua block after the heading that names the quick
-- start in Lua; nil when the README has none.
local function readme_quickstart()
  local text = assert(helpers.read(cli.ROOT .. "/README.md"))
  local from = text:find("\n#+ [^\n]*[Qq]uick start[^\n]*Lua[^\n]*\n") or text:find("\n#+ [^\n]*Lua[^\n]*\n")
  if not from then return nil end
  return text:match("```lua\n(.-)\n```", from)
end

local function run_script(source, seconds)
  local dir = helpers.tmpdir()
  local path = dir .. "/script.lua"
  helpers.write(path, source)
  local status, out, err = cli.spawn({ cli.LUA, path }, { cwd = cli.ROOT }).wait(seconds or 60)
  helpers.rmtree(dir)
  return status, out, err
end

-- A manager that polls on luv's loop, one session launched with a real
-- bwrap line, and `finish` (Lua source) run once the session has ended.
local function manager_script(finish)
  return ([[
package.cpath = "build/?.so;" .. package.cpath
package.path = "lua/?.lua;" .. package.path
local uv = require("luv")
local session = require("isolation.session")
local base = assert(uv.fs_mkdtemp("/tmp/isolation-qs.XXXXXX"))
assert(uv.fs_mkdir(base .. "/work", 448))
local ended, mgr = false, nil
mgr = assert(session.manager{
  runtime_dir = base .. "/run", loop = uv, poll_interval = 0.05,
  launcher = function(cmdline)
    return uv.spawn("bash", {args = {"-c", "exec " .. cmdline}, stdio = {nil, 1, 2}},
      function() ended = true; mgr:poll() end)
  end,
  alive = function() return not ended end,
  stop = function(handle) handle:kill("sigterm") end,
  on_end = function(s, reason) print("ended", s.id, reason) end,
})
assert(mgr:launch{id = "s1", project = {default_isolation_json = '{"mode":"bwrap","network":"deny"}'},
  workdir = base .. "/work", target = "local", command = "true", bridge = "builtin"})
%s
os.execute("rm -rf '" .. base .. "'")
print("script end")
]]):format(finish)
end

describe("the README's quick start in Lua", function()
  it("runs verbatim from the repo root and exits 0 after printing what its comments promise", function()
    if helpers.skip_without_bwrap() then return pending("bwrap cannot run here") end
    local source = readme_quickstart()
    assert.is_not_nil(source, "README.md has no ```lua block under a Lua quick start heading")
    local status, out, err = run_script(source, 120)
    assert.are.equal(0, status, "exit " .. tostring(status) .. "\n" .. out .. err)
    assert.truthy(out:find("\n403\n", 1, true), out .. err)
    assert.truthy(out:find("s1\texited", 1, true), out .. err)
    -- it removes its own directory
    local base = out:match("(/tmp/quickstart%.%w+)/run/s1%.sock")
    assert.is_not_nil(base, out)
    assert.is_nil(uv.fs_lstat(base), base .. " was left")
  end)
end)

describe("a session manager polling on luv's loop", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end

  it("closed after uv.run() returned: the script ends with status 0", function()
    local status, out, err = run_script(manager_script([[
uv.run()
assert(mgr:close())
assert(mgr:close()) -- idempotent
]]))
    assert.are.equal(0, status, out .. err)
    assert.truthy(out:find("ended\ts1\texited\n", 1, true), out .. err)
    assert.truthy(out:find("script end\n", 1, true), out .. err)
  end)

  it("closed inside a luv callback: the loop returns and the script ends with status 0", function()
    local status, out, err = run_script(manager_script([[
local t = uv.new_timer()
t:start(20, 20, function()
  if ended then
    t:close()
    assert(mgr:close())
  end
end)
uv.run()
print("loop returned", uv.loop_alive())
]]))
    assert.are.equal(0, status, out .. err)
    assert.truthy(out:find("loop returned\tfalse\n", 1, true), out .. err)
    assert.truthy(out:find("script end\n", 1, true), out .. err)
  end)

  it("closed while its session still runs, before the loop ever ran: the session ends, status 0", function()
    local status, out, err = run_script(manager_script([[
assert(mgr:close())
uv.run() -- the launcher's process handle ends; nothing of the manager keeps the loop
]]))
    assert.are.equal(0, status, out .. err)
    assert.truthy(out:find("ended\ts1\tclosed\n", 1, true), out .. err)
    assert.truthy(out:find("script end\n", 1, true), out .. err)
  end)
end)

describe("examples/", function()
  it("every example is run by examples_spec (each must exit 0 there)", function()
    local covered = helpers.read(cli.ROOT .. "/spec/examples_spec.lua")
    local scan = assert(uv.fs_scandir(cli.ROOT .. "/examples"))
    local n = 0
    while true do
      local name = uv.fs_scandir_next(scan)
      if not name then break end
      if name:match("%.lua$") then
        n = n + 1
        assert.truthy(covered:find('"' .. name .. '"', 1, true), "examples/" .. name .. " is not run by examples_spec")
      end
    end
    assert.is_true(n >= 4, "only " .. n .. " examples")
  end)
end)
