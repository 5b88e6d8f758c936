-- wrap(): the one shell line must run exactly the argv the builders return,
-- with only the builder's $HOME and $(id -u):$(id -g) tokens expanded.
-- Property test: generated workdirs, commands and binds full of shell syntax
-- run through stand-in bwrap/docker/bash programs that print their argv.
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
}

local function word(len)
  local t = {}
  for i = 1, len do t[i] = PIECES[rand(#PIECES)] end
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
  if kind == "bwrap-deny" then
    spec.config = { mode = "bwrap", network = "deny" }
    spec.proxy_socket = abs_path(false)
  elseif kind == "bwrap" then
    spec.config = { mode = "bwrap" }
  elseif kind == "docker" then
    spec.config = { mode = "docker", network = rand(2) == 1 and "deny" or "allow" }
    spec.tty = rand(2) == 1
  else
    spec.config = { mode = "" }
  end
  return spec
end

local UID, GID

local MOUNT_FLAG = { ["--bind"] = true, ["--ro-bind"] = true, ["--bind-try"] = true, ["--tmpfs"] = true }

-- The argv the shell should produce: builder tokens expanded, nothing else.
local function expected(argv, home)
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

local function tbl_index(t, v)
  for i, x in ipairs(t) do if x == v then return i end end
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
    for _, name in ipairs({ "bwrap", "docker", "bash" }) do
      helpers.write(stubs .. "/" .. name, "#!/bin/sh\nprintf '%s\\0' \"$0\" \"$@\" > \"$ARGV_OUT\"\n")
      assert(os.execute("chmod +x " .. q(stubs .. "/" .. name)))
    end
    local _, u = helpers.run("id -u")
    local _, g = helpers.run("id -g")
    UID, GID = u:gsub("%s", ""), g:gsub("%s", "")
  end)

  teardown(function()
    helpers.rmtree(dir)
  end)

  -- Runs the line with /bin/sh, HOME set, the stand-ins first on PATH; the
  -- working directory is the marker directory, where a breakout would land.
  local function run_line(line, home)
    local out = dir .. "/argv.out"
    os.remove(out)
    local code, _, err = helpers.run("cd " .. q(marker_dir) .. " && HOME=" .. q(home) .. " PATH=" .. q(stubs)
      .. ":$PATH ARGV_OUT=" .. q(out) .. " /bin/sh -c " .. q(line))
    assert.are.equal(0, code, err)
    local got = split_nul(assert(helpers.read(out), "the stand-in did not run"))
    got[1] = got[1]:match("[^/]+$")
    return got
  end

  it("runs exactly the argv for 400 generated specs (bwrap allow/deny, docker, none), two HOMEs", function()
    local homes = { "/home/agent", "/tmp/ho me'q\"$x`y" }
    local kinds = { "bwrap", "bwrap-deny", "docker", "none" }
    local n = 0
    for i = 1, 400 do
      local spec = gen_spec(kinds[i % 4 + 1])
      local argv, err = isolation.argv(spec)
      assert(argv, err)
      local line = assert(isolation.wrap(spec))
      assert.is_nil(line:find("%z"))
      local home = homes[i % 2 + 1]
      assert.are.same(expected(argv, home), run_line(line, home), line)
      n = n + 1
    end
    assert.are.equal(400, n)
    -- nothing anywhere escaped its quotes
    local code, listing = helpers.run("ls -A " .. q(marker_dir))
    assert.are.equal(0, code)
    assert.are.equal("", listing)
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
    helpers.write(fdstubs .. "/bwrap", "#!/bin/sh\nprintf '%s\\0' \"$0\" \"$@\" > \"$ARGV_OUT\"\n"
      .. "eval \"cat <&$SECCOMP_FD\" > \"$FD_OUT\"\n")
    assert(os.execute("chmod +x " .. q(fdstubs .. "/bwrap")))
    local files = dir .. "/files"
    local paths = {
      files .. "/x'$(touch " .. marker_dir .. "/PWNED)'",
      files .. "/a b\nc`touch pwned-2`; touch pwned-3 #",
      files .. "/q'\\''; touch pwned-4; '\"$HOME\"$(id)",
      files .. "/$HOME/{x,y}*?[a]~ ${IFS}&&>pwned-5",
    }
    local argv_out, fd_out = dir .. "/argv.out", dir .. "/fd.out"
    for i, path in ipairs(paths) do
      assert.are.equal(0, (helpers.run("mkdir -p " .. q(path:match("^(.*)/[^/]*$")))))
      local program = "program " .. i .. "\n"
      helpers.write(path, program)
      for _, fd in ipairs({ false, 5, 9 }) do
        local spec = { config = { mode = "bwrap", network = i % 2 == 0 and "deny" or "allow" }, workdir = "/srv/w",
          command = "true", proxy_socket = "/srv/p.sock", agent = "claude", seccomp_file = path,
          seccomp_fd = fd or nil }
        local line = assert(isolation.wrap(spec))
        for _, shell in ipairs({ "/bin/sh", "bash" }) do
          os.remove(argv_out)
          os.remove(fd_out)
          local code, _, err = helpers.run("cd " .. q(marker_dir) .. " && HOME=/home/agent PATH=" .. q(fdstubs)
            .. ":$PATH ARGV_OUT=" .. q(argv_out) .. " FD_OUT=" .. q(fd_out) .. " SECCOMP_FD=" .. (fd or 3)
            .. " " .. shell .. " -c " .. q(line))
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
    local stripped = line:gsub('"%$HOME"', ""):gsub('"%$%(id %-u%):%$%(id %-g%)"', "")
    local outside, inside = {}, false
    for c in stripped:gmatch(".") do
      if c == "'" then inside = not inside elseif not inside then outside[#outside + 1] = c end
    end
    assert.are.equal("", (table.concat(outside):gsub(" ", ""):gsub("\\", "")))
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
end)
