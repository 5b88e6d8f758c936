-- A command whose first byte is - or + (issue 19.5): `bash -c -x` reads -x
-- as an option and `bash -c +O` prints the shopt list, so the command never
-- runs. Every builder's bash -c takes `--` first. Each mode is run for real
-- where it can be here (mode "", bwrap allow and deny with both bridges, and
-- bin/isolate); docker has no daemon here, so its line is run with a
-- stand-in docker that runs what follows the image, as the container would.
local isolation = require("isolation")
local helpers = require("helpers")
local cli = require("support.cli")

local shq = helpers.shquote

-- Each is the name of a program on PATH that reports it ran.
local COMMANDS = { "-x", "+O", "--version", "-", "--", "-c", "+" }

local PORT_BASE = 24000 + math.tointeger(require("luv").os_getpid()) % 20000

local index_of = require("support.tables").index_of

describe("a command starting with - or +", function()
  local dir, work, bin, stubs

  setup(function()
    dir = helpers.tmpdir()
    work = dir .. "/work"
    bin = work .. "/bin"
    stubs = dir .. "/stubs"
    assert(os.execute("mkdir -p " .. shq(bin) .. " " .. shq(stubs) .. " " .. shq(dir .. "/home")))
    for _, c in ipairs(COMMANDS) do
      helpers.write(bin .. "/" .. c, "#!/bin/sh\necho \"ran " .. c .. " with $# arguments\"\n")
      assert(os.execute("chmod +x " .. shq(bin .. "/" .. c)))
    end
    -- docker: skip to the image, then run the rest (bash -c ...) here
    helpers.write(stubs .. "/docker", "#!/bin/sh\nwhile [ \"$1\" != debian:bookworm-slim ]; do shift; done\n"
      .. "shift\nexec \"$@\"\n")
    assert(os.execute("chmod +x " .. shq(stubs .. "/docker")))
  end)

  teardown(function() helpers.rmtree(dir) end)

  -- Runs a wrap() line with sh (and bash), the programs first on PATH.
  local function run_line(line, shell)
    return helpers.run("cd " .. shq(work) .. " && HOME=/nonexistent PATH=" .. shq(bin .. ":" .. stubs)
      .. ":$PATH timeout -k 5 60 " .. (shell or "sh") .. " -c " .. shq(line))
  end

  local function assert_ran(c, code, out, err, line)
    assert.are.equal(0, code, c .. ": " .. err .. "\n" .. tostring(line))
    assert.are.equal("ran " .. c .. " with 0 arguments\n", out, c .. ": " .. err)
  end

  describe("argv: bash -c -- command in every builder", function()
    for _, c in ipairs(COMMANDS) do
      it(("mode \"\": {bash, -c, --, %q}"):format(c), function()
        assert.are.same({ "bash", "-c", "--", c }, assert(isolation.argv({ command = c })))
      end)

      it(("bwrap allow ends with bash -c -- %q"):format(c), function()
        local argv = assert(isolation.bwrap_argv({ workdir = "/srv/w", command = c }))
        assert.are.same({ "--", "bash", "-c", "--", c }, { table.unpack(argv, #argv - 4) })
      end)

      it(("bwrap deny: bash -c -- SCRIPT bash %q, and the script's bash -c -- \"$1\""):format(c), function()
        for _, bridge in ipairs({ "socat", "builtin" }) do
          local argv = assert(isolation.bwrap_argv({ config = { mode = "bwrap", network = "deny" }, workdir = "/srv/w",
            command = c, proxy_socket = "/srv/p.sock", bridge = bridge, bridge_path = "/opt/b" }))
          local at = assert(index_of(argv, "-c"))
          assert.are.same({ "bash", "-c", "--" }, { table.unpack(argv, at - 1, at + 1) })
          assert.are.same({ "bash", c }, { argv[at + 3], argv[at + 4] })
          local tail = 'exec bash -c -- "$1"'
          assert.are.equal(tail, argv[at + 2]:sub(-#tail))
        end
      end)

      it(("docker ends with the image, bash -c -- %q"):format(c), function()
        for _, network in ipairs({ "allow", "none" }) do
          local argv = assert(isolation.docker_argv({ config = { mode = "docker", network = network },
            workdir = "/srv/w", command = c }))
          assert.are.same({ "debian:bookworm-slim", "bash", "-c", "--", c }, { table.unpack(argv, #argv - 4) })
        end
      end)
    end
  end)

  describe("runs as the command, never as bash's options", function()
    for _, c in ipairs(COMMANDS) do
      it(("mode \"\" through wrap(), with sh and bash: %q"):format(c), function()
        local line = assert(isolation.wrap({ command = c }))
        for _, shell in ipairs({ "sh", "bash" }) do assert_ran(c, run_line(line, shell)) end
      end)

      it(("docker's line (a stand-in docker runs what follows the image): %q"):format(c), function()
        local line = assert(isolation.wrap({ config = { mode = "docker" }, workdir = work, command = c }))
        assert_ran(c, run_line(line))
      end)

      it(("a real bwrap sandbox, network allow: %q"):format(c), function()
        if helpers.skip_without_bwrap() then return end
        local line = assert(isolation.wrap({ config = { mode = "bwrap" }, workdir = work, command = c }))
        assert_ran(c, run_line(line))
      end)
    end

    for index, bridge in ipairs({ "socat", "builtin" }) do
      it("a real bwrap sandbox, network deny, " .. bridge .. " bridge: every command", function()
        if helpers.skip_without_bwrap() then return end
        local rundir = dir .. "/run-" .. bridge
        assert(os.execute("mkdir -m 0700 " .. shq(rundir)))
        local proxy = assert(isolation.proxy({ unix = rundir .. "/proxy.sock", allow = {} }))
        local ok, err = pcall(function()
          for _, c in ipairs(COMMANDS) do
            local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "deny" }, workdir = work,
              command = c, proxy_socket = rundir .. "/proxy.sock", proxy_port = PORT_BASE + index,
              -- the sanitizer build has no isolation.BRIDGE beside it
              bridge = bridge, bridge_path = isolation.BRIDGE or cli.ROOT .. "/build/isolation-bridge" }))
            assert_ran(c, run_line(line))
          end
        end)
        proxy:close()
        assert(ok, err)
      end)
    end

    for _, args in ipairs({ { "--mode", "none" }, { "--network", "allow" }, { "--network", "deny" } }) do
      it("bin/isolate " .. table.concat(args, " ") .. " -- COMMAND: every command", function()
        if args[1] == "--network" and helpers.skip_without_bwrap() then return end
        for _, c in ipairs(COMMANDS) do
          local argv = { table.unpack(args) }
          for _, a in ipairs({ "--workdir", work, "--", c }) do argv[#argv + 1] = a end
          -- a usable HOME: CI may run with none
          local status, out, err = cli.isolate(argv,
            { env = { "PATH=" .. bin .. ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" .. dir .. "/home" } })
          assert_ran(c, status, out, err)
        end
      end)
    end
  end)
end)
