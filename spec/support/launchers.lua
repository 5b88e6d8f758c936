-- Spec support for the session manager: the launchers the specs give it
-- (a bash child per session on luv's loop, a child of the project's glue,
-- a recorder of the lines, a counter that starts nothing), each as the
-- manager's options, and the project a launch request names.
local uv = require("luv")
local helpers = require("helpers")

local M = {}

--- A project (id "p") whose isolation is bwrap with `network`.
function M.project(network)
  local p = { id = "p" }
  assert(require("isolation.policy").patch_project(p, { isolation = { mode = "bwrap", network = network } }))
  return p
end

--- `opts` (a table of session.manager options, changed and returned) with
--- a launcher that runs each line with bash in a child on luv's loop,
--- exited[s.id] set to its exit status (128+n after signal n) when it
--- ends, alive until then, and SIGTERM for stop.
function M.bash(exited, opts)
  opts.launcher = function(cmdline, s)
    return uv.spawn("bash", { args = { "-c", "exec " .. cmdline }, stdio = { nil, nil, nil } },
      function(code, sig) exited[s.id] = sig ~= 0 and 128 + sig or code end)
  end
  opts.alive = function(_, s) return exited[s.id] == nil end
  opts.stop = function(handle) handle:kill("sigterm") end
  return opts
end

--- `opts` (changed and returned) with a launcher that runs the line the
--- way the project's own glue does (support/glue.lua: io.popen, sh -c,
--- setsid; its output in root/launch.log), alive and stop as glue's.
function M.glue(root, opts)
  local glue = require("support.glue")
  opts.launcher = function(cmdline) return glue.start(cmdline, root .. "/launch.log") end
  opts.alive, opts.stop = glue.alive, glue.stop
  return opts
end

--- `opts` (changed and returned) with a launcher that runs nothing and
--- appends each line to `lines` (its handle { n = the line's index }),
--- every session alive.
function M.recording(lines, opts)
  opts.launcher = function(cmdline) lines[#lines + 1] = cmdline; return { n = #lines } end
  opts.alive = function() return true end
  return opts
end

local Counting = {}
Counting.__index = Counting

--- A manager over a new directory c.root (c.root/work made, runtime_dir
--- c.root/run) whose launcher starts nothing and counts its calls in
--- c.launched; c.mgr the manager.
function M.counting()
  local c = setmetatable({ root = helpers.tmpdir(), launched = 0 }, Counting)
  assert(uv.fs_mkdir(c.root .. "/work", 448))
  c.mgr = assert(require("isolation.session").manager({ runtime_dir = c.root .. "/run", launcher = function()
    c.launched = c.launched + 1
    return { pid = 0 }
  end }))
  return c
end

--- Closes the manager, removes the directory.
function Counting:close()
  self.mgr:close()
  helpers.rmtree(self.root)
end

return M
