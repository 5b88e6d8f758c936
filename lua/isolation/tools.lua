-- isolation.tools: the programs a user installed under $HOME, inside the
-- sandbox (docs/how-to/tools-under-home.md).
--
-- The sandbox's $HOME is an empty tmpfs, so a node of nvm, a python of
-- pyenv or claude's native install is gone inside. plan() finds the
-- installation the command's program belongs to (through the launching
-- PATH, symbolic links followed on the host) and returns the smallest
-- directories that make it run, each bound read-only at the same path
-- (launch spec `tools`), their bin directories to put first on PATH, and
-- the files and directories in them that hold credentials, covered inside
-- (launch spec `mask_files`, `mask_dirs`: /dev/null, an empty tmpfs).
--
-- Which directory is bound is an allowlist of layouts, one per manager
-- (MANAGERS below: a version of nvm, fnm, volta, pyenv, rbenv, asdf or
-- mise; a rustup toolchain with ~/.cargo/bin; ~/.bun, ~/.deno; claude's
-- native versions; pipx and uv tool venvs), never the manager's whole
-- tree; a program of another directory under $HOME is bound alone (and
-- what it links to). Nothing here reads a secret: the walk looks at names.
local uv = require("luv")
local json = require("isolation.json")
local show = require("isolation.text").show
local hostpaths = require("isolation.hostpaths")
local within = hostpaths.within

local M = {}

local function dirname(p)
  local d = p:match("^(.*)/[^/]*$")
  return (d == nil or d == "") and "/" or d
end

local function basename(p) return p:match("([^/]*)$") end

local function is_dir(p)
  local st = p and uv.fs_stat(p)
  return st ~= nil and st.type == "directory"
end

-- never waits on a FIFO (a version file is read from the workdir up)
local function read_file(path, max) return hostpaths.read_regular(path, max or 65536) end

-- Names of credential files and directories, looked for in every bound
-- tree (a denylist of names inside an allowlist of trees): npm's and
-- yarn's and bun's configs (auth tokens; npm's global config is
-- PREFIX/etc/npmrc, inside a node version), pip's and PyPI's, netrc, git's
-- stored credentials, cargo's and gem's credentials, gh's hosts.yml,
-- private ssh keys, a .env. Directories: whole stores of keys.
local CRED_FILES = {
  [".npmrc"] = true, npmrc = true, [".yarnrc"] = true, [".yarnrc.yml"] = true, ["bunfig.toml"] = true,
  [".bunfig.toml"] = true, [".pypirc"] = true, ["pip.conf"] = true, [".netrc"] = true, ["_netrc"] = true,
  [".git-credentials"] = true, credentials = true, ["credentials.toml"] = true, ["credentials.json"] = true,
  ["hosts.yml"] = true, [".pgpass"] = true, [".env"] = true, id_rsa = true, id_dsa = true, id_ecdsa = true,
  id_ed25519 = true, id_ecdsa_sk = true, id_ed25519_sk = true, id_xmss = true,
}
local CRED_DIRS = {
  [".ssh"] = true, [".gnupg"] = true, [".aws"] = true, [".docker"] = true, [".kube"] = true,
  [".password-store"] = true, [".azure"] = true, keyrings = true, gh = true, gcloud = true,
}
M.CRED_FILES, M.CRED_DIRS = CRED_FILES, CRED_DIRS

-- A tree with more entries than this is refused rather than half-checked
-- (the walk takes about 5 us an entry: 148000 in 0.8 s).
M.WALK_MAX = 200000
-- Credential files (and directories) covered at most: the launch spec
-- takes 128 of each, and a root launch's own masks come on top.
M.MASK_MAX = 96

