-- isolation.cli, the `isolate` command, called in-process: its option
-- parsers, the --config file reader, the config it builds, the process
-- table and where a forwarded signal goes. Nothing here may end the busted
-- process: a usage error comes back as nil, message, status. The last part
-- runs bin/isolate as a process for what only a process shows (the
-- module's own --listen message, --accept-listeners with a real handover).
local uv = require("luv")
local isolation = require("isolation")
local helpers = require("helpers")
local support = require("support.cli")
local cli = require("isolation.cli")

-- Runs f with io.stdout and io.stderr replaced; returns f's results packed,
-- then what was written to each.
local function captured(f, ...)
  local out, err = {}, {}
  local function sink(buf) return { write = function(self, ...) for _, s in ipairs({ ... }) do buf[#buf + 1] = s end
    return self end, flush = function() end } end
  local real_out, real_err = io.stdout, io.stderr
  io.stdout, io.stderr = sink(out), sink(err) -- luacheck: ignore 122
  local r = table.pack(pcall(f, ...))
  io.stdout, io.stderr = real_out, real_err -- luacheck: ignore 122
  if not r[1] then error(r[2], 0) end
  return table.pack(table.unpack(r, 2, r.n)), table.concat(out), table.concat(err)
end

local function usage_error(pattern, v, msg, status)
  assert.is_nil(v)
  assert.are.equal(2, status)
  assert.is_string(msg)
  assert.is_nil(msg:find("\n"), msg)
  assert.matches(pattern, msg)
end

describe("isolation.cli", function()
  local tmp
  before_each(function() tmp = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(tmp) end)

  describe("parse (isolate [options] -- command)", function()
    it("reads single, repeated and flag options, --name=value, and the command after --", function()
      local o = assert(cli.parse({ "--mode", "docker", "--allow-host", "a.example.com", "--allow-host=b.example.com",
        "--bind", "/x", "--dry-run", "--setenv=A=1", "--", "echo", "--help", "a b" }))
      assert.are.equal("docker", o.mode)
      assert.are.same({ "a.example.com", "b.example.com" }, o.allow_hosts)
      assert.are.same({ "/x" }, o.binds)
      assert.are.same({ "A=1" }, o.env_set)
      assert.is_true(o.dry_run)
      -- after --, nothing is an option
      assert.are.same({ "echo", "--help", "a b" }, o.command)
    end)

    it("gives back a usage error instead of exiting, naming the option and what it accepts", function()
      usage_error('^%-%-mode must be one of bwrap, docker, none, podman %(got "vm"%)$',
        cli.parse({ "--mode", "vm", "--", "true" }))
      usage_error("^%-%-network must be one of allow, deny, none", cli.parse({ "--network=open", "--", "true" }))
      usage_error("^%-%-workdir needs a value$", cli.parse({ "--workdir" }))
      usage_error("^%-%-workdir needs a value$", cli.parse({ "--workdir", "--", "true" }))
      usage_error("^%-%-workdir needs a non%-empty value$", cli.parse({ "--workdir=", "--", "true" }))
      usage_error("^unknown option %-%-fast$", cli.parse({ "--fast", "--", "true" }))
      usage_error("^unknown option %-%-dry%-run$", cli.parse({ "--dry-run=yes", "--", "true" }))
      usage_error('^unexpected argument "ls" %(the command goes after %-%-%)$', cli.parse({ "ls" }))
    end)

    it("stops at --help and --version: status 0, the text on stdout, nothing parsed after", function()
      local r, out = captured(cli.parse, { "--help", "--mode", "vm" })
      assert.are.same({ nil, nil, 0, n = 3 }, r)
      assert.matches("^Usage: isolate %[options%] %-%- command", out)
      assert.truthy(out:find("--accept-listeners N", 1, true), out)
      r, out = captured(cli.parse, { "--version" })
      assert.are.equal(0, r[3])
      assert.matches("^isolate " .. isolation.version:gsub("%p", "%%%0") .. " %(module .*isolation%.so%)\n$", out)
      -- an error before --help still wins, as the words are read in order
      usage_error("%-%-mode", cli.parse({ "--mode", "vm", "--help" }))
    end)
  end)

  describe("parse_proxy (isolate proxy)", function()
    it("reads the address, patterns after --allow, and the flags; a relative --unix is made absolute", function()
      local o = assert(cli.parse_proxy({ "--unix", "p.sock", "--allow", "a.example.com", "b.example.com",
        "--allow=c.example.com", "--quiet", "--allow-private" }))
      assert.are.equal(assert(uv.cwd()) .. "/p.sock", o.unix)
      assert.are.same({ "a.example.com", "b.example.com", "c.example.com" }, o.allow)
      assert.is_true(o.quiet)
      assert.is_true(o.allow_private)
      assert.is_nil(o.accept_listeners)
    end)

    it("takes --accept-listeners N with --unix, as an integer when it is one", function()
      local o = assert(cli.parse_proxy({ "--unix", "/tmp/p.sock", "--accept-listeners", "3", "--allow",
        "x.example.com" }))
      assert.are.equal(3, o.accept_listeners)
      assert.are.equal("integer", math.type(o.accept_listeners))
      o = assert(cli.parse_proxy({ "--unix", "/tmp/p.sock", "--accept-listeners=0", "--allow", "x.example.com" }))
      assert.are.equal(0, o.accept_listeners)
      -- what is not a decimal integer goes to the module as it is, to be refused there
      for _, v in ipairs({ "abc", "1.5", "-1", "0x10", "99999999999999999999" }) do
        o = assert(cli.parse_proxy({ "--unix", "/tmp/p.sock", "--accept-listeners", v, "--allow", "x.example.com" }))
        assert.are.equal(v, o.accept_listeners)
      end
      usage_error("^proxy: %-%-accept%-listeners needs %-%-unix",
        cli.parse_proxy({ "--listen", "127.0.0.1:0", "--accept-listeners", "1", "--allow", "x.example.com" }))
      usage_error("^%-%-accept%-listeners needs a value$",
        cli.parse_proxy({ "--unix", "/tmp/p", "--accept-listeners" }))
    end)

    it("leaves --listen to the module: no pattern of its own, which was laxer than the module's", function()
      for _, v in ipairs({ "0.0.0.0:80", "127.0.0.1:99999", "[::1]:08", "localhost:80" }) do
        local o = assert(cli.parse_proxy({ "--listen", v, "--allow", "x.example.com" }))
        assert.are.equal(v, o.listen)
        local p, err = isolation.proxy({ listen = v, allow = { "x.example.com" } })
        assert.is_nil(p)
        assert.matches("^isolation: listen must be", err)
      end
    end)

    it("refuses what isolation.proxy cannot be asked for, naming the option", function()
      usage_error("exactly one of %-%-unix PATH or %-%-listen ADDR", cli.parse_proxy({ "--allow", "x.example.com" }))
      usage_error("exactly one of", cli.parse_proxy({ "--unix", "/a", "--listen", "127.0.0.1:0", "--allow", "x" }))
      usage_error("%-%-allow PATTERN is required", cli.parse_proxy({ "--unix", "/a" }))
      usage_error('^proxy: %-%-allow: host pattern "a b" is invalid', cli.parse_proxy({ "--unix", "/a", "--allow",
        "a b" }))
      usage_error("^proxy: unknown option %-%-fast$", cli.parse_proxy({ "--unix", "/a", "--allow", "x", "--fast" }))
      usage_error("^proxy: %-%-quiet takes no value$", cli.parse_proxy({ "--quiet=1" }))
      usage_error("patterns follow %-%-allow", cli.parse_proxy({ "--unix", "/a", "stray" }))
    end)

    it("does not change the caller's argument table", function()
      local args = { "--unix=/tmp/p.sock", "--allow=x.example.com" }
      assert(cli.parse_proxy(args))
      assert.are.same({ "--unix=/tmp/p.sock", "--allow=x.example.com" }, args)
    end)
  end)

  describe("read_config (the --config file reader)", function()
    local function file(text)
      local path = tmp .. "/c.json"
      helpers.write(path, text)
      return path
    end

    it("gives the file's keys, JSON null left out, an empty object for allow_hosts taken for []", function()
      local cfg = assert(cli.read_config(file('{"mode": "bwrap", "network": null, "allow_hosts": {}}')))
      assert.are.same({ mode = "bwrap", allow_hosts = {} }, cfg)
      cfg = assert(cli.read_config(file('{"mode": "docker", "allow_hosts": ["a.example.com", "b.example.com"]}')))
      assert.are.same({ mode = "docker", allow_hosts = { "a.example.com", "b.example.com" } }, cfg)
    end)

    it("keeps a map for allow_hosts a map, so that isolation.config refuses it", function()
      local path = file('{"mode": "bwrap", "network": "deny", "allow_hosts": {"a": "example.com"}}')
      local cfg = assert(cli.read_config(path))
      assert.are.same({ a = "example.com" }, cfg.allow_hosts)
      usage_error("^%-%-config " .. path:gsub("%p", "%%%0") .. ": .*allow_hosts",
        cli.config(assert(cli.parse({ "--config", path, "--", "true" }))))
    end)

    it("refuses text that is not a JSON object, with the strict codec's message", function()
      usage_error("duplicate key \"mode\"", cli.read_config(file('{"mode": "bwrap", "mode": "docker"}')))
      usage_error("must hold a JSON object", cli.read_config(file("[]")))
      usage_error("must hold a JSON object", cli.read_config(file('"bwrap"')))
      usage_error("not valid JSON", cli.read_config(file("{nope")))
      usage_error("not valid UTF%-8", cli.read_config(file('{"mode": "\255"}')))
    end)

    it("reads only a small regular file: no directory, device, FIFO, or file over 1 MiB", function()
      usage_error("not a regular file %(a directory%)", cli.read_config(tmp))
      usage_error("not a regular file %(a character device%)", cli.read_config("/dev/zero"))
      assert.is_true(os.execute("mkfifo " .. helpers.shquote(tmp .. "/fifo")))
      -- a FIFO nobody writes to would block a reader forever: refused before the open
      usage_error("not a regular file %(a FIFO%)", cli.read_config(tmp .. "/fifo"))
      usage_error("cannot read it", cli.read_config(tmp .. "/missing.json"))
      local big = file('{"mode": "bwrap"}' .. (" "):rep(1024 * 1024))
      usage_error("too large %(%d+ bytes; a config file may hold at most 1048576%)", cli.read_config(big))
      local exact = file('{"mode": "bwrap"}' .. (" "):rep(1024 * 1024 - 17))
      assert.are.same({ mode = "bwrap" }, cli.read_config(exact))
    end)
  end)

  describe("config (the file, the line's options over it, the defaults)", function()
    it("lets the line win and --allow-host add to the file's allow_hosts", function()
      local path = tmp .. "/c.json"
      helpers.write(path, '{"mode": "bwrap", "network": "allow", "allow_hosts": ["a.example.com"]}')
      local cfg = assert(cli.config(assert(cli.parse({ "--config", path, "--network", "deny", "--allow-host",
        "b.example.com", "--", "true" }))))
      assert.are.same({ mode = "bwrap", network = "deny", allow_hosts = { "a.example.com", "b.example.com" } }, cfg)
    end)

    it("defaults to bwrap with the network denied; --mode none allows it", function()
      assert.are.same({ mode = "bwrap", network = "deny", allow_hosts = {} },
        cli.config(assert(cli.parse({ "--", "true" }))))
      assert.are.same({ mode = "", network = "allow" },
        cli.config(assert(cli.parse({ "--mode", "none", "--", "true" }))))
      usage_error("cannot enforce network deny", cli.config(assert(cli.parse({ "--mode", "none", "--network",
        "deny", "--", "true" }))))
      usage_error("^%-%-allow%-host has no effect here", cli.config(assert(cli.parse({ "--network", "allow",
        "--allow-host", "a.example.com", "--", "true" }))))
      usage_error('^%-%-allow%-host: host pattern "127.1" is invalid', cli.config(assert(cli.parse({ "--allow-host",
        "127.1", "--", "true" }))))
    end)
  end)

  describe("resolve_table and command_line", function()
    it("gathers --resolve values by name", function()
      assert.are.same({ ["a.example.com"] = { "10.0.0.1", "10.0.0.2", "10.0.0.3" } },
        cli.resolve_table({ "a.example.com:10.0.0.1,10.0.0.2", "a.example.com:10.0.0.3" }))
      assert.is_nil((cli.resolve_table({})))
      usage_error('^%-%-resolve must be NAME:ADDR%[,ADDR...%] %(got "nope"%)$', cli.resolve_table({ "nope" }))
    end)

    it("quotes each word for bash, a reserved first word too", function()
      -- = would be an assignment, $ an expansion: quoted; a plain path stays bare
      assert.are.equal([[echo 'a b' '$HOME' 'it'\''s' 'x=1' ok/path]],
        cli.command_line({ "echo", "a b", "$HOME", "it's", "x=1", "ok/path" }))
      assert.are.equal("'if' true", cli.command_line({ "if", "true" }))
      assert.are.equal("echo if", cli.command_line({ "echo", "if" }))
    end)
  end)

  describe("the process table and signal forwarding", function()
    it("reads comm and ppid from /proc, a comm holding ') ' included", function()
      local prog = tmp .. "/odd) name"
      assert.is_true(os.execute("cp /bin/sleep " .. helpers.shquote(prog)))
      local child = assert(uv.spawn(prog, { args = { "30" } }, function() end))
      local pid = child:get_pid()
      local procs = cli.process_table()
      child:kill("sigkill")
      support.wait_for(function() return child:is_active() == false end, 5)
      child:close()
      uv.run("nowait")
      assert.are.same({ comm = "odd) name", ppid = uv.os_getpid() }, procs[pid])
      assert.are.equal(uv.os_getppid(), procs[uv.os_getpid()].ppid)
    end)

    it("sends a signal to the sandbox's processes, not to bwrap; otherwise to the child itself", function()
      local procs = {
        [10] = { comm = "bash", ppid = 1 },  -- isolate's child: the limits shell
        [11] = { comm = "bwrap", ppid = 10 }, -- the outer bwrap
        [12] = { comm = "bwrap", ppid = 11 }, -- bwrap's pid 1 in the sandbox
        [13] = { comm = "sh", ppid = 12 },
        [14] = { comm = "sleep", ppid = 13 },
        [20] = { comm = "other", ppid = 1 },  -- not ours
        [21] = { comm = "bash", ppid = 20 },
      }
      local function sorted(t) table.sort(t); return t end
      assert.are.same({ 13, 14 }, sorted(cli.signal_targets(procs, 10)))
      assert.are.same({ 13, 14 }, sorted(cli.signal_targets(procs, 11)))
      assert.are.same({ 21 }, cli.signal_targets(procs, 21)) -- no bwrap below: the child itself
      assert.are.same({ 99 }, cli.signal_targets(procs, 99)) -- gone meanwhile
      procs[13], procs[14] = nil, nil
      assert.are.same({ 11 }, cli.signal_targets(procs, 11)) -- nothing in the sandbox yet: bwrap
    end)
  end)

  describe("main", function()
    it("returns the status and prints one line for a usage error, without exiting", function()
      local r, out, err = captured(cli.main, { "--json", "--", "true" })
      assert.are.equal(2, r[1])
      assert.are.equal("", out)
      assert.are.equal("isolate: --json needs --dry-run\n", err)
      r, out, err = captured(cli.main, { "proxy", "--unix", "/a" })
      assert.are.equal("", out)
      assert.are.equal(2, r[1])
      assert.are.equal("isolate: proxy: --allow PATTERN is required (at least one)\n", err)
    end)

    it("prints --dry-run --json with the codec: the argv as one JSON array", function()
      local r, out, err = captured(cli.main, { "--mode", "none", "--dry-run", "--json", "--", "echo", "a/b", "é" })
      assert.are.equal(0, r[1], err)
      assert.are.equal('["bash", "-c", "--", "echo a/b \'é\'"]\n', out)
      -- JSON holds text: an element that is not UTF-8 is refused, not written as invalid JSON
      r, out, err = captured(cli.main, { "--mode", "none", "--dry-run", "--json", "--", "echo", "\255" })
      assert.are.equal(2, r[1])
      assert.are.equal("", out)
      assert.are.equal("isolate: --json: argv[4] is not valid UTF-8 (JSON holds text only: use the text form)\n", err)
    end)
  end)
end)

describe("isolate proxy (a process)", function()
  local tmp
  before_each(function() tmp = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(tmp) end)

  local function one_line(status, out, err)
    assert.are.equal(2, status, err)
    assert.are.equal("", out)
    assert.matches("^isolate: proxy: [^\n]+\n$", err)
  end

  it("prints the module's --listen message as a usage error (127.0.0.1:99999 was exit 125)", function()
    for _, v in ipairs({ "127.0.0.1:99999", "0.0.0.0:80", "[::1]:08" }) do
      local status, out, err = support.isolate({ "proxy", "--listen", v, "--allow", "example.com" })
      one_line(status, out, err)
      assert.truthy(err:find('--listen must be "127.0.0.1:PORT" or "[::1]:PORT", PORT 0 to 65535', 1, true), err)
      assert.truthy(err:find("(got \"" .. v .. "\")", 1, true), err)
    end
  end)

  it("refuses a bad --accept-listeners with the module's message, and --listen with it", function()
    for _, v in ipairs({ "65", "-1", "abc", "1.5" }) do
      local status, out, err = support.isolate({ "proxy", "--unix", tmp .. "/p.sock", "--accept-listeners", v,
        "--allow", "example.com" })
      one_line(status, out, err)
      assert.truthy(err:find("--accept-listeners must be an integer from 0 to 64", 1, true), err)
      assert.is_nil(uv.fs_stat(tmp .. "/p.sock"))
    end
    local status, out, err = support.isolate({ "proxy", "--listen", "127.0.0.1:0", "--accept-listeners", "1",
      "--allow", "example.com" })
    one_line(status, out, err)
    assert.truthy(err:find("needs --unix", 1, true), err)
  end)

  -- handover.py hands a loopback listener over the socket, as bridge pass
  -- does, and sends one request through it (to a host not on the list)
  local function handover(sock)
    local code, out, err = helpers.run("python3 spec/support/handover.py " .. helpers.shquote(sock) .. " listener")
    return code, out, err
  end

  for _, case in ipairs({ { "--accept-listeners 1", { "--accept-listeners", "1" }, true },
    { "no --accept-listeners", {}, false } }) do
    it("with " .. case[1] .. ", " .. (case[3] and "takes" or "does not take") .. " a listener handed over its socket",
      function()
        local sock = tmp .. "/p.sock"
        local argv = { support.ISOLATE, "proxy", "--unix", sock, "--allow", "example.com" }
        for _, a in ipairs(case[2]) do argv[#argv + 1] = a end
        local p = support.spawn(argv)
        assert.truthy(support.wait_for(function() return p.out:find("\n") ~= nil end, 30), p.err)
        assert.are.equal("unix:" .. sock .. "\n", p.out)
        local _, out = handover(sock)
        p.kill("sigterm")
        local status, _, err = p.wait(30)
        assert.are.equal(0, status, err)
        if case[3] then
          assert.matches("^ok\nvia%-listener:HTTP/1%.1 403 Forbidden\n", out)
          assert.truthy(err:find("deny GET blocked.example.net:80 403", 1, true), err)
        else
          assert.is_nil(out:match("^ok\n"), out)
          assert.is_nil(out:find("via-listener", 1, true), out)
        end
      end)
  end
end)
