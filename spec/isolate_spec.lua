-- bin/isolate, driven for real: child processes, real bwrap sandboxes, the
-- real proxy on a unix socket, a loopback upstream in a child process.
local uv = require("luv")
local cjson = require("cjson")
local helpers = require("helpers")
local cli = require("support.cli")
local isolation = require("isolation")

local function lines(s)
  local t = {}
  for l in s:gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

local function one_line_error(status, out, err)
  assert.are.equal(2, status)
  assert.are.equal("", out)
  assert.are.equal(1, #lines(err), "expected one line, got: " .. err)
  assert.truthy(err:match("^isolate: %S"), err)
end

describe("isolate", function()
  local tmp
  before_each(function() tmp = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(tmp) end)

  describe("exit status", function()
    it("is the command's own (0, 3) with --mode none", function()
      assert.are.equal(0, (cli.isolate({ "--mode", "none", "--", "true" })))
      assert.are.equal(3, (cli.isolate({ "--mode", "none", "--", "sh", "-c", "exit 3" })))
    end)

    it("is the command's own (0, 3) in a bwrap sandbox, network allow and deny", function()
      if helpers.skip_without_bwrap() then return end
      for _, net in ipairs({ "allow", "deny" }) do
        local status, _, err = cli.isolate({ "--network", net, "--workdir", tmp, "--", "true" },
          { env = { "TMPDIR=" .. tmp } })
        assert.are.equal(0, status, err)
        status, _, err = cli.isolate({ "--network", net, "--workdir", tmp, "--", "sh", "-c", "exit 3" },
          { env = { "TMPDIR=" .. tmp } })
        assert.are.equal(3, status, err)
      end
    end)

    it("is 128+n when the command dies of signal n", function()
      local status = cli.isolate({ "--mode", "none", "--", "sh", "-c", "kill -USR1 $$" })
      assert.are.equal(128 + 10, status)
    end)

    it("forwards SIGTERM to the command and exits 143 (--mode none)", function()
      local p = cli.spawn({ cli.ISOLATE, "--mode", "none", "--workdir", tmp, "--", "bash", "-c",
        "trap 'echo got-TERM > got; trap - TERM; kill -TERM $$' TERM; echo ready > ready; "
          .. "while :; do sleep 0.05; done" }, { cwd = tmp })
      assert.truthy(cli.wait_for(function() return helpers.read(tmp .. "/ready") end, 30), p.err)
      p.kill("sigterm")
      local status, _, err = p.wait(30)
      assert.are.equal(143, status, err)
      assert.are.equal("got-TERM\n", helpers.read(tmp .. "/got"))
    end)

    it("forwards SIGTERM, SIGINT and SIGHUP to the command inside bwrap, not just to bwrap", function()
      if helpers.skip_without_bwrap() then return end
      for _, sig in ipairs({ { "sigterm", "TERM", 143 }, { "sigint", "INT", 130 }, { "sighup", "HUP", 129 } }) do
        os.remove(tmp .. "/ready")
        local marker = "isolate-spec-" .. sig[2] .. "-" .. uv.hrtime()
        local p = cli.spawn({ cli.ISOLATE, "--workdir", tmp, "--", "bash", "-c",
          "trap 'echo got-" .. sig[2] .. " > got; trap - " .. sig[2] .. "; kill -" .. sig[2] .. " $$' "
            .. sig[2] .. "; echo ready > ready; while :; do sleep 0.05; done # " .. marker },
          { env = { "TMPDIR=" .. tmp } })
        assert.truthy(cli.wait_for(function() return helpers.read(tmp .. "/ready") end, 30), p.err)
        p.kill(sig[1])
        local status, _, err = p.wait(30)
        assert.are.equal(sig[3], status, err)
        assert.are.equal("got-" .. sig[2] .. "\n", helpers.read(tmp .. "/got"))
        assert.are.same({}, cli.pgrep(marker))
        assert.are.same({ "got", "ready" }, cli.ls(tmp)) -- no isolate.* directory left
      end
    end)
  end)

  describe("at a terminal", function()
    it("Ctrl-C reaches the sandboxed command once, which handles it and goes on", function()
      if helpers.skip_without_bwrap() then return end
      if helpers.run("command -v script") ~= 0 then
        io.stderr:write("SKIP (terminal): script(1) is not installed\n")
        return
      end
      -- the script waits with `wait`, which a trapped signal interrupts at once
      helpers.write(tmp .. "/t.sh", "trap 'echo int >> ints' INT\necho ready > ready\n"
        .. "while [ ! -e done ]; do sleep 0.05 & wait $!; done\necho finished >> ints\nexit 0\n")
      -- script(1) gives isolate a terminal; the ^C written to it becomes SIGINT
      -- for the terminal's foreground process group. `exec`: script runs the
      -- line with $SHELL or sh, and a dash left waiting in that group would
      -- die of the ^C itself (CI has no SHELL, so it is dash)
      local line = "exec " .. helpers.shquote(cli.ISOLATE) .. " --workdir " .. helpers.shquote(tmp) .. " -- bash t.sh"
      local p = cli.spawn({ "script", "-qec", line, "/dev/null" },
        { env = { "TMPDIR=" .. tmp }, stdin = true, cwd = tmp })
      assert.truthy(cli.wait_for(function() return helpers.read(tmp .. "/ready") end, 30), p.out .. p.err)
      p.stdin:write("\3")
      assert.truthy(cli.wait_for(function() return helpers.read(tmp .. "/ints") end, 30), p.out .. p.err)
      cli.wait_for(function() return false end, 0.5) -- room for a second copy to arrive
      helpers.write(tmp .. "/done", "")
      local status = p.wait(30)
      -- bwrap itself ignored the ^C (else it dies, and the command with it)
      assert.are.equal(0, status, p.out .. p.err)
      assert.are.equal("int\nfinished\n", helpers.read(tmp .. "/ints"))
    end)
  end)

  describe("the command", function()
    local words = { "a b", "it's", "$HOME", "\"q\"", "`id`", "*", "", "back\\slash", "new\nline", "-n", "x=1", "if" }

    local function printf_args()
      local args = { "--", "printf", "[%s]\\n" }
      for _, w in ipairs(words) do args[#args + 1] = w end
      return args
    end

    local function expected()
      local out = {}
      for _, w in ipairs(words) do out[#out + 1] = "[" .. w .. "]\n" end
      return table.concat(out)
    end

    it("runs exactly the argv after --, with spaces, quotes, $ and globs (--mode none)", function()
      local args = printf_args()
      table.insert(args, 1, "none")
      table.insert(args, 1, "--mode")
      local status, out, err = cli.isolate(args)
      assert.are.equal(0, status, err)
      assert.are.equal(expected(), out)
    end)

    it("runs exactly the argv after -- inside bwrap with the network denied", function()
      if helpers.skip_without_bwrap() then return end
      local args = printf_args()
      table.insert(args, 1, tmp)
      table.insert(args, 1, "--workdir")
      local status, out, err = cli.isolate(args, { env = { "TMPDIR=" .. tmp } })
      assert.are.equal(0, status, err)
      assert.are.equal(expected(), out)
    end)

    it("a first word that is a shell keyword or starts with % is run as a program", function()
      for _, word in ipairs({ "if", "%1", "{" }) do
        local status, _, err = cli.isolate({ "--mode", "none", "--", word, "x" })
        assert.are.equal(127, status, err)
        assert.falsy(err:find("job control", 1, true), err)
        if not helpers.skip_without_bwrap() then
          status, _, err = cli.isolate({ "--network", "allow", "--workdir", tmp, "--", word, "x" })
          assert.are.equal(127, status, err)
          assert.falsy(err:find("job control", 1, true), err)
        end
      end
    end)
  end)

  describe("--dry-run", function()
    local function spec_for(workdir)
      return {
        config = assert(isolation.config({ mode = "bwrap", network = "deny" })),
        workdir = workdir,
        command = "exec env --default-signal=INT,QUIT,HUP -- echo 'a b' '$HOME'",
        proxy_socket = "/tmp/isolate.XXXXXX/proxy.sock",
        seccomp_fd = 3,
        -- isolate's default bridge where the program is built; isolate
        -- runs the plain build, whose bridge sits beside its module (the
        -- sanitizer run's isolation.BRIDGE is another)
        bridge = isolation.BRIDGE and "pass" or nil,
        bridge_path = isolation.BRIDGE and (cli.ROOT .. "/build/isolation-bridge") or nil,
        -- a root launch masks what only root may read (spec/root_masks_spec.lua)
        mask_files = select(1, require("isolation.hostpaths").root_masks()),
        mask_dirs = select(2, require("isolation.hostpaths").root_masks()),
      }
    end

    it("prints dry_run() and the argv one element a line, and runs nothing", function()
      local real = assert(uv.fs_realpath(tmp))
      local status, out, err = cli.isolate({ "--dry-run", "--workdir", tmp, "--", "echo", "a b", "$HOME" },
        { env = { "TMPDIR=/tmp" } })
      assert.are.equal(0, status, err)
      local spec = spec_for(real)
      local text = assert(isolation.dry_run(spec)):gsub("\n*$", "")
      assert.are.equal(text, out:sub(1, #text))
      local argv = assert(isolation.argv(spec)) -- bwrap behind env -i
      local printed = out:match("\nargv %(%d+ elements, one a line%):\n(.*)$")
      assert.truthy(printed, out)
      assert.are.equal(table.concat(argv, "\n") .. "\n", printed)
      assert.truthy(out:find("proxy allowlist", 1, true))
      assert.truthy(out:find("\nseccomp: a program read from descriptor 3", 1, true), out)
      -- bwrap's option: before "--" (pass: before the proxy variables bwrap sets)
      assert.truthy(out:find("\n--seccomp\n3\n" .. (isolation.BRIDGE and "--setenv" or "--") .. "\n", 1, true), out)
      assert.are.same({}, cli.ls(tmp))
    end)

    it("--json prints the argv as a JSON array equal to argv() of the same spec (reaper with --env -i, "
      .. "bwrap)", function()
      local real = assert(uv.fs_realpath(tmp))
      local status, out, err = cli.isolate({ "--dry-run", "--json", "--workdir", tmp, "--", "echo", "a b", "$HOME" },
        { env = { "TMPDIR=/tmp" } })
      assert.are.equal(0, status, err)
      local argv = cjson.decode(out)
      assert.are.same(assert(isolation.argv(spec_for(real))), argv)
      assert.are.same({ isolation.BRIDGE, "--reap", "5", "--env", "--", "-i", "HOME=$HOME" },
        table.move(argv, 1, 7, 1, {}))
      assert.are.equal(1, #lines(out))
      -- the seccomp filter (no TIOCSTI) on descriptor 3, among bwrap's options
      local at, dash
      for i, v in ipairs(argv) do
        if v == "--seccomp" and not at then at = i end
        -- the "--" that ends bwrap's options (the reaper's comes first)
        if v == "--" and at and not dash then dash = i end
      end
      assert.truthy(at, out)
      assert.are.equal("3", argv[at + 1])
      assert.is_true(at < dash)
    end)

    it("--json for docker deny is docker_argv behind the reaper (--container): --network none, the proxy socket "
      .. "and the bridge (pass), -t only at a terminal", function()
        local real = assert(uv.fs_realpath(tmp))
        local status, out, err = cli.isolate({ "--dry-run", "--json", "--mode", "docker", "--agent", "codex",
          "--workdir", tmp, "--", "true" })
        assert.are.equal(0, status, err)
        local argv = cjson.decode(out)
        local sock = table.concat(argv, "\n"):match("\n([^\n]*/proxy%.sock):/run/isolation/proxy%.sock:ro\n")
        assert.is_string(sock, out)
        -- isolate's own isolation.BRIDGE (the sanitizer run's module has another)
        local bridge = table.concat(argv, "\n"):match("\n([^\n]*):/run/isolation/bridge:ro\n")
        assert.is_string(bridge, out)
        local expected = assert(isolation.docker_argv({
          config = { mode = "docker", network = "deny" }, agent = "codex", workdir = real, command = "true",
          tty = false, proxy_socket = sock, bridge_path = bridge, bridge = "pass", -- isolate's default where it runs
          protect = {}, -- docker gets only the protected paths that exist: none in this directory
        }))
        assert.are.same({ bridge, "--reap", "5", "--container", "--" }, table.move(argv, 1, 5, 1, {}))
        assert.are.same(expected, table.move(argv, 6, #argv, 1, {}))
        assert.truthy(table.concat(argv, " "):find(" --network none ", 1, true))
      end)

    it("--json for --mode none is bash -c with the quoted command", function()
      local status, out = cli.isolate({ "--dry-run", "--json", "--mode", "none", "--", "printf", "%s", "a'b" })
      assert.are.equal(0, status)
      assert.are.same({ "bash", "-c", "--", "printf %s 'a'\\''b'" }, cjson.decode(out))
    end)

    it("--ro-bind, --bind and --agent reach the argv; relative paths are made absolute", function()
      helpers.write(tmp .. "/ca.pem", "cert")
      uv.fs_mkdir(tmp .. "/data", tonumber("755", 8))
      local status, out, err = cli.isolate({ "--dry-run", "--json", "--network", "allow", "--agent", "codex",
        "--ro-bind", "data", "--bind", "$HOME/.cache", "--ca-cert", "ca.pem", "--", "true" }, { cwd = tmp })
      assert.are.equal(0, status, err)
      local real = assert(uv.fs_realpath(tmp))
      local expected = assert(isolation.argv({
        config = { mode = "bwrap", network = "allow" }, agent = "codex", workdir = real,
        ro_binds = { tmp .. "/data" }, binds = { "$HOME/.cache" }, ca_cert = tmp .. "/ca.pem",
        command = "exec env --default-signal=INT,QUIT,HUP -- true", seccomp_fd = 3,
        mask_files = select(1, require("isolation.hostpaths").root_masks()),
        mask_dirs = select(2, require("isolation.hostpaths").root_masks()),
      }))
      assert.are.same(expected, cjson.decode(out))
    end)
  end)

  describe("with the network denied", function()
    local up
    before_each(function() up = cli.upstream() end)
    after_each(function() up.stop() end)

    local function probe_args(extra)
      local url = "http://127.0.0.1:" .. up.port .. "/allowed"
      local args = { "--workdir", tmp, "--allow-host", "127.0.0.1:" .. up.port }
      for _, a in ipairs(extra or {}) do args[#args + 1] = a end
      for _, a in ipairs({ "--", "sh", "-c",
        "curl -s --max-time 20 " .. url .. "; "
          .. "curl -s --max-time 20 -o /dev/null -w 'denied %{http_code}\\n' http://denied.example.com/x; "
          .. "curl -s --max-time 20 -o /dev/null -w 'denied %{http_connect}\\n' https://other.example.net/; "
          .. "curl -s --max-time 5 --noproxy '*' " .. url .. " || echo direct-failed" }) do
        args[#args + 1] = a
      end
      return args
    end

    it("reaches an allowed loopback upstream through the proxy, gets 403 for others, no direct route", function()
      if helpers.skip_without_bwrap() then return end
      local status, out, err = cli.isolate(probe_args(), { env = { "TMPDIR=" .. tmp } })
      assert.are.equal(0, status, err)
      assert.are.equal("hello from upstream GET /allowed HTTP/1.1\ndenied 403\ndenied 403\ndirect-failed\n", out)
      assert.are.same({ "GET /allowed HTTP/1.1" }, up.requests())
      -- without --verbose: a summary of the denied hosts, to know what to --allow-host
      assert.truthy(err:find("the proxy denied 2 requests to 2 hosts", 1, true), err)
      assert.truthy(err:find("isolate:   denied.example.com:80 (1)", 1, true), err)
      assert.truthy(err:find("isolate:   other.example.net:443 (1)", 1, true), err)
      assert.falsy(err:find("proxy: allow", 1, true))
    end)

    it("--verbose prints each decision as it happens and no summary", function()
      if helpers.skip_without_bwrap() then return end
      local status, _, err = cli.isolate(probe_args({ "--verbose" }), { env = { "TMPDIR=" .. tmp } })
      assert.are.equal(0, status, err)
      local first = err:match("^[^\n]*")
      -- TMPDIR is the workdir here: the proxy's directory goes to /tmp,
      -- out of the sandbox's reach (spec/hostpaths_spec.lua)
      local dir = "/tmp"
      assert.truthy(first:find("^isolate: proxy on unix:" .. dir .. "/isolate%.[%w]+/proxy%.sock admits"), first)
      assert.truthy(first:find(" 127.0.0.1:" .. up.port, 1, true), first)
      assert.truthy(err:find("isolate: proxy: allow GET 127.0.0.1:" .. up.port .. " 200", 1, true), err)
      assert.truthy(err:find("isolate: proxy: deny GET denied.example.com:80 403", 1, true), err)
      assert.truthy(err:find("isolate: proxy: deny CONNECT other.example.net:443 403", 1, true), err)
      assert.falsy(err:find("the proxy denied", 1, true))
    end)

    it("names the admitted hosts the proxy could not reach (502), apart from the denied ones", function()
      if helpers.skip_without_bwrap() then return end
      local status, out, err = cli.isolate({ "--workdir", tmp, "--allow-host", "*.invalid", "--", "sh", "-c",
        "curl -s -o /dev/null -w '%{http_code}\\n' http://nowhere.invalid/" }, { env = { "TMPDIR=" .. tmp } })
      assert.are.equal(0, status, err)
      assert.are.equal("502\n", out)
      assert.falsy(err:find("denied", 1, true), err)
      local want = "isolate: the proxy admitted but could not reach 1 host:\nisolate:   nowhere.invalid:80 (502: "
      assert.truthy(err:find(want, 1, true), err)
    end)

    -- a message that names no host (a handover tried after the starter
    -- sealed the proxy: read as HTTP) was summed up as a host ":0"
    it("names a refused message that named no host as such, not as a host \":0\"", function()
      if helpers.skip_without_bwrap() then return end
      local status, _, err = cli.isolate({ "--workdir", tmp, "--", "python3", "-c",
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect('" .. isolation.SANDBOX_PROXY_SOCKET
          .. "'); s.sendall(b'\\0junk'); s.recv(100)" }, { env = { "TMPDIR=" .. tmp } })
      assert.are.equal(0, status, err)
      assert.falsy(err:find("could not reach", 1, true), err)
      assert.falsy(err:find(":0", 1, true), err)
      assert.truthy(err:find("isolate: the proxy ended connections that named no host:\nisolate:   bad_request (1): "
        .. "a malformed request\n", 1, true), err)
    end)

    it("passes no descriptor but 0-2 into the sandbox, not even a socket isolate inherited", function()
      if helpers.skip_without_bwrap() then return end
      -- isolate's parent holds fd 7, a connection to the upstream, without close-on-exec
      -- (the glob's own directory descriptor is listed too, and closed by the time -e looks)
      local probe = "for f in /proc/$$/fd/*; do n=${f##*/}; [ -e \"$f\" ] && [ \"$n\" -gt 2 ] && echo \"leak $n\";"
        .. " done; echo checked"
      local p = cli.spawn({ "bash", "-c", "exec 7<>/dev/tcp/127.0.0.1/" .. up.port
        .. "; [ -e /proc/$$/fd/7 ] || exit 99; exec " .. helpers.shquote(cli.ISOLATE)
        .. " --workdir " .. helpers.shquote(tmp) .. " -- sh -c "
        .. helpers.shquote(probe) }, { env = { "TMPDIR=" .. tmp } })
      local status, out, err = p.wait(60)
      assert.are.equal(0, status, err)
      assert.are.equal("checked\n", out)
    end)

    it("admits the --hook-url's host:port without --allow-host", function()
      if helpers.skip_without_bwrap() then return end
      local hook = "http://127.0.0.1:" .. up.port .. "/hook/s1"
      local status, out, err = cli.isolate({ "--workdir", tmp, "--hook-url", hook, "--", "curl", "-s", "-d", "{}",
        hook }, { env = { "TMPDIR=" .. tmp } })
      assert.are.equal(0, status, err)
      assert.are.equal("hello from upstream POST /hook/s1 HTTP/1.1\n", out)
    end)

    it("works with the built-in bridge (--bridge builtin) as with socat", function()
      if helpers.skip_without_bwrap() then return end
      -- the module bin/isolate loads (the checkout's normal build) names the bridge program
      local _, text = cli.isolate({ "--dry-run", "--bridge", "builtin", "--workdir", tmp, "--", "true" })
      local bridge = text:match("\n%s*read%-only%s+(/%S+) %-> %S+%s+%(built%-in bridge")
      if not (bridge and uv.fs_access(bridge, "X")) then
        io.stderr:write("SKIP (--bridge builtin): no built-in bridge program is built\n")
        return
      end
      local status, out, err = cli.isolate(probe_args({ "--bridge", "builtin" }), { env = { "TMPDIR=" .. tmp } })
      assert.are.equal(0, status, err)
      assert.are.equal("hello from upstream GET /allowed HTTP/1.1\ndenied 403\ndenied 403\ndirect-failed\n", out)
    end)

    it("prints no summary when nothing was denied", function()
      if helpers.skip_without_bwrap() then return end
      local status, out, err = cli.isolate({ "--workdir", tmp, "--allow-host", "127.0.0.1:" .. up.port, "--",
        "curl", "-s", "http://127.0.0.1:" .. up.port .. "/" }, { env = { "TMPDIR=" .. tmp } })
      assert.are.equal(0, status, err)
      assert.truthy(out:find("hello from upstream", 1, true))
      assert.are.equal("", err)
    end)

    it("runs the proxy in a private 0700 directory and tears it down: no socket, no process", function()
      if helpers.skip_without_bwrap() then return end
      -- TMPDIR beside the workdir: one inside it is not used (spec/hostpaths_spec.lua)
      local base = helpers.tmpdir()
      local p = cli.spawn({ cli.ISOLATE, "--workdir", tmp, "--", "sh", "-c",
        "echo ready > ready; while [ ! -e go ]; do sleep 0.05; done" }, { env = { "TMPDIR=" .. base } })
      assert.truthy(cli.wait_for(function() return helpers.read(tmp .. "/ready") end, 30), p.err)
      local dirs = {}
      for _, n in ipairs(cli.ls(base)) do if n:match("^isolate%.") then dirs[#dirs + 1] = n end end
      assert.are.equal(1, #dirs)
      local dir = base .. "/" .. dirs[1]
      assert.are.equal(tonumber("700", 8), uv.fs_stat(dir).mode & tonumber("777", 8))
      -- isolate's session manager's runtime_dir: the socket, and the
      -- session's own copy of the seccomp filter (this process's id in its
      -- name, 0600)
      local names = cli.ls(dir)
      table.sort(names)
      assert.are.equal(2, #names, table.concat(names, " "))
      assert.are.equal("proxy.sock", names[2])
      assert.truthy(names[1]:match("^proxy%.%d+%-%x+%.sandbox%-seccomp%.bpf$"), names[1])
      assert.are.equal(tonumber("600", 8), uv.fs_stat(dir .. "/" .. names[1]).mode & tonumber("777", 8))
      assert.are.equal("socket", uv.fs_stat(dir .. "/proxy.sock").type)
      assert.truthy(#cli.pgrep(dir) > 0) -- bwrap binds the socket: its argv names it
      helpers.write(tmp .. "/go", "")
      local status, _, err = p.wait(30)
      assert.are.equal(0, status, err)
      assert.are.same({ "go", "ready" }, cli.ls(tmp))
      assert.are.same({}, cli.ls(base))
      helpers.rmtree(base)
      assert.are.same({}, cli.pgrep(dir))
    end)

    it("tears the proxy down after a signal too", function()
      if helpers.skip_without_bwrap() then return end
      local p = cli.spawn({ cli.ISOLATE, "--workdir", tmp, "--", "sh", "-c",
        "echo ready > ready; exec sleep 60" }, { env = { "TMPDIR=" .. tmp } })
      assert.truthy(cli.wait_for(function() return helpers.read(tmp .. "/ready") end, 30), p.err)
      p.kill("sigterm")
      local status, _, err = p.wait(30)
      assert.are.equal(143, status, err)
      assert.are.same({ "ready" }, cli.ls(tmp))
    end)
  end)

  describe("usage errors exit 2 with one line", function()
    local cases = {
      { "an unknown option", { "--frobnicate", "--", "true" }, "unknown option %-%-frobnicate" },
      { "a missing value", { "--mode" }, "%-%-mode needs a value" },
      { "a value where -- stands", { "--workdir", "--", "true" }, "%-%-workdir needs a value" },
      { "a bad --mode", { "--mode", "vm", "--", "true" }, "%-%-mode must be one of" },
      { "a bad --network", { "--network", "block", "--", "true" }, "%-%-network must be one of" },
      { "a bad --bridge", { "--bridge", "nc", "--", "true" }, "%-%-bridge must be one of" },
      { "a bad --target", { "--target", "moon", "--", "true" }, "%-%-target must be one of" },
      { "an invalid --allow-host", { "--allow-host", "http://example.com/", "--", "true" }, "%-%-allow%-host" },
      { "a numeric shorthand --allow-host", { "--allow-host", "127.1", "--", "true" }, "%-%-allow%-host" },
      { "--allow-host where no proxy runs", { "--network", "allow", "--allow-host", "example.com", "--", "true" },
        "%-%-allow%-host has no effect" },
      { "--mode none --network deny", { "--mode", "none", "--network", "deny", "--", "true" }, "cannot enforce" },
      { "bwrap deny refused for an ssh target", { "--target", "ssh", "--", "true" }, "local target" },
      { "bwrap refused for a pct target", { "--network", "allow", "--target", "pct", "--", "true" }, "pct" },
      { "isolation refused for a sandbox target", { "--mode", "docker", "--network", "allow", "--target",
        "sandbox", "--", "true" }, "sandbox" },
      { "--json without --dry-run", { "--json", "--", "true" }, "%-%-json needs %-%-dry%-run" },
      { "no command", { "--mode", "none" }, "no command" },
      { "nothing after --", { "--mode", "none", "--" }, "no command" },
      { "a word before --", { "ls" }, "the command goes after %-%-" },
      { "a missing --workdir", { "--workdir", "/nonexistent/isolate-spec", "--", "true" }, "%-%-workdir" },
      { "a missing --bind", { "--bind", "/nonexistent/isolate-spec", "--", "true" }, "%-%-bind" },
      { "a missing --ca-cert", { "--ca-cert", "/nonexistent/ca.pem", "--", "true" }, "%-%-ca%-cert" },
      { "a bad --hook-url", { "--hook-url", "ftp://example.com/", "--", "true" }, "%-%-hook%-url" },
      { "a missing --config file", { "--config", "/nonexistent/isolate.json", "--", "true" }, "%-%-config" },
      { "proxy without an address", { "proxy", "--allow", "example.com" }, "exactly one of" },
      { "proxy with both addresses", { "proxy", "--unix", "/tmp/x.sock", "--listen", "127.0.0.1:0", "--allow",
        "example.com" }, "exactly one of" },
      { "proxy without --allow", { "proxy", "--listen", "127.0.0.1:0" }, "%-%-allow" },
      { "proxy with an invalid pattern", { "proxy", "--listen", "127.0.0.1:0", "--allow", "a b" }, "%-%-allow" },
      { "proxy with an unknown option", { "proxy", "--listen", "127.0.0.1:0", "--allow", "x.example.com",
        "--fast" }, "unknown option" },
      { "proxy with a bad --listen", { "proxy", "--listen", "0.0.0.0:80", "--allow", "example.com" }, "%-%-listen" },
    }
    for _, c in ipairs(cases) do
      it(c[1], function()
        local status, out, err = cli.isolate(c[2])
        one_line_error(status, out, err)
        assert.truthy(err:match(c[3]), err)
      end)
    end

    it("config files: not JSON, not an object, an unknown key, a map for allow_hosts", function()
      for _, text in ipairs({ "{nope", "[1, 2]", "[]", '{"mode": "bwrap", "colour": "red"}',
        '{"mode": "bwrap", "mode": "docker"}',
        '{"mode": "bwrap", "network": "deny", "allow_hosts": {"a": "example.com"}}',
        '{"mode": "", "network": "deny"}' }) do
        helpers.write(tmp .. "/c.json", text)
        local status, out, err = cli.isolate({ "--config", tmp .. "/c.json", "--", "true" })
        one_line_error(status, out, err)
        assert.truthy(err:find("--config", 1, true) or err:find("cannot enforce", 1, true), err)
      end
    end)
  end)

  describe("--config", function()
    it("supplies the config; options on the line win; --allow-host adds to allow_hosts", function()
      helpers.write(tmp .. "/c.json", '{"mode": "bwrap", "network": "allow", "allow_hosts": ["a.example.com"]}')
      local status, out, err = cli.isolate({ "--config", tmp .. "/c.json", "--dry-run", "--json", "--workdir", tmp,
        "--", "true" })
      assert.are.equal(0, status, err)
      local argv = cjson.decode(out)
      for _, a in ipairs(argv) do assert.are_not.equal("--unshare-net", a) end
      status, out, err = cli.isolate({ "--config", tmp .. "/c.json", "--network", "deny", "--allow-host",
        "b.example.com", "--dry-run", "--workdir", tmp, "--", "true" })
      assert.are.equal(0, status, err)
      assert.truthy(out:find("\n  a.example.com\n", 1, true), out)
      assert.truthy(out:find("\n  b.example.com\n", 1, true), out)
      assert.truthy(out:find("\n--unshare-net\n", 1, true), out)
    end)

    it("a config with mode \"\" and no --network runs with the network allowed", function()
      helpers.write(tmp .. "/c.json", '{"mode": ""}')
      local status, out = cli.isolate({ "--config", tmp .. "/c.json", "--dry-run", "--json", "--", "true" })
      assert.are.equal(0, status)
      assert.are.same({ "bash", "-c", "--", "true" }, cjson.decode(out))
    end)
  end)

  describe("--help and --version", function()
    it("--help names every option and exits 0", function()
      local status, out = cli.isolate({ "--help" })
      assert.are.equal(0, status)
      for _, o in ipairs({ "--mode", "--network", "--allow-host", "--agent", "--workdir", "--bind", "--ro-bind",
        "--ca-cert", "--bridge", "--target", "--config", "--hook-url", "--dry-run", "--json", "--verbose",
        "--help", "--version", "isolate proxy", "--unix", "--listen", "--allow", "--allow-private" }) do
        assert.truthy(out:find(o, 1, true), o)
      end
    end)

    it("--version names the version and the module it loaded, the checkout's build", function()
      local status, out = cli.isolate({ "--version" })
      assert.are.equal(0, status)
      assert.are.equal("isolate " .. isolation.version .. " (module " .. cli.ROOT .. "/build/isolation.so)\n", out)
    end)

    it("finds the checkout's module through a symlink to bin/isolate", function()
      assert(uv.fs_symlink(cli.ISOLATE, tmp .. "/isolate"))
      local status, out = cli.spawn({ tmp .. "/isolate", "--version" }, { cwd = "/" }).wait(30)
      assert.are.equal(0, status)
      assert.truthy(out:find(cli.ROOT .. "/build/isolation.so", 1, true), out)
    end)
  end)

  describe("isolate proxy", function()
    local up
    before_each(function() up = cli.upstream() end)
    after_each(function() up.stop() end)

    it("prints its unix address first, serves, logs each request, removes its socket on SIGTERM", function()
      local sock = tmp .. "/p.sock"
      local p = cli.spawn({ cli.ISOLATE, "proxy", "--unix", sock, "--allow", "127.0.0.1:" .. up.port })
      assert.truthy(cli.wait_for(function() return p.out:find("\n", 1, true) end, 30), p.err)
      assert.are.equal("unix:" .. sock .. "\n", p.out)
      assert.are.equal("socket", uv.fs_stat(sock).type)
      local url = "http://127.0.0.1:" .. up.port .. "/via-unix"
      local resp = cli.unix_request(sock, "GET " .. url .. " HTTP/1.1\r\nHost: 127.0.0.1:" .. up.port
        .. "\r\nConnection: close\r\n\r\n")
      assert.truthy(resp:match("^HTTP/1.1 200"), resp)
      assert.truthy(resp:find("hello from upstream GET /via-unix HTTP/1.1", 1, true), resp)
      resp = cli.unix_request(sock, "GET http://denied.example.com/ HTTP/1.1\r\nHost: denied.example.com\r\n"
        .. "Connection: close\r\n\r\n")
      assert.truthy(resp:match("^HTTP/1.1 403"), resp)
      assert.truthy(cli.wait_for(function() return p.err:find("denied.example.com", 1, true) end, 10), p.err)
      p.kill("sigterm")
      local status, out, err = p.wait(30)
      assert.are.equal(0, status, err)
      assert.are.equal("unix:" .. sock .. "\n", out)
      assert.falsy(uv.fs_stat(sock))
      local logged = lines(err)
      assert.are.equal(2, #logged, err)
      assert.truthy(logged[1]:find("^allow GET 127%.0%.0%.1:" .. up.port .. " 200"), logged[1])
      assert.truthy(logged[2]:find("^deny GET denied%.example%.com:80 403"), logged[2])
    end)

    it("listens on a free loopback port with --listen 127.0.0.1:0; --quiet logs nothing; SIGINT ends it", function()
      local p = cli.spawn({ cli.ISOLATE, "proxy", "--listen", "127.0.0.1:0", "--quiet", "--allow",
        "127.0.0.1:" .. up.port, "--allow", "other.example.com" })
      assert.truthy(cli.wait_for(function() return select(2, p.out:gsub("\n", "")) >= 2 end, 30), p.err)
      local port, url = p.out:match("^127%.0%.0%.1:(%d+)\n(http://isolation:%x+@127%.0%.0%.1:%d+)\n$")
      assert.truthy(port, p.out)
      assert.are.equal("127.0.0.1:" .. port, url:match("@(.*)$"))
      -- the token is required (407) and the printed URL carries it
      local code, out = helpers.run("curl -s -o /dev/null -w '%{http_code}' --max-time 20 -x http://127.0.0.1:"
        .. port .. " http://127.0.0.1:" .. up.port .. "/via-tcp")
      assert.are.equal("407", out, code)
      code, out = helpers.run("curl -s --max-time 20 -x " .. url .. " http://127.0.0.1:" .. up.port .. "/via-tcp")
      assert.are.equal(0, code)
      assert.are.equal("hello from upstream GET /via-tcp HTTP/1.1\n", out)
      code, out = helpers.run("curl -s --max-time 20 -x " .. url:gsub("^http", "socks5h") .. " http://127.0.0.1:"
        .. up.port .. "/via-socks")
      assert.are.equal(0, code)
      assert.are.equal("hello from upstream GET /via-socks HTTP/1.1\n", out)
      p.kill("sigint")
      local status, _, err = p.wait(30)
      assert.are.equal(0, status, err)
      assert.are.equal("", err)
    end)

    it("refuses a unix path that is not a socket, and leaves it alone", function()
      helpers.write(tmp .. "/file", "keep me")
      local status, out, err = cli.isolate({ "proxy", "--unix", tmp .. "/file", "--allow", "example.com" })
      assert.are_not.equal(0, status)
      assert.are.equal("", out)
      assert.are.equal(1, #lines(err), err)
      assert.are.equal("keep me", helpers.read(tmp .. "/file"))
    end)
  end)
end)

describe("isolate installed by luarocks", function()
  local tmp
  before_each(function() tmp = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(tmp) end)

  it("runs from the tree alone: --version, --dry-run, and a real --network allow run", function()
    -- a copy of the checkout without build/ (but the bridge) and .git, installed into a fresh tree
    local code, _, err = helpers.run("mkdir " .. helpers.shquote(tmp .. "/src") .. " && tar -C "
      .. helpers.shquote(cli.ROOT) .. " --exclude=./build --exclude=./.git --exclude=./.luarocks -cf - . | tar -C "
      .. helpers.shquote(tmp .. "/src") .. " -xf -"
      -- the rock installs the bridge program that `make` built
      .. " && mkdir " .. helpers.shquote(tmp .. "/src/build") .. " && cp "
      .. helpers.shquote(cli.ROOT .. "/build/isolation-bridge") .. " " .. helpers.shquote(tmp .. "/src/build/"))
    assert.are.equal(0, code, err)
    -- the rockspec must list every C file the Makefile compiles
    local rockspec = assert(helpers.read(cli.ROOT .. "/isolation-scm-1.rockspec"))
    local missing = {}
    local _, sources = helpers.run("cd " .. helpers.shquote(cli.ROOT) .. " && ls src/*.c src/*/*.c")
    for n in sources:gmatch("[^\n]+") do
      if not rockspec:find('"' .. n .. '"', 1, true) then missing[#missing + 1] = n end
    end
    assert.is_truthy(sources:find("src/proxy/proxy_conn.c", 1, true), sources)
    assert.are.same({}, missing, "isolation-scm-1.rockspec does not list these C files of src/")
    local tree = tmp .. "/tree"
    -- offline: the rockspec's luv and lua-cjson are the system's (Debian's
    -- packages, not rocks), declared provided as `make rockcheck` does
    helpers.write(tmp .. "/rocks.lua", string.format('rocks_provided = { luv = "%s-1", ["lua-cjson"] = "%s-1" }\n',
      require("luv").version_string(), require("cjson")._VERSION))
    local out
    code, out, err = helpers.run("cd " .. helpers.shquote(tmp .. "/src") .. " && LUAROCKS_CONFIG="
      .. helpers.shquote(tmp .. "/rocks.lua") .. " luarocks --lua-version 5.4 make --tree " .. helpers.shquote(tree)
      .. " isolation-scm-1.rockspec")
    assert.are.equal(0, code, out .. err)
    -- only the tree, and the directories of the system's luv and cjson
    local function dir_of(mod) return (assert(package.searchpath(mod, package.cpath)):match("^(.*)/[^/]+$")) end
    local env = {
      "LUA_PATH=" .. tree .. "/share/lua/5.4/?.lua;" .. tree .. "/share/lua/5.4/?/init.lua",
      "LUA_CPATH=" .. tree .. "/lib/lua/5.4/?.so;" .. dir_of("luv") .. "/?.so;" .. dir_of("cjson") .. "/?.so",
    }
    local work = tmp .. "/work"
    assert(uv.fs_mkdir(work, tonumber("755", 8)))
    local status, vout, verr = cli.spawn({ tree .. "/bin/isolate", "--version" }, { env = env, cwd = work }).wait(60)
    assert.are.equal(0, status, verr)
    assert.are.equal("isolate " .. isolation.version .. " (module " .. tree .. "/lib/lua/5.4/isolation.so)\n", vout)
    local dout, derr
    status, dout, derr = cli.spawn({ tree .. "/bin/isolate", "--dry-run", "--", "true" }, { env = env, cwd = work })
      .wait(60)
    assert.are.equal(0, status, derr)
    assert.truthy(dout:find("\nbwrap\n", 1, true), dout)
    if helpers.skip_without_bwrap() then return end
    local rerr
    status, _, rerr = cli.spawn({ tree .. "/bin/isolate", "--network", "allow", "--", "sh", "-c", "pwd > where" },
      { env = env, cwd = work }).wait(60)
    assert.are.equal(0, status, rerr)
    assert.are.equal(assert(uv.fs_realpath(work)) .. "\n", helpers.read(work .. "/where"))
  end)
end)
