-- wrap(): the one shell line must run exactly the argv the builders return,
-- with only the builder's $HOME and $(id -u):$(id -g) tokens expanded.
-- Property test: generated workdirs, commands and binds full of shell syntax
-- run through stand-in bwrap/docker/bash programs that print their argv.
local uv = require("luv")
local isolation = require("isolation")
local helpers = require("helpers")

local q = helpers.shquote

-- deterministic generator (xorshift), so a failure reproduces
local seed = 0x2545F491
local function rand(n)
  seed = seed ~ ((seed << 13) & 0xffffffff)
  seed = seed ~ (seed >> 17)
  seed = seed ~ ((seed << 5) & 0xffffffff)
  return seed % n + 1
end

local PIECES = {
  "'", '"', "$", "`", "\\", " ", "\n", "\t", "*", "?", "-", "--", "é", "日本", ";", "|", "&", "(", ")",
  "{", "}", "~", "!", "#", "%", "<", ">", "$HOME", "${HOME}", "$(id)", "`id`", "'\\''", "\"$HOME\"",
  "a", "b", "x", "1", ".", "..", "=", ",", "[", "]", "^", "+", "@", "\r", "\27[0m", "\xff", "\x80\xc3",
  "\21", "\3", "\127", "\4", "\22", "\23", "\27[201~", "\n^", "\n!!", "^x^y^", "\n\xc2\xa3", "\n\xa3",
}