-- The layouts. Each manager's base is its variable (NVM_DIR, ...) or its
-- default under $HOME; `roots` are Lua patterns relative to the base, the
-- first capture the installation to bind. bin: the installation's bin
-- directory ("bin"), or "" when the installation is that directory.
local MANAGERS = {
  { name = "nvm", env = "NVM_DIR", default = ".nvm", roots = { "versions/[^/]+/[^/]+" }, bin = "bin" },
  { name = "fnm", env = "FNM_DIR", xdg = "fnm", default = ".fnm", roots = { "node%-versions/[^/]+/installation" },
    bin = "bin" },
  { name = "volta", env = "VOLTA_HOME", default = ".volta",
    roots = { "tools/image/packages/@[^/]+/[^/]+", "tools/image/packages/[^/]+", "tools/image/[^/]+/[^/]+" },
    bin = "bin" },
  { name = "pyenv", env = "PYENV_ROOT", default = ".pyenv", roots = { "versions/[^/]+" }, bin = "bin" },
  { name = "rbenv", env = "RBENV_ROOT", default = ".rbenv", roots = { "versions/[^/]+" }, bin = "bin" },
  { name = "asdf", env = "ASDF_DATA_DIR", default = ".asdf", roots = { "installs/[^/]+/[^/]+" }, bin = "bin" },
  { name = "mise", env = "MISE_DATA_DIR", xdg = "mise", roots = { "installs/[^/]+/[^/]+" }, bin = "bin" },
  { name = "rustup", env = "RUSTUP_HOME", default = ".rustup", roots = { "toolchains/[^/]+" }, bin = "bin" },
  { name = "pipx", env = "PIPX_HOME", xdg = "pipx", roots = { "venvs/[^/]+" }, bin = "bin", venv = true },
  { name = "uv tool", env = "UV_TOOL_DIR", xdg = "uv/tools", roots = { "[^/]+" }, bin = "bin", venv = true },
  { name = "bun", env = "BUN_INSTALL", default = ".bun", roots = { "install/global", "bin" }, bin = "" },
  { name = "deno", env = "DENO_INSTALL", default = ".deno", roots = { "bin" }, bin = "" },
  { name = "cargo", env = "CARGO_HOME", default = ".cargo", roots = { "bin" }, bin = "", rustup = true },
  { name = "claude", xdg = "claude", roots = { "versions/[^/]+" }, file = true },
}
M.MANAGERS = MANAGERS

function M.manager(name)
  for _, m in ipairs(MANAGERS) do if m.name == name then return m end end
end

-- rustup's proxies in ~/.cargo/bin: they run the active toolchain's program.
local RUSTUP_PROXIES = {
  cargo = true, rustc = true, rustdoc = true, rustfmt = true, ["cargo-fmt"] = true, ["cargo-clippy"] = true,
  ["clippy-driver"] = true, ["rust-analyzer"] = true, ["rust-gdb"] = true, ["rust-gdbgui"] = true,
  ["rust-lldb"] = true, rls = true, ["cargo-miri"] = true, rustup = true,
}

