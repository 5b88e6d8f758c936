-- Loaded by busted before any spec (.busted `helper`). The specs get a HOME
-- of their own, an empty directory made for this run, whatever the caller's
-- is: a bwrap or docker line refuses to run without a usable HOME (CI may
-- have none), and a real one changes what a line is built from (each entry
-- of ~/.claude is bound read-only by name; a CI host whose own tools write
-- files there while the specs run made a line name a file that was gone
-- when it ran). Specs about a missing HOME set their own environment
-- (env -i) and are unaffected. ISOLATION_SPEC_KEEP_HOME=1 keeps the
-- caller's HOME (to try the specs against a real one).
local uv = require("luv")

if os.getenv("ISOLATION_SPEC_KEEP_HOME") ~= "1" then
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
