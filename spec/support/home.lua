-- Loaded by busted before any spec (.busted `helper`). A bwrap or docker
-- line refuses to run without a usable HOME (it mounts an empty directory
-- there), and CI may run without one: the specs then get a HOME of their
-- own, an empty directory made for this run, so that what they prove does
-- not depend on the caller's environment. Specs about a missing HOME set
-- their own environment (env -i) and are unaffected.
local uv = require("luv")

local home = os.getenv("HOME")
if not home or home:sub(1, 1) ~= "/" or home == "/" then
  local dir = assert(uv.fs_mkdtemp("/tmp/isolation-spec-home.XXXXXX"))
  assert(uv.os_setenv("HOME", dir))
  -- Removed when busted closes the Lua state at exit (os.exit(code,
  -- true) runs the finalizers): CI runs without HOME every time.
  debug.getregistry()["isolation-spec-home"] = setmetatable({}, { __gc = function()
    if uv.os_getenv("HOME") == dir then
      os.execute("rm -rf '" .. dir .. "'")
    end
  end })
end
