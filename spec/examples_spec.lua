-- Every example in examples/ runs as is from the repo root, and the demo
-- (`make demo`) prints its PASS table. Examples that belong to another
-- branch and have not landed yet are skipped with a printed note.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")

local function example(name, args, opts)
  local argv = { cli.LUA, "examples/" .. name }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  opts = opts or {}
  opts.cwd = opts.cwd or cli.ROOT
  return cli.spawn(argv, opts).wait(120)
end

local function present(name)
  if uv.fs_stat(cli.ROOT .. "/examples/" .. name) then return true end
  io.stderr:write("SKIP examples/" .. name .. ": not in this checkout yet\n")
  return false
end

describe("examples", function()
  describe("demo.lua", function()
    it("passes all five checks in a real sandbox and prints a readable table", function()
      if helpers.skip_without_bwrap() then return end
      local status, out, err = example("demo.lua")
      assert.are.equal(0, status, out .. err)
      assert.are.equal(5, select(2, out:gsub(" PASS\n", "")), out)
      assert.falsy(out:find("FAIL", 1, true), out)
      for _, row in ipairs({ "through the proxy +200 %+ greeting +200 %+ greeting +PASS",
        "denied%.example%.com/ through the proxy +403 +403 +PASS",
        "direct TCP to 127%.0%.0%.1:%d+, no proxy +refused +refused +PASS",
        "%(outside%) +unreadable +unreadable +PASS",
        "write %./out%.txt in the workdir +written +written +PASS" }) do
        assert.truthy(out:find(row), row .. "\n" .. out)
      end
      assert.truthy(out:find("\nall 5 checks passed", 1, true), out)
      assert.truthy(out:find("proxy events: allow GET 127%.0%.0%.1:%d+ 200; deny GET denied%.example%.com:80 403"), out)
      -- it cleans up after itself
      local leftovers = 0
      for _, n in ipairs(cli.ls("/tmp")) do
        if n:match("^isolation%-demo%.") and out:find("/tmp/" .. n, 1, true) then leftovers = leftovers + 1 end
      end
      assert.are.equal(0, leftovers)
    end)

    it("says plainly that it cannot run where bwrap cannot make namespaces, and exits non-zero", function()
      local bin = helpers.tmpdir()
      helpers.write(bin .. "/bwrap", "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
      assert(uv.fs_chmod(bin .. "/bwrap", tonumber("755", 8)))
      local status, out, err = example("demo.lua", nil, { env = { "PATH=" .. bin .. ":" .. os.getenv("PATH") } })
      helpers.rmtree(bin)
      assert.are.equal(1, status)
      assert.are.equal("", out)
      assert.truthy(err:find("demo: bwrap cannot create namespaces here: bwrap: No permissions", 1, true), err)
      assert.truthy(err:find("nothing was run", 1, true), err)
    end)

    it("is what `make demo` runs", function()
      if helpers.skip_without_bwrap() then return end
      local status, out, err = cli.spawn({ "make", "--no-print-directory", "-s", "demo" }, { cwd = cli.ROOT }).wait(300)
      assert.are.equal(0, status, out .. err)
      assert.truthy(out:find("\nall 5 checks passed", 1, true), out)
    end)
  end)

  describe("orchestrator.lua", function()
    it("shows the proxy's decisions and the hook calls live, and tears the session down", function()
      if helpers.skip_without_bwrap() then return end
      local status, out, err = example("orchestrator.lua")
      assert.are.equal(0, status, out .. err)
      local hook = out:match("%[hook%] +POST (/hook/s1) ")
      assert.are.equal("/hook/s1", hook, out)
      for _, want in ipairs({
        "%[proxy%] +allow POST 127%.0%.0%.1:%d+ %-> 204",
        "%[proxy%] +deny +CONNECT denied%.example%.net:443 %-> 403",
        "%[proxy%] +error GET nowhere%.invalid:80 %-> 502",
        "%[hook%] +POST /hook/s1 {\"event\":\"SessionStart\"}",
        "%[hook%] +POST /hook/s1 {\"event\":\"Stop\"}",
        "%[agent%] +agent: denied%.example%.net: CONNECT answered 403",
        "agent exited 0; proxy: 2 allowed, 1 denied, 1 errors; 2 hook calls",
        "socket removed: yes",
      }) do
        assert.truthy(out:find(want), want .. "\n" .. out)
      end
      -- decisions are shown as they happen: the deny comes before the agent's last hook call
      assert.truthy(out:find("deny +CONNECT") < out:find("{\"event\":\"Stop\"}", 1, true))
    end)

    -- under cron or `env -i`: the line refuses to run without HOME, and the
    -- example lends it a directory of its own (before: the agent exited 1)
    it("runs with HOME unset, lending the line a HOME of its own", function()
      if helpers.skip_without_bwrap() then return end
      local status, out, err = example("orchestrator.lua", nil, { env = { "-u", "HOME" } })
      assert.are.equal(0, status, out .. err)
      assert.truthy(out:find("HOME=/tmp/isolation%-orchestrator%.[^/]+/home"), out)
      assert.truthy(out:find("agent exited 0", 1, true), out)
    end)
  end)

  it("covers every example in examples/", function()
    local covered = {}
    for _, n in ipairs({ "demo.lua", "orchestrator.lua", "policy.lua", "scheduler.lua" }) do covered[n] = true end
    for _, n in ipairs(cli.ls(cli.ROOT .. "/examples")) do
      if n:match("%.lua$") then assert.truthy(covered[n], "examples/" .. n .. " has no spec here") end
    end
  end)

  -- The glue branch's examples: each runs as is and shows what it is about.
  for _, ex in ipairs({
    { "policy.lua", { "🔒 bwrap · deny", "refused" } },
    { "scheduler.lua", { "clamped to allow", "no isolation" } },
  }) do
    local name, wants = ex[1], ex[2]
    describe(name, function()
      it("runs as is from the repo root", function()
        if not present(name) then return end
        if name == "policy.lua" and helpers.skip_without_bwrap() then return end
        local status, out, err = example(name)
        assert.are.equal(0, status, out .. err)
        for _, want in ipairs(wants) do assert.truthy(out:find(want, 1, true), want .. "\n" .. out) end
      end)
    end)
  end
end)