-- The bases of the managers for this home and environment, resolved.
local function bases(ctx, m)
  local out = {}
  local function add(p)
    local r = p and p:sub(1, 1) == "/" and uv.fs_realpath(p)
    if r then out[#out + 1] = r end
  end
  if m.env then add(ctx.getenv(m.env)) end
  if m.xdg then
    local xdg = ctx.getenv("XDG_DATA_HOME")
    add(((xdg and xdg:sub(1, 1) == "/") and xdg or (ctx.home .. "/.local/share")) .. "/" .. m.xdg)
  end
  if m.default then add(ctx.home .. "/" .. m.default) end
  return out
end

-- The manager and installation a real path lies in, or nil.
local function match_root(ctx, real)
  for _, m in ipairs(MANAGERS) do
    for _, base in ipairs(bases(ctx, m)) do
      if real:sub(1, #base + 1) == base .. "/" then
        local rest = real:sub(#base + 2)
        for _, pat in ipairs(m.roots) do
          local cap = rest:match("^(" .. pat .. ")/") or (m.file and rest:match("^(" .. pat .. ")$"))
          if cap then return m, base .. "/" .. cap, base end
        end
      end
    end
  end
  return nil
end

-- Searches PATH (a string) for name as execvp does: the first executable
-- regular file. Returns the path as found (not resolved).
function M.which(name, path, cwd)
  if name:find("/", 1, true) then
    local p = name:sub(1, 1) == "/" and name or ((cwd or uv.cwd()) .. "/" .. name)
    return uv.fs_stat(p) and p or nil
  end
  for dir in ((path or "") .. ":"):gmatch("([^:]*):") do
    if dir == "" then dir = cwd or uv.cwd() end
    local p = dir .. "/" .. name
    local st = uv.fs_stat(p)
    if st and st.type == "file" and uv.fs_access(p, "x") then return p end
  end
  return nil
end

-- A version file's first word (pyenv's, rbenv's): comments and blank
-- lines skipped; several versions on one line or several lines.
local function version_words(text)
  local out = {}
  for line in (text or ""):gmatch("[^\n]+") do
    line = line:gsub("#.*$", "")
    for w in line:gmatch("%S+") do out[#out + 1] = w end
  end
  return out
end

-- Looks for name in dir and each parent, as pyenv and rbenv do.
local function find_up(dir, name)
  while dir do
    local p = (dir == "/" and "" or dir) .. "/" .. name
    local st = uv.fs_stat(p)
    if st and st.type == "file" then return p end
    if dir == "/" then return nil end
    dir = dirname(dir)
  end
  return nil
end

-- An installed version dir matching v: exactly, or the highest with v as
-- a prefix ("3.11" -> 3.11.9), as pyenv does.
local function pick_version(versions_dir, v)
  if is_dir(versions_dir .. "/" .. v) then return versions_dir .. "/" .. v end
  local best
  local h = uv.fs_scandir(versions_dir)
  while h do
    local n = uv.fs_scandir_next(h)
    if not n then break end
    if n:sub(1, #v + 1) == v .. "." then
      local function key(s) return (s:gsub("%d+", function(d) return string.format("%09d", tonumber(d)) end)) end
      if not best or key(n) > key(best) then best = n end
    end
  end
  return best and (versions_dir .. "/" .. best) or nil
end

-- pyenv's and rbenv's choice: VAR, a version file in the workdir or a
-- parent, ROOT/version; "system" means the system's (nothing to bind).
local function shim_versions(ctx, root, var, file)
  local words
  local env = ctx.getenv(var)
  if env and env ~= "" then
    words = {}
    for w in env:gmatch("[^:]+") do words[#words + 1] = w end
  else
    local f = find_up(ctx.cwd, file)
    words = version_words(f and read_file(f) or read_file(root .. "/version"))
  end
  local out = {}
  for _, w in ipairs(words) do
    if w ~= "system" then
      local d = pick_version(root .. "/versions", w)
      if d then out[#out + 1] = d else ctx.note("version " .. w .. " is not installed under " .. root) end
    end
  end
  return out
end

-- asdf's shim names its plugins and versions ("# asdf-plugin: nodejs 20.1.0");
-- the version is ASDF_<PLUGIN>_VERSION, .tool-versions up from the workdir,
-- ~/.tool-versions, else the only one the shim names.
local function asdf_versions(ctx, base, shim)
  local cands = {}
  for plugin, v in (read_file(shim) or ""):gmatch("# asdf%-plugin: (%S+) (%S+)") do
    cands[#cands + 1] = { plugin = plugin, version = v }
  end
  local function installed(plugin, v)
    for _, c in ipairs(cands) do
      if c.plugin == plugin and c.version == v then return base .. "/installs/" .. plugin .. "/" .. v end
    end
  end
  for _, c in ipairs(cands) do
    local env = ctx.getenv("ASDF_" .. c.plugin:upper():gsub("%-", "_") .. "_VERSION")
    if env and installed(c.plugin, env) then return { installed(c.plugin, env) } end
  end
  for _, f in ipairs({ find_up(ctx.cwd, ".tool-versions") or false, ctx.home .. "/.tool-versions" }) do
    for line in (f and read_file(f) or ""):gmatch("[^\n]+") do
      local plugin, rest = line:gsub("#.*$", ""):match("^%s*(%S+)%s+(.*)$")
      for v in (rest or ""):gmatch("%S+") do
        local d = installed(plugin, v)
        if d then return { d } end
      end
    end
  end
  if #cands == 1 then return { base .. "/installs/" .. cands[1].plugin .. "/" .. cands[1].version } end
  return nil
end

-- mise's shim is mise itself: the tool is whichever installs/TOOL/V/bin
-- has the command; the version MISE_<TOOL>_VERSION, .tool-versions, or the
-- only one installed.
local function mise_versions(ctx, base, cmd)
  local cands = {}
  local th = uv.fs_scandir(base .. "/installs")
  while th do
    local tool = uv.fs_scandir_next(th)
    if not tool then break end
    local vh = uv.fs_scandir(base .. "/installs/" .. tool)
    while vh do
      local v, t = uv.fs_scandir_next(vh)
      if not v then break end
      if t ~= "link" and uv.fs_stat(base .. "/installs/" .. tool .. "/" .. v .. "/bin/" .. cmd) then
        cands[#cands + 1] = { tool = tool, version = v, dir = base .. "/installs/" .. tool .. "/" .. v }
      end
    end
  end
  for _, c in ipairs(cands) do
    local env = ctx.getenv("MISE_" .. c.tool:upper():gsub("%-", "_") .. "_VERSION")
    if env == c.version then return { c.dir } end
  end
  local f = find_up(ctx.cwd, ".tool-versions")
  for line in (f and read_file(f) or ""):gmatch("[^\n]+") do
    local tool, v = line:match("^%s*(%S+)%s+(%S+)")
    for _, c in ipairs(cands) do
      if c.tool == tool and (c.version == v or c.version:sub(1, #v + 1) == v .. ".") then return { c.dir } end
    end
  end
  if #cands == 1 then return { cands[1].dir } end
  return nil
end

-- volta's shims run the platform's node (tools/user/platform.json) or a
-- package's (tools/user/bins/<cmd>.json); a project's package.json may pin
-- node ("volta": {"node": "20.1.0"}).
local function volta_versions(ctx, base, cmd)
  local function decode(path)
    local text = read_file(path)
    local ok, v = pcall(json.decode, text or "")
    return ok and type(v) == "table" and v or nil
  end
  local out = {}
  local node
  local pkg = find_up(ctx.cwd, "package.json")
  local pj = pkg and decode(pkg)
  if pj and type(pj.volta) == "table" and type(pj.volta.node) == "string" then node = pj.volta.node end
  local platform = decode(base .. "/tools/user/platform.json")
  if not node and platform and type(platform.node) == "table" then node = platform.node.runtime end
  local bin = decode(base .. "/tools/user/bins/" .. cmd .. ".json")
  if bin and type(bin.package) == "string" then
    out[#out + 1] = base .. "/tools/image/packages/" .. bin.package
    if type(bin.platform) == "table" and type(bin.platform.node) == "string" then node = bin.platform.node end
  end
  if type(node) == "string" then out[#out + 1] = base .. "/tools/image/node/" .. node end
  return out
end

-- rustup's active toolchain: RUSTUP_TOOLCHAIN, rust-toolchain(.toml) up
-- from the workdir, settings.toml's default_toolchain; the directory whose
-- name is it or starts with it and a dash (stable ->
-- stable-x86_64-unknown-linux-gnu).
local function rustup_toolchain(ctx, rustup)
  local name = ctx.getenv("RUSTUP_TOOLCHAIN")
  if not name or name == "" then
    local f = find_up(ctx.cwd, "rust-toolchain.toml")
    if f then
      name = (read_file(f) or ""):match('channel%s*=%s*"([^"]+)"')
    else
      f = find_up(ctx.cwd, "rust-toolchain")
      name = f and (read_file(f) or ""):match("^%s*(%S+)")
    end
  end
  if not name then name = (read_file(rustup .. "/settings.toml") or ""):match('default_toolchain%s*=%s*"([^"]+)"') end
  if not name then return nil end
  if is_dir(rustup .. "/toolchains/" .. name) then return rustup .. "/toolchains/" .. name end
  local h = uv.fs_scandir(rustup .. "/toolchains")
  while h do
    local n = uv.fs_scandir_next(h)
    if not n then break end
    if n:sub(1, #name + 1) == name .. "-" then return rustup .. "/toolchains/" .. n end
  end
  return nil
end

-- A credential store on the path itself (a tool that is, or is inside,
-- ~/.ssh): refused, never bound.
local function credential_component(ctx, real)
  local rel = within(real, ctx.home) and real:sub(#ctx.home + 2) or real
  local prev
  for c in rel:gmatch("[^/]+") do
    if CRED_DIRS[c] and (c ~= "gh" and c ~= "gcloud" or prev == ".config") then return c end
    if CRED_FILES[c] then return c end
    prev = c
  end
  return nil
end

-- Adds what holds credentials in the tree at root to the plan's masks.
local function walk(ctx, root)
  local count = 0
  local function visit(dir, parent_name)
    local h = uv.fs_scandir(dir)
    while h do
      local name, t = uv.fs_scandir_next(h)
      if not name then break end
      count = count + 1
      if count > M.WALK_MAX then
        return nil, string.format("%s has more than %d entries: it is not bound unchecked; bind it yourself with"
          .. " --ro-bind if it holds no credentials, or use --no-tools", show(root), M.WALK_MAX)
      end
      local p = dir .. "/" .. name
      if t == nil or t == "unknown" then
        local st = uv.fs_lstat(p)
        t = st and st.type
      end
      if t == "directory" then
        if CRED_DIRS[name] and (name ~= "gh" and name ~= "gcloud" or parent_name == ".config") then
          ctx.add_mask("dir", p)
        else
          local ok, err = visit(p, name)
          if not ok then return nil, err end
        end
      elseif t ~= "link" and CRED_FILES[name] then
        ctx.add_mask("file", p)
      end
    end
    return true
  end
  return visit(root, basename(root))
end

local function new_ctx(o)
  local ctx = {
    home = o.home, cwd = o.cwd, getenv = o.getenv or os.getenv,
    tools = {}, bins = {}, mask_files = {}, mask_dirs = {}, notes = {}, found = {}, env = {},
    seen = {}, masked = {}, visited = {},
  }
  function ctx.note(s) ctx.notes[#ctx.notes + 1] = s end
  function ctx.add_mask(kind, p)
    if ctx.masked[p] then return end
    ctx.masked[p] = true
    local list = kind == "dir" and ctx.mask_dirs or ctx.mask_files
    list[#list + 1] = p
  end
  function ctx.add_bin(d)
    if d and not ctx.seen["bin " .. d] and is_dir(d) then
      ctx.seen["bin " .. d] = true
      ctx.bins[#ctx.bins + 1] = d
    end
  end
  return ctx
end

-- Whether p is inside a tree the plan binds already.
local function bound(ctx, p)
  for _, t in ipairs(ctx.tools) do if within(p, t) then return true end end
  return false
end

-- Binds one tree or file (resolved), after its checks; why names it.
local function add_tool(ctx, path, why, field)
  if ctx.seen[path] or bound(ctx, path) then return true end
  local st = uv.fs_stat(path)
  if not st then return nil, field .. " " .. show(path) .. ": no such file or directory" end
  if within(ctx.home, path) then
    return nil, string.format("%s %s is $HOME (%s) or a directory above it: the sandbox would see the whole"
      .. " home; name the installation inside it", field, show(path), ctx.home)
  end
  local cred = credential_component(ctx, path)
  if cred then
    return nil, string.format("%s %s is or lies in %s, which holds credentials: it is never bound;"
      .. " accepted: an installation (a version of nvm, pyenv, ...), a program, or a directory without credentials",
      field, show(path), cred)
  end
  if ctx.workdir and within(path, ctx.workdir) then return true end -- bound read-write already
  -- a tree that contains ones bound before replaces them
  local kept = {}
  for _, t in ipairs(ctx.tools) do if not within(t, path) then kept[#kept + 1] = t end end
  ctx.tools = kept
  ctx.seen[path] = true
  ctx.tools[#ctx.tools + 1] = path
  ctx.found[#ctx.found + 1] = { path = path, why = why }
  if st.type == "directory" then return walk(ctx, path) end
  return true
end

local detect

-- The interpreter of a script (#!/path or #!/usr/bin/env NAME): detected
-- in turn when it lies under $HOME.
local function interpreter(ctx, real, depth)
  local head = read_file(real, 256)
  if not head or head:sub(1, 2) ~= "#!" then return true end
  local line = head:match("^#!([^\n]*)") or ""
  local words = {}
  for w in line:gmatch("%S+") do words[#words + 1] = w end
  local prog = words[1]
  if prog and basename(prog) == "env" then
    prog = nil
    for i = 2, #words do
      if words[i]:sub(1, 1) ~= "-" and not words[i]:find("=", 1, true) then prog = words[i]; break end
    end
    if prog then prog = M.which(prog, table.concat(ctx.bins, ":") .. ":" .. (ctx.path or ""), ctx.cwd) end
  end
  if prog and prog:sub(1, 1) == "/" then return detect(ctx, prog, depth + 1, "the interpreter of " .. real) end
  return true
end

-- The installation of program `found` (a path as found on PATH).
detect = function(ctx, found, depth, why)
  if depth > 4 or ctx.visited[found] then return true end
  ctx.visited[found] = true
  local real = uv.fs_realpath(found)
  if not real then return true end
  local home = ctx.home
  if not (within(found, home) or within(real, home)) then return true end
  local cred = credential_component(ctx, real) or credential_component(ctx, found)
  if cred then
    return nil, string.format("the program %s (%s) is or lies in %s, which holds credentials: it is not bound;"
      .. " run another program, or give --no-tools", show(found), show(real), cred)
  end
  local dir = dirname(found)
  local rdir = uv.fs_realpath(dir) or dir
  local cmd = basename(found)
  -- shims: the version they would run
  for _, m in ipairs(MANAGERS) do
    for _, base in ipairs(bases(ctx, m)) do
      local roots
      if (m.name == "pyenv" or m.name == "rbenv") and rdir == base .. "/shims" then
        roots = shim_versions(ctx, base, m.name == "pyenv" and "PYENV_VERSION" or "RBENV_VERSION",
          m.name == "pyenv" and ".python-version" or ".ruby-version")
      elseif m.name == "asdf" and rdir == base .. "/shims" then
        roots = asdf_versions(ctx, base, found)
      elseif m.name == "mise" and rdir == base .. "/shims" then
        roots = mise_versions(ctx, base, cmd)
      elseif m.name == "volta" and rdir == base .. "/bin" and cmd ~= "volta" and cmd ~= "volta-shim" then
        roots = volta_versions(ctx, base, cmd)
      end
      if roots then
        if #roots == 0 then ctx.note(m.name .. " shim " .. found .. ": the system's version (nothing to bind)") end
        for _, r in ipairs(roots) do
          local ok, err = add_tool(ctx, r, m.name .. " version for the shim " .. found, "tool")
          if not ok then return nil, err end
          ctx.add_bin(r .. "/bin")
          local probe = r .. "/bin/" .. cmd
          if uv.fs_stat(probe) then
            ok, err = interpreter(ctx, uv.fs_realpath(probe) or probe, depth)
            if not ok then return nil, err end
          end
        end
        return true
      elseif m.name == "mise" and rdir == base .. "/shims" then
        return nil, "the program " .. show(found) .. " is a mise shim and which version it runs is not clear"
          .. " here: give the version with --tool " .. base .. "/installs/TOOL/VERSION"
      end
    end
  end
  local m, root = match_root(ctx, real)
  if m then
    local ok, err = add_tool(ctx, root, m.name .. (why and (", " .. why) or ""), "tool")
    if not ok then return nil, err end
    if m.bin then ctx.add_bin(m.bin == "" and root or root .. "/bin") end
    if found ~= real and within(found, home) and not bound(ctx, found) then
      -- the link on PATH (~/.local/bin/claude): bound as what it leads to
      ok, err = add_tool(ctx, found, "the link to " .. root, "tool")
      if not ok then return nil, err end
    end
    if m.rustup and RUSTUP_PROXIES[cmd] then
      local rustup = bases(ctx, M.manager("rustup"))[1]
      if rustup then
        local tc = rustup_toolchain(ctx, rustup)
        if not tc then
          tc = rustup .. "/toolchains"
          ctx.note("rustup: the active toolchain is not clear here: every toolchain of " .. tc .. " is bound")
        end
        ok, err = add_tool(ctx, tc, "rustup toolchain for " .. found, "tool")
        if not ok then return nil, err end
        if uv.fs_stat(rustup .. "/settings.toml") then
          ok, err = add_tool(ctx, rustup .. "/settings.toml", "rustup settings", "tool")
          if not ok then return nil, err end
        end
        ctx.env.RUSTUP_HOME = ctx.getenv("RUSTUP_HOME")
        ctx.env.CARGO_HOME = ctx.getenv("CARGO_HOME")
      end
    end
    if m.venv then
      -- a venv's python links to its base interpreter (pyenv's, ...)
      local cfg = read_file(root .. "/pyvenv.cfg") or ""
      local h = cfg:match("\nhome%s*=%s*([^\n]-)%s*\n") or cfg:match("^home%s*=%s*([^\n]-)%s*\n")
      for _, py in ipairs({ h and (h .. "/python3") or false, root .. "/bin/python" }) do
        if py and uv.fs_stat(py) then
          ok, err = detect(ctx, py, depth + 1, "the interpreter of " .. root)
          if not ok then return nil, err end
        end
      end
    end
    return interpreter(ctx, real, depth)
  end
  -- Not a known layout. A prefix (P/bin/x -> P/lib/...: npm's global
  -- prefix, a make install): P, unless P is $HOME or ~/.local. Otherwise
  -- the program alone, and what it links to.
  local prefix = basename(dir) == "bin" and dirname(dir)
  local ok, err
  if prefix and prefix ~= home and prefix ~= home .. "/.local" and within(prefix, home) and real ~= found
    and within(real, uv.fs_realpath(prefix) or prefix) then
    local rp = uv.fs_realpath(prefix)
    ok, err = add_tool(ctx, rp, "the prefix of " .. found .. (why and (", " .. why) or ""), "tool")
    if not ok then return nil, err end
    ctx.add_bin(rp .. "/bin")
  else
    if within(found, home) then
      ok, err = add_tool(ctx, found, "program" .. (why and (", " .. why) or ""), "tool")
      if not ok then return nil, err end
    end
    if real ~= found and within(real, home) then
      ok, err = add_tool(ctx, real, "what " .. found .. " links to", "tool")
      if not ok then return nil, err end
    end
  end
  return interpreter(ctx, real, depth)
end

-- The first word of a bash command line, when it is a plain word.
function M.program_of(command)
  if type(command) ~= "string" then return nil end
  local w = command:match("^%s*([%w%._/%+%-@~]+)")
  -- env assignments and exec in front (isolate's own wrapper is not here)
  if w and w:find("=", 1, true) then return nil end
  return w
end

--- plan(o): o.home (the sandbox's $HOME on this machine), o.cwd (the
--- workdir), o.path (the launching PATH), o.program (the command's first
--- word, or nil), o.given (paths: --tool / the spec's tools; field names
--- them), o.detect (false: only the given), o.getenv. Returns {tools, bins,
--- mask_files, mask_dirs, found = {{path, why}}, notes, env}, or nil, message.
function M.plan(o)
  if type(o.home) ~= "string" or o.home:sub(1, 1) ~= "/" then return nil, "tools: no home to look in" end
  local ctx = new_ctx(o)
  ctx.home = uv.fs_realpath(o.home) or o.home
  ctx.path = o.path
  ctx.workdir = o.cwd and uv.fs_realpath(o.cwd)
  local field = o.field or "tools"
  for i, p in ipairs(o.given or {}) do
    local name = string.format("%s[%d]", field, i)
    if type(p) ~= "string" or p == "" or p:find("\0", 1, true) then
      return nil, name .. " must be a path: absolute, or starting with $HOME/ (got " .. show(p) .. ")"
    end
    local path = p:sub(1, 6) == "$HOME/" and (o.home .. p:sub(6)) or p
    if path:sub(1, 1) ~= "/" then
      return nil, name .. " must be an absolute path or start with $HOME/ (got " .. show(p) .. ")"
    end
    local real = uv.fs_realpath(path)
    if not real then return nil, name .. " " .. show(p) .. ": no such file or directory" end
    local cred = credential_component(ctx, real)
    if cred then
      return nil, string.format("%s %s (%s) is or lies in %s, which holds credentials: it is never bound;"
        .. " accepted: an installation (a version of nvm, pyenv, ...), a program, or a directory without"
        .. " credentials", name, show(p), real, cred)
    end
    local st = uv.fs_stat(real)
    local m, root = match_root(ctx, real .. (st.type == "directory" and "/" or ""))
    if m then
      local ok, err = add_tool(ctx, root, m.name .. ", " .. name, name)
      if not ok then return nil, err end
      if m.bin then ctx.add_bin(m.bin == "" and root or root .. "/bin") end
    elseif st.type == "directory" then
      local ok, err = add_tool(ctx, real, name, name)
      if not ok then return nil, err end
      ctx.add_bin(is_dir(real .. "/bin") and real .. "/bin" or real)
    else
      local ok, err = detect(ctx, real, 0, name)
      if not ok then return nil, err end
    end
  end
  if o.detect ~= false and o.program then
    local found = M.which(o.program, o.path, o.cwd)
    if found then
      local ok, err = detect(ctx, found, 0, nil)
      if not ok then return nil, err end
    end
  end
  -- the launch spec takes at most 128 of each, the root masks included
  if #ctx.mask_files > M.MASK_MAX or #ctx.mask_dirs > M.MASK_MAX then
    return nil, string.format("tools: the bound trees hold %d files and %d directories named like credentials"
      .. " (at most %d each are covered): bind less with --tool, or use --no-tools (first: %s)", #ctx.mask_files,
      #ctx.mask_dirs, M.MASK_MAX, show(ctx.mask_files[1] or ctx.mask_dirs[1]))
  end
  return {
    tools = ctx.tools, bins = ctx.bins, mask_files = ctx.mask_files, mask_dirs = ctx.mask_dirs,
    found = ctx.found, notes = ctx.notes, env = ctx.env,
  }
end

--- Puts a plan into a launch spec: spec.tools, the masks (added to any
--- there), and PATH inside (env_set.PATH: the plan's bin directories, then
--- the launching PATH), with RUSTUP_HOME / CARGO_HOME when they were set.
function M.apply(spec, plan, launching_path)
  if #plan.tools == 0 then return spec end
  spec.tools = plan.tools
  local function merge(key, list)
    if #list == 0 then return end
    local out = {}
    for _, p in ipairs(spec[key] or {}) do out[#out + 1] = p end
    for _, p in ipairs(list) do out[#out + 1] = p end
    spec[key] = out
  end
  merge("mask_files", plan.mask_files)
  merge("mask_dirs", plan.mask_dirs)
  local env_set = {}
  for k, v in pairs(type(spec.env_set) == "table" and spec.env_set or {}) do env_set[k] = v end
  if #plan.bins > 0 then
    local rest, seen = {}, {}
    for _, b in ipairs(plan.bins) do seen[b] = true end
    for d in ((env_set.PATH or launching_path or "") .. ":"):gmatch("([^:]*):") do
      if not seen[d] then rest[#rest + 1] = d end
    end
    if #rest == 1 and rest[1] == "" then rest = {} end
    env_set.PATH = table.concat(plan.bins, ":") .. (#rest > 0 and (":" .. table.concat(rest, ":")) or "")
  end
  for k, v in pairs(plan.env) do if env_set[k] == nil then env_set[k] = v end end
  if next(env_set) then spec.env_set = env_set end
  -- a name is passed through or set, not both
  if type(spec.env_pass) == "table" then
    local kept = {}
    for _, n in ipairs(spec.env_pass) do if env_set[n] == nil then kept[#kept + 1] = n end end
    spec.env_pass = kept
  end
  return spec
end

--- The dry-run lines for a plan.
function M.describe(plan)
  local out = {}
  if #plan.tools == 0 then return out end
  out[#out + 1] = "tools (read-only at the same path; isolation.tools):"
  for _, f in ipairs(plan.found) do out[#out + 1] = "  " .. f.path .. "  (" .. f.why .. ")" end
  if #plan.bins > 0 then out[#out + 1] = "  PATH inside starts with: " .. table.concat(plan.bins, ":") end
  for _, p in ipairs(plan.mask_files) do out[#out + 1] = "  credentials covered (/dev/null): " .. p end
  for _, p in ipairs(plan.mask_dirs) do out[#out + 1] = "  credentials covered (empty tmpfs): " .. p end
  for _, n in ipairs(plan.notes) do out[#out + 1] = "  note: " .. n end
  return out
end

return M