-- every byte a terminal or line editor may act on: C0 but NUL (refused), and DEL
local CONTROL = {}
for b = 1, 31 do CONTROL[#CONTROL + 1] = string.char(b) end
CONTROL[#CONTROL + 1] = "\127"

-- tmux send-keys drops bytes that are not UTF-8 and the C1 controls: typed
-- lines are made of valid UTF-8 only, with every control byte among them
local TYPED_PIECES = {}
for _, p in ipairs(PIECES) do
  if p ~= "\xff" and p ~= "\x80\xc3" and p ~= "\n\xa3" then TYPED_PIECES[#TYPED_PIECES + 1] = p end
end
for _, c in ipairs(CONTROL) do TYPED_PIECES[#TYPED_PIECES + 1] = c end

-- true when the line holds a raw control byte other than newline
local function has_raw_control(line)
  return line:find("[\1-\9\11-\31\127]") ~= nil
end

-- what words are made of; the typed-line specs swap in TYPED_PIECES
local pieces = PIECES

local function word(len)
  local t = {}
  for i = 1, len do t[i] = pieces[rand(#pieces)] end
  return table.concat(t)
end

-- a path component that is none of "", ".", ".." and has no "/" or ":"
local function component(docker)
  while true do
    local c = word(rand(4)):gsub("/", "_")
    if docker then c = c:gsub(":", "_") end
    if c ~= "" and c ~= "." and c ~= ".." then return c end
  end
end

local function abs_path(docker)
  local parts = { "srv" }
  for i = 1, rand(3) do parts[#parts + 1 + i - i] = component(docker) end
  return "/" .. table.concat(parts, "/")
end

local function bind_path(docker)
  if rand(2) == 1 then return "$HOME/" .. component(docker) end
  return abs_path(docker)
end

-- Variable names the generated specs pass or set: base and agent names,
-- names of the caller's, and names the running shell sets or leaves unset.
local ENV_NAMES = { "PATH", "LANG", "LC_ALL", "TERM", "TZ", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
  "GEMINI_API_KEY", "FOO", "BAR_1", "_X", "UNSET_ONE", "EMPTY_ONE" }

local function gen_env(spec)
  if rand(4) == 1 then return end
  spec.env_pass, spec.env_set = {}, {}
  local used = {}
  for _ = 1, rand(4) - 1 do
    local n = ENV_NAMES[rand(#ENV_NAMES)]
    if not used[n] then used[n] = true; spec.env_pass[#spec.env_pass + 1] = n end
  end
  for _ = 1, rand(4) - 1 do
    local n = ENV_NAMES[rand(#ENV_NAMES)]
    if not used[n] and n ~= "PATH" then used[n] = true; spec.env_set[n] = word(rand(8)) end
  end
  if rand(8) == 1 then spec.env_inherit = true end
end

local function gen_spec(kind)
  local docker = kind == "docker"
  local spec = {
    workdir = abs_path(docker),
    command = (rand(3) == 1 and "-" or "") .. word(rand(12)),
    agent = ({ "claude", "codex", "gemini", "other" })[rand(4)],
    binds = {}, ro_binds = {},
  }
  for i = 1, rand(3) - 1 do spec.binds[i] = bind_path(docker) end
  for i = 1, rand(3) - 1 do spec.ro_binds[i] = bind_path(docker) end
  if docker then
    -- docker refuses a mount point given twice: make each path distinct
    local seen = { [spec.workdir] = true }
    for _, list in ipairs({ spec.binds, spec.ro_binds }) do
      for i, p in ipairs(list) do
        while seen[p] do p = p .. "/" .. i end
        list[i], seen[p] = p, true
      end
    end
  end
  if kind == "bwrap-deny" then
    spec.config = { mode = "bwrap", network = "deny" }
    spec.proxy_socket = abs_path(false)
  elseif kind == "bwrap" then
    spec.config = { mode = "bwrap" }
  elseif kind == "docker" then
    spec.config = { mode = "docker", network = rand(2) == 1 and "none" or "allow" }
    spec.tty = rand(2) == 1
  else
    spec.config = { mode = "" }
  end
  if kind ~= "none" then gen_env(spec) end
  return spec
end

local UID, GID

local MOUNT_FLAG = { ["--bind"] = true, ["--ro-bind"] = true, ["--bind-try"] = true, ["--ro-bind-try"] = true,
  ["--tmpfs"] = true }

-- The argv the shell should produce: builder tokens expanded, nothing else.
-- bwrap's own part, when argv() puts it behind `env -i NAME=...`.
local function expected(argv, home)
  -- a local bwrap, docker or podman line runs behind the reaper
  -- (isolation-bridge --reap GRACE [--container] --), which execs the
  -- rest: the stand-ins see what follows it
  local env_words = false
  if argv[2] == "--reap" then
    local n = (argv[4] == "--container" or argv[4] == "--env") and 5 or 4
    assert.are.same({ "--reap", "5", "--" }, { argv[2], argv[3], argv[n] })
    -- --env: the reaper takes env(1)'s words itself (-i NAME=value...)
    env_words = argv[4] == "--env"
    argv = table.move(argv, n + 1, #argv, 1, {})
  end
  if argv[1] == "env" or env_words then
    for i, v in ipairs(argv) do
      if v == "bwrap" then argv = table.move(argv, i, #argv, 1, {}) break end
    end
  end
  local out = {}
  for i, e in ipairs(argv) do
    if e == "HOME=$HOME" and argv[i - 1] == "-e" then
      e = "HOME=" .. home
    elseif e == "$(id -u):$(id -g)" and argv[i - 1] == "--user" then
      e = UID .. ":" .. GID
    elseif argv[i - 1] == "-v" and e:sub(1, 6) == "$HOME/" then
      local suffix = e:sub(-3) == ":ro" and ":ro" or ""
      local body = e:sub(1, #e - #suffix)
      local half = (#body - 1) // 2
      local p = body:sub(1, half)
      assert(body == p .. ":" .. p, "unexpected docker volume " .. e)
      local x = home .. p:sub(6)
      e = x .. ":" .. x .. suffix
    elseif (e == "$HOME" or e:sub(1, 6) == "$HOME/") and (MOUNT_FLAG[argv[i - 1]] or MOUNT_FLAG[argv[i - 2]]) then
      -- a mount's source or destination; the same text elsewhere (the command) is literal
      e = home .. e:sub(6)
    end
    out[i] = e
  end
  return out
end

-- The first element where two argvs differ, both %q-quoted (nil: none).
local function first_difference(want, got)
  for i = 1, math.max(#want, #got) do
    if want[i] ~= got[i] then return ("element %d: want %q, got %q"):format(i, want[i], got[i]) end
  end
end

local function tbl_index(t, v)
  for i, x in ipairs(t) do if x == v then return i end end
end

-- A stand-in's argv, its program's name only, without the --cidfile DIR/cid
-- that the reaper's --container adds after `docker run`.
local function drop_cidfile(got)
  got[1] = got[1]:match("[^/]+$")
  if got[1] == "docker" and got[3] == "--cidfile" then
    assert(got[4]:match("^/tmp/isolation%-cid%-[^/]+/cid$"), got[4])
    table.remove(got, 3)
    table.remove(got, 3)
  end
  return got
end

local function split_nul(s)
  local out = {}
  for field in s:gmatch("(.-)%z") do out[#out + 1] = field end
  return out
end

describe("wrap", function()
  local dir, stubs, marker_dir

  setup(function()
    dir = helpers.tmpdir()
    stubs = dir .. "/bin"
    marker_dir = dir .. "/markers"
    assert(os.execute("mkdir -p " .. q(stubs) .. " " .. q(marker_dir)))
    -- each writes its argv, and its environment (env -0), to fixed files:
    -- under env -i nothing but the kept names reaches bwrap's
    for _, name in ipairs({ "bwrap", "docker", "bash" }) do
      helpers.write(stubs .. "/" .. name, "#!/bin/sh\nprintf '%s\\0' \"$0\" \"$@\" > " .. q(dir .. "/argv.out")
        .. "\n/usr/bin/env -0 > " .. q(dir .. "/env.out") .. "\n")
      assert(os.execute("chmod +x " .. q(stubs .. "/" .. name)))
    end
    local _, u = helpers.run("id -u")
    local _, g = helpers.run("id -g")
    UID, GID = u:gsub("%s", ""), g:gsub("%s", "")
  end)

  teardown(function()
    helpers.rmtree(dir)
  end)

  -- Runs the line with /bin/sh (or `shell`) under exactly HOME, PATH (the stand-ins
  -- first), a canary secret and `vars` ({NAME = value}); the working
  -- directory is the marker directory, where a breakout would land.
  -- Returns the stand-in's argv and its environment ({NAME = value}).
  local function run_line(line, home, vars, shell)
    local out, env_out = dir .. "/argv.out", dir .. "/env.out"
    os.remove(out)
    os.remove(env_out)
    local assigns = {}
    for k, v in pairs(vars or {}) do assigns[#assigns + 1] = q(k .. "=" .. v) end
    local code, _, err = helpers.run("cd " .. q(marker_dir) .. " && exec env -i HOME=" .. q(home) .. " PATH="
      .. q(stubs .. ":/usr/bin:/bin") .. " CANARY_SECRET=leaked " .. table.concat(assigns, " ")
      .. " " .. (shell or "/bin/sh") .. " -c " .. q(line))
    assert.are.equal(0, code, err)
    local got = drop_cidfile(split_nul(assert(helpers.read(out), "the stand-in did not run")))
    local env = {}
    for _, kv in ipairs(split_nul(helpers.read(env_out) or "")) do
      local k, v = kv:match("^([^=]*)=(.*)$")
      if k and k ~= "PWD" and k ~= "OLDPWD" and k ~= "SHLVL" and k ~= "_" then env[k] = v end
    end
    return got, env
  end

  -- The environment bwrap must start with: HOME, and each base, agent and
  -- env_pass name that the running shell has (an unset one stays unset),
  -- env_set over them; everything when env_inherit.
  local function expected_env(spec, home, vars)
    local shell = { HOME = home, PATH = stubs .. ":/usr/bin:/bin", CANARY_SECRET = "leaked" }
    for k, v in pairs(vars) do shell[k] = v end
    local want = {}
    if spec.env_inherit then
      for k, v in pairs(shell) do want[k] = v end
    else
      want.HOME = home
      local names = {}
      for _, list in ipairs({ isolation.SANDBOX_ENV, isolation.AGENT_ENV[spec.agent] or {}, spec.env_pass or {} }) do
        for _, n in ipairs(list) do names[#names + 1] = n end
      end
      for _, n in ipairs(names) do want[n] = shell[n] end
    end
    for k, v in pairs(spec.env_set or {}) do want[k] = v end
    return want
  end

  -- Under the sanitizer build (make spec-asan) every line is still built
  -- and checked (the C under test), and one in RUN_EVERY is run: running
  -- them is shell work that `make spec` does for every line, and it was a
  -- third of spec-asan's time.
  local RUN_EVERY = os.getenv("ISOLATION_SANITIZER") == "1" and 8 or 1

  it("runs exactly the argv for 400 generated specs (bwrap allow/deny, docker, none), two HOMEs, sh, bash", function()
    local homes = { "/home/agent", "/tmp/ho me'q\"$x`y" }
    local kinds = { "bwrap", "bwrap-deny", "docker", "none" }
    local n = 0
    for i = 1, 400 do
      local spec = gen_spec(kinds[i % 4 + 1])
      local argv, err = isolation.argv(spec)
      assert(argv, err)
      local line = assert(isolation.wrap(spec))
      assert.is_nil(line:find("%z"))
      assert.is_false(has_raw_control(line), line)
      local home = homes[i % 2 + 1]
      -- the running shell sets some of the names, to hostile values, and not UNSET_ONE
      local vars = { EMPTY_ONE = "" }
      for _, name in ipairs(ENV_NAMES) do
        if name ~= "UNSET_ONE" and name ~= "PATH" and name ~= "EMPTY_ONE" and rand(3) > 1 then
          vars[name] = word(rand(8))
        end
      end
      local shell = i % 3 == 0 and "/bin/bash" or "/bin/sh"
      if i % RUN_EVERY == 0 then
        local got, env = run_line(line, home, vars, shell)
        assert.are.same(expected(argv, home), got, line)
        if spec.config.mode == "bwrap" then
          local want = expected_env(spec, home, vars)
          -- bash gives itself TERM=dumb (unexported) when TERM is unset, and
          -- ${TERM+...} sees it: what the line passes is the shell's TERM
          if shell == "/bin/bash" and vars.TERM == nil and not spec.env_inherit
            and (spec.env_set or {}).TERM == nil then
            want.TERM = "dumb"
          end
          assert.are.same(want, env, line)
          if not spec.env_inherit then assert.is_nil(env.CANARY_SECRET) end
        end
      end
      n = n + 1
    end
    assert.are.equal(400, n)
    -- nothing anywhere escaped its quotes
    local code, listing = helpers.run("ls -A " .. q(marker_dir))
    assert.are.equal(0, code)
    assert.are.equal("", listing)
  end)

  -- Each control byte at random places of one kind of element, in a mode
  -- that puts that element in the argv.
  local FIELD_MODES = {
    workdir = { "bwrap", "bwrap-deny", "docker", "none" }, command = { "bwrap", "bwrap-deny", "docker", "none" },
    binds = { "bwrap", "bwrap-deny", "docker" }, home_binds = { "bwrap", "docker" },
    ro_binds = { "bwrap", "bwrap-deny", "docker" }, proxy_socket = { "bwrap-deny" }, ca_cert = { "bwrap", "docker" },
    bridge_path = { "bwrap-deny" }, seccomp_file = { "bwrap", "bwrap-deny" },
  }
  local FIELDS = { "workdir", "command", "binds", "home_binds", "ro_binds", "proxy_socket", "ca_cert", "bridge_path",
    "seccomp_file" }

  -- s with `c` put at 1 to 3 random places after its first `keep` bytes
  local function sprinkle(s, c, keep)
    for _ = 1, rand(3) do
      local at = keep + rand(#s - keep + 1) - 1
      s = s:sub(1, at) .. c .. s:sub(at + 1)
    end
    return s
  end

  -- Each pair of byte and element is run by one shell, sh and bash in
  -- turn (each byte meets both, each element meets both): both shells on
  -- every pair doubled the spec's 100 s and proved nothing more.
  it("spells every C0 byte and DEL portably in every kind of element: none raw in the line, sh or bash runs the argv",
    function()
    local files = dir .. "/ctl"
    assert(os.execute("mkdir -p " .. q(files)))
    local n = 0
    for ci, c in ipairs(CONTROL) do
      for fi, field in ipairs(FIELDS) do
        local modes = FIELD_MODES[field]
        local kind = modes[rand(#modes)]
        local spec = gen_spec(kind)
        if field == "workdir" then
          spec.workdir = sprinkle(spec.workdir, c, 1)
        elseif field == "command" then
          -- sometimes a long run of control bytes (more than one printf takes)
          spec.command = sprinkle(spec.command, rand(4) == 1 and c:rep(40 + rand(40)) or c, 0)
        elseif field == "binds" or field == "ro_binds" then
          spec[field][#spec[field] + 1] = sprinkle(abs_path(kind == "docker"), c, 1)
        elseif field == "home_binds" then
          spec.binds[#spec.binds + 1] = sprinkle("$HOME/" .. component(kind == "docker"), c, 6)
        elseif field == "proxy_socket" then
          spec.proxy_socket = sprinkle(spec.proxy_socket, c, 1)
        elseif field == "ca_cert" then
          spec.ca_cert = sprinkle("/etc/ca.pem", c, 1)
        elseif field == "bridge_path" then
          -- the line runs it (the reaper in front of bwrap): a real copy
          spec.bridge, spec.bridge_path = "builtin", sprinkle(files .. "/isolation-bridge", c, #files + 1)
          if spec.bridge_path:sub(-1) == "\n" then
            -- the line's first word (a command substitution's output) cannot end with one
            local _, err = isolation.wrap(spec)
            assert.truthy(err:find("bridge_path must not end with a newline", 1, true), err)
            spec.bridge_path = spec.bridge_path .. "x"
          end
          assert(uv.fs_copyfile(isolation.BRIDGE, spec.bridge_path))
          assert(uv.fs_chmod(spec.bridge_path, tonumber("755", 8)))
        else
          -- the line opens this file for bwrap: it must exist
          spec.seccomp_file = sprinkle(files .. "/filter.bpf", c, #files + 1)
          helpers.write(spec.seccomp_file, "")
        end
        local argv = assert(isolation.argv(spec))
        local line = assert(isolation.wrap(spec))
        assert.is_false(has_raw_control(line), field .. ": " .. line)
        local shell = (ci + fi) % 2 == 0 and "/bin/sh" or "/bin/bash"
        n = n + 1
        if n % RUN_EVERY == 0 then
          local got = run_line(line, "/home/agent", nil, shell)
          assert.are.same(expected(argv, "/home/agent"), got, shell .. ": " .. line)
        end
      end
    end
    assert.are.equal(#CONTROL * #FIELDS, n)
    local code, listing = helpers.run("ls -A " .. q(marker_dir))
    assert.are.equal(0, code)
    assert.are.equal("", listing)
  end)

  it("keeps every physical line of a long line short (a tty keeps 4095 bytes of a line), the argv exact", function()
    local longest = 0
    for _, kind in ipairs({ "bwrap", "bwrap-deny", "docker", "none" }) do
      local spec = gen_spec(kind)
      spec.command = word(3000) .. ("x"):rep(5000) .. ("é"):rep(700) .. ("'"):rep(300)
        .. CONTROL[rand(#CONTROL)]:rep(600)
      -- distinct paths: docker refuses a mount point given twice
      for i = 1, 60 do spec.ro_binds[i] = abs_path(kind == "docker") .. "/" .. i end
      local line = assert(isolation.wrap(spec))
      for physical in (line .. "\n"):gmatch("([^\n]*)\n") do
        longest = math.max(longest, #physical)
        -- 800 and at most one escape of 32 control bytes (144): below BSD's 1023
        assert.is_true(#physical <= 1000, #physical .. " bytes: " .. physical:sub(1, 80))
      end
      -- a break never splits a UTF-8 sequence (é is C3 A9)
      assert.truthy(line:find("é'\\\n'é"))
      assert.is_nil(line:find("\xc3'\\\n'\xa9"))
      for _, shell in ipairs({ "/bin/sh", "/bin/bash" }) do
        local got = run_line(line, "/home/agent", nil, shell)
        assert.are.same(expected(assert(isolation.argv(spec)), "/home/agent"), got)
      end
    end
    assert.is_true(longest > 800, "no line was long enough to break")
  end)

  it("a crafted path or command cannot break out to create a file", function()
    local attacks = {
      "'; touch pwned-1; '", "\"; touch pwned-2; \"", "$(touch pwned-3)", "`touch pwned-4`",
      "'$(touch pwned-5)'", "\\'; touch pwned-6 #", "'\"'\"'; touch pwned-7; '", "\n touch pwned-8 \n",
    }
    for _, a in ipairs(attacks) do
      for _, mode in ipairs({ "bwrap", "docker" }) do
        local p = "/srv/" .. a:gsub("/", "_"):gsub(":", "_")
        local spec = { config = { mode = mode }, workdir = p, command = a, binds = { "$HOME/" .. a:gsub("[/:]", "_") },
          ro_binds = { p .. "x" }, agent = "claude" }
        local line = assert(isolation.wrap(spec))
        local got = run_line(line, "/home/agent")
        assert.are.same(expected(isolation.argv(spec), "/home/agent"), got)
      end
    end
    local code, listing = helpers.run("ls -A " .. q(marker_dir))
    assert.are.equal(0, code)
    assert.are.equal("", listing)
  end)

  it("seccomp_file: the line opens the file on N for bwrap, the argv unchanged; a crafted path runs nothing", function()
    -- a stand-in bwrap that also copies what it finds on descriptor $SECCOMP_FD
    local fdstubs = dir .. "/fdbin"
    assert(os.execute("mkdir -p " .. q(fdstubs)))
    local argv_out, fd_out = dir .. "/argv.out", dir .. "/fd.out"
    -- the paths are in the stand-in: the environment does not reach it
    local function fdstub(n)
      helpers.write(fdstubs .. "/bwrap", "#!/bin/sh\nprintf '%s\\0' \"$0\" \"$@\" > " .. q(argv_out) .. "\n"
        .. "cat <&" .. n .. " > " .. q(fd_out) .. "\n")
      assert(os.execute("chmod +x " .. q(fdstubs .. "/bwrap")))
    end
    local files = dir .. "/files"
    local paths = {
      files .. "/x'$(touch " .. marker_dir .. "/PWNED)'",
      files .. "/a b\nc`touch pwned-2`; touch pwned-3 #",
      files .. "/q'\\''; touch pwned-4; '\"$HOME\"$(id)",
      files .. "/$HOME/{x,y}*?[a]~ ${IFS}&&>pwned-5",
    }
    for i, path in ipairs(paths) do
      assert.are.equal(0, (helpers.run("mkdir -p " .. q(path:match("^(.*)/[^/]*$")))))
      local program = "program " .. i .. "\n"
      helpers.write(path, program)
      for _, fd in ipairs({ false, 5, 9 }) do
        local spec = { config = { mode = "bwrap", network = i % 2 == 0 and "deny" or "allow" }, workdir = "/srv/w",
          command = "true", proxy_socket = "/srv/p.sock", agent = "claude", seccomp_file = path,
          seccomp_fd = fd or nil }
        local line = assert(isolation.wrap(spec))
        fdstub(fd or 3)
        for _, shell in ipairs({ "/bin/sh", "bash" }) do
          os.remove(argv_out)
          os.remove(fd_out)
          local code, _, err = helpers.run("cd " .. q(marker_dir) .. " && HOME=/home/agent PATH=" .. q(fdstubs)
            .. ":$PATH " .. shell .. " -c " .. q(line))
          assert.are.equal(0, code, shell .. ": " .. err .. "\n" .. line)
          local got = split_nul(assert(helpers.read(argv_out), "the stand-in did not run"))
          got[1] = got[1]:match("[^/]+$")
          assert.are.same(expected(assert(isolation.bwrap_argv(spec)), "/home/agent"), got)
          local at = assert(tbl_index(got, "--seccomp"), "no --seccomp")
          assert.are.equal(tostring(fd or 3), got[at + 1])
          assert.are.equal(program, helpers.read(fd_out), shell .. ": " .. line)
        end
      end
    end
    local code, listing = helpers.run("ls -A " .. q(marker_dir))
    assert.are.equal(0, code)
    assert.are.equal("", listing)
    code, listing = helpers.run("find " .. q(dir) .. " -name 'pwned*' -o -name PWNED")
    assert.are.equal(0, code)
    assert.are.equal("", listing)
  end)

  it("leaves exactly the builder's tokens expandable", function()
    local line = assert(isolation.wrap({ config = { mode = "docker" }, agent = "codex", workdir = "/srv/$HOME",
      command = "echo $HOME $(id -u):$(id -g)", binds = { "$HOME/a$HOME" } }))
    assert.truthy(line:find([['-v' "$HOME"'/.codex:'"$HOME"'/.codex']], 1, true))
    assert.truthy(line:find([['-e' 'HOME='"$HOME"]], 1, true))
    assert.truthy(line:find([['--user' "$(id -u):$(id -g)"]], 1, true))
    assert.truthy(line:find([['-v' "$HOME"'/a$HOME:'"$HOME"'/a$HOME']], 1, true))
    assert.truthy(line:find([['-v' '/srv/$HOME:/srv/$HOME']], 1, true))
    assert.truthy(line:find([['bash' '-c' '--' 'echo $HOME $(id -u):$(id -g)']], 1, true))
    -- every double quote in the line belongs to a token
    local stripped = helpers.line_body(line):gsub('"%$HOME"', ""):gsub('"%$%(id %-u%):%$%(id %-g%)"', "")
    local outside, inside = {}, false
    for c in stripped:gmatch(".") do
      if c == "'" then inside = not inside elseif not inside then outside[#outside + 1] = c end
    end
    assert.are.equal("", (table.concat(outside):gsub("[ \n]", ""):gsub("\\", "")))
  end)

  it("a command that starts with $HOME stays literal", function()
    local line = assert(isolation.wrap({ command = "$HOME/bin/agent" }))
    assert.are.equal([['bash' '-c' '--' '$HOME/bin/agent']], line)
  end)

  it("refuses a missing or empty command, and NUL bytes anywhere", function()
    for _, spec in ipairs({
      { workdir = "/w" }, { workdir = "/w", command = "" }, { workdir = "/w", command = "a\0b" },
      { workdir = "/w\0", command = "c" }, { workdir = "/w", command = "c", binds = { "/b\0" } },
      { workdir = "/w", command = "c", agent = "\0" }, { command = "" },
    }) do
      local line, err = isolation.wrap(spec)
      assert.is_nil(line)
      assert.matches("^isolation: %a+", err)
    end
  end)
  -- The session docs suggest typing a manager's line into a pane with tmux
  -- send-keys: the pane's tty and line editor then see every byte (^U kills
  -- the line so far, ^C drops it, a tab completes, a tty in canonical mode
  -- keeps 4095 bytes of a line). Real panes on a private tmux server, one
  -- running bash -i and one dash -i, get generated lines and attacks; each
  -- line must run the stand-in with exactly the argv, and no canary appear.
  describe("typed into a tmux pane", function()
    local sock, typed_stubs, argv_outs

    local function tmux(args)
      return helpers.run("tmux -S " .. q(sock) .. " " .. args)
    end

    -- Stand-ins in their own directory that record their argv in `out`:
    -- written whole, then renamed, so the spec never reads half an argv.
    -- The path is written into them (the line starts bwrap under env -i).
    local function make_stubs(stub_dir, out)
      assert(os.execute("mkdir -p " .. q(stub_dir)))
      for _, name in ipairs({ "bwrap", "docker", "bash" }) do
        helpers.write(stub_dir .. "/" .. name, "#!/bin/sh\nprintf '%s\\0' \"$0\" \"$@\" > " .. q(out .. ".part")
          .. " && mv " .. q(out .. ".part") .. " " .. q(out) .. "\n")
        assert(os.execute("chmod +x " .. q(stub_dir .. "/" .. name)))
      end
      return stub_dir
    end

    lazy_setup(function()
      sock = dir .. "/tmux.sock"
      argv_outs = { bash = dir .. "/typed-bash.argv", dash = dir .. "/typed-dash.argv" }
      typed_stubs = {}
      local shells = { bash = "/bin/bash --norc --noprofile -i", dash = "/bin/dash -i" }
      for _, name in ipairs({ "bash", "dash" }) do
        typed_stubs[name] = make_stubs(dir .. "/typed-bin-" .. name, argv_outs[name])
        local env = "env -i PATH=" .. q(typed_stubs[name]) .. ":/usr/bin:/bin HOME=/home/agent"
        local code, _, err = tmux((name == "bash" and "-f /dev/null new-session" or "new-session") .. " -d -s " .. name
          .. " -x 250 -y 50 -c " .. q(marker_dir) .. " " .. q(env .. " " .. shells[name]))
        assert.are.equal(0, code, err)
      end
    end)

    lazy_teardown(function()
      if sock then tmux("kill-server") end
    end)

    -- Types the line and Enter into the pane; returns the argv it ran.
    local function type_line(shell, line)
      local out = argv_outs[shell]
      os.remove(out)
      local code, _, err = tmux("send-keys -t " .. shell .. ": -l " .. q(line))
      assert.are.equal(0, code, err)
      assert.are.equal(0, (tmux("send-keys -t " .. shell .. ": Enter")))
      local deadline = uv.hrtime() + 10e9
      while not helpers.read(out) and uv.hrtime() < deadline do uv.sleep(20) end
      local got = helpers.read(out)
      if not got then
        local _, screen = tmux("capture-pane -p -t " .. shell .. ":")
        -- leave the pane at a fresh prompt for whoever reads the failure
        tmux("send-keys -t " .. shell .. ": C-c")
        error(shell .. ": the line did not run the stand-in within 10 s; the pane shows:\n" .. screen
          .. "\nthe line: " .. line)
      end
      return drop_cidfile(split_nul(got))
    end

    local function assert_no_canary()
      local code, listing = helpers.run("ls -A " .. q(marker_dir))
      assert.are.equal(0, code)
      assert.are.equal("", listing)
    end

    -- the reported attacks: what follows a line-kill, an interrupt, ... must
    -- stay inside the quotes
    local ATTACKS = {
      "x\21touch canary-kill #", "x\3touch canary-intr #", "\21\21touch canary-kill2 #'",
      "x\23\23\23touch canary-werase #",
      "x\127\127\127\127touch canary-del #", "x\8\8\8\8touch canary-bs #", "x\22\21touch canary-lnext #",
      "x\r touch canary-cr #", "x\4touch canary-eof #", "x\26touch canary-susp #", "x\28touch canary-quit #",
      "x\15touch canary-discard #", "x\18touch canary-reprint #", "\27[201~\21touch canary-paste #",
      "x\9\9touch canary-tab #", "x\19touch canary-stop #\17", "x\n touch canary-nl \n",
      "x\n^x^touch canary-caret^\n!!\n!-1 !#", "x\n^\n^^\n", "x\n£\n日本\né\n",
    }

    for _, shell in ipairs({ "bash", "dash" }) do
      it(shell .. " -i: attack lines (^U, ^C, ^W, DEL, ^H, ^V, CR, ^D, ^Z, ^\\, ^O, ^R, ESC, tab, ^S/^Q) run the argv",
        function()
          for i, a in ipairs(ATTACKS) do
            local spec = { config = { mode = ({ "", "bwrap", "docker" })[i % 3 + 1] },
              workdir = "/srv/" .. a:gsub("/", "_"),
              command = a, binds = { "$HOME/" .. a:gsub("[/:]", "_") }, ro_binds = { "/srv/r" .. a:gsub("[/:]", "_") } }
            if spec.config.mode == "docker" then spec.workdir = spec.workdir:gsub(":", "_") end
            local argv = assert(isolation.argv(spec))
            assert.are.same(expected(argv, "/home/agent"), type_line(shell, assert(isolation.wrap(spec))), a)
          end
          assert_no_canary()
        end)

      it(shell .. " -i: 40 generated lines with every control byte, in every mode", function()
        pieces = TYPED_PIECES
        local ok, err = pcall(function()
          local kinds = { "bwrap", "bwrap-deny", "docker", "none" }
          for i = 1, 40 do
            local spec = gen_spec(kinds[i % 4 + 1])
            spec.command = spec.command .. CONTROL[i % #CONTROL + 1] .. word(rand(8))
            local argv = assert(isolation.argv(spec))
            local want, got = expected(argv, "/home/agent"), type_line(shell, assert(isolation.wrap(spec)))
            assert.is_nil(first_difference(want, got))
          end
        end)
        pieces = PIECES
        assert(ok, err)
        assert_no_canary()
      end)

      it(shell .. " -i: a line longer than a tty keeps (4095 bytes) runs exactly the argv, no quote cut", function()
        -- the cut at 4095 would fall inside or after the '\'' of the quote
        for k = 4075, 4085 do
          local spec = { command = ("A"):rep(k) .. "'\ntouch canary-long-" .. k .. "\n" }
          local argv = assert(isolation.argv(spec))
          assert.are.same(expected(argv, "/home/agent"), type_line(shell, assert(isolation.wrap(spec))))
        end
        assert_no_canary()
      end)
    end

    it("bash -i: long lines typed ahead while the pane still runs a command (the tty in canonical mode)", function()
      -- one window per line, each with its own argv file; the lines arrive
      -- during the sleep, before bash's line editor reads the terminal
      local outs = {}
      for k = 4076, 4084, 2 do
        local out = dir .. "/ahead-" .. k .. ".argv"
        outs[k] = out
        local stubs_k = make_stubs(dir .. "/ahead-bin-" .. k, out)
        local env = "env -i PATH=" .. q(stubs_k) .. ":/usr/bin:/bin HOME=/home/agent"
        assert.are.equal(0, (tmux("new-window -d -t bash: -n ahead" .. k .. " -c " .. q(marker_dir) .. " "
          .. q(env .. " /bin/sh -c 'sleep 1; exec /bin/bash --norc --noprofile -i'"))))
        local spec = { command = ("A"):rep(k) .. "'\ntouch canary-ahead-" .. k .. "\n" }
        assert.are.equal(0, (tmux("send-keys -t bash:ahead" .. k .. " -l " .. q(assert(isolation.wrap(spec))))))
        assert.are.equal(0, (tmux("send-keys -t bash:ahead" .. k .. " Enter")))
      end
      local deadline = uv.hrtime() + 15e9
      for k, out in pairs(outs) do
        while not helpers.read(out) and uv.hrtime() < deadline do uv.sleep(20) end
        local got = split_nul(assert(helpers.read(out), "typed ahead, line " .. k .. " did not run the stand-in"))
        got[1] = got[1]:match("[^/]+$")
        local spec = { command = ("A"):rep(k) .. "'\ntouch canary-ahead-" .. k .. "\n" }
        assert.are.same(expected(assert(isolation.argv(spec)), "/home/agent"), got)
      end
      assert_no_canary()
    end)
  end)
end)
