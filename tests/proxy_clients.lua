-- Which HTTP clients use the proxy variables a network-deny sandbox exports,
-- measured: each client runs in a real bwrap deny sandbox (isolation.wrap)
-- whose proxy admits nothing and records every request it sees. A client
-- honours a variable when, with only that variable set, its request for a
-- host name unique to the probe reaches the proxy (a 403 event naming that
-- host); one that ignores it finds no route out (the sandbox has no network
-- but the proxy) and the proxy sees nothing.
--
--   make && lua5.4 tests/proxy_clients.lua     (from the worktree root)
--
-- Prints one line per client and variable; a client not installed here is
-- printed as "not measured". The README's table quotes a run of this.
package.cpath = "build/?.so;" .. package.cpath
package.path = "lua/?.lua;spec/?.lua;" .. package.path
local isolation = require("isolation")
local helpers = require("helpers")
local shq = helpers.shquote

local dir = helpers.tmpdir()
local work = dir .. "/work"
assert(os.execute("mkdir -m 0700 " .. shq(work) .. " " .. shq(dir .. "/run")))
local sock = dir .. "/run/proxy.sock"
local proxy = assert(isolation.proxy({ unix = sock, allow = {} }))

local PROXY_VARS = { "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy" }

-- A python with requests and pip outside /usr (pyenv under $HOME, which the
-- sandbox hides) is bound read-only at its own path.
local ro_binds = {}
local function first_existing(paths)
  for _, p in ipairs(paths) do
    if helpers.run("test -x " .. shq(p)) == 0 then return p end
  end
end
local home = os.getenv("HOME") or "/root"
local pyenv_python = first_existing({ home .. "/.pyenv/versions/3.11.7/bin/python3" })
if pyenv_python then ro_binds[#ro_binds + 1] = home .. "/.pyenv" end

-- Go: a program using net/http's default client, built on the host.
local go_prog
if helpers.run("command -v go") == 0 then
  helpers.write(work .. "/get.go", [[
package main

import (
	"net/http"
	"os"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		os.Exit(1)
	}
	resp.Body.Close()
}
]])
  local code, _, err = helpers.run("cd " .. shq(work) .. " && GOCACHE=" .. shq(dir .. "/gocache")
    .. " GOPATH=" .. shq(dir .. "/gopath") .. " GO111MODULE=off go build -o get get.go")
  if code == 0 then go_prog = work .. "/get" else io.stderr:write("go build failed: " .. err .. "\n") end
end

local PY = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)"
local REQ = "import sys, requests; requests.get(sys.argv[1], timeout=5)"
local clients = {
  { "curl", "curl", "curl -s -o /dev/null --max-time 5 URL" },
  { "wget", "wget", "wget -q -O /dev/null -T 5 -t 1 URL" },
  { "git (http transport)", "git", "git ls-remote URL/repo.git" },
  { "python3 urllib (/usr/bin)", "/usr/bin/python3", "/usr/bin/python3 -c " .. shq(PY) .. " URL" },
  { "python requests", pyenv_python, (pyenv_python or "") .. " -c " .. shq(REQ) .. " URL" },
  { "pip", pyenv_python, (pyenv_python or "") .. " -m pip download --no-deps --retries 0 --timeout 5 "
    .. "--no-cache-dir -d /tmp/dl --index-url URL/simple --trusted-host HOST some-package" },
  { "npm", "npm", "npm view --registry URL/ --fetch-retries 0 --fetch-timeout 5000 some-package" },
  { "go net/http (1.19)", go_prog, (go_prog or "") .. " URL" },
  { "node fetch, NODE_USE_ENV_PROXY=1", "node",
    "node -e " .. shq("fetch(process.argv[1]).then(()=>{},()=>process.exit(1))") .. " URL" },
  { "node fetch, without NODE_USE_ENV_PROXY", "node",
    "env -u NODE_USE_ENV_PROXY node -e " .. shq("fetch(process.argv[1]).then(()=>{},()=>process.exit(1))")
    .. " URL" },
}

local function installed(prog)
  if not prog then return false end
  if prog:sub(1, 1) == "/" then return helpers.run("test -x " .. shq(prog)) == 0 end
  return helpers.run("command -v " .. shq(prog)) == 0
end

-- Runs `cmd` in the sandbox with only `var` of the proxy variables set.
local function probe(cmd, var, url)
  local unset = {}
  for _, v in ipairs(PROXY_VARS) do
    if v ~= var then unset[#unset + 1] = "-u " .. v end
  end
  local line = assert(isolation.wrap({
    config = { mode = "bwrap", network = "deny" }, workdir = work, proxy_socket = sock,
    ro_binds = #ro_binds > 0 and ro_binds or nil,
    command = "exec env " .. table.concat(unset, " ") .. " "
      .. cmd:gsub("URL", url):gsub("HOST", url:match("//(.*)$")),
  }))
  helpers.run("timeout -k 5 60 sh -c " .. shq(line))
  -- a request's event comes when it ends: the proxy's thread may still be
  -- closing the sandbox's connections
  for _ = 1, 50 do
    local idle = proxy:stats().active == 0 -- then every event is queued
    for _, ev in ipairs(proxy:events()) do
      if ev.host and url:find(ev.host, 1, true) then return true end
    end
    if idle then break end
    require("luv").sleep(20)
  end
  return false
end

local n = 0
print(string.format("%-40s %-12s %-12s %-12s %-12s", "client", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY",
  "https_proxy"))
for _, c in ipairs(clients) do
  local name, prog, cmd = c[1], c[2], c[3]
  local cells = {}
  if not installed(prog) then
    cells = { "not measured: not installed here" }
  else
    for _, var in ipairs(PROXY_VARS) do
      n = n + 1
      local scheme = var:lower() == "https_proxy" and "https" or "http"
      local url = scheme .. "://probe" .. n .. ".example.com"
      cells[#cells + 1] = probe(cmd, var, url) and "uses it" or "ignores"
    end
  end
  print(string.format("%-40s %-12s %-12s %-12s %-12s", name, cells[1], cells[2] or "", cells[3] or "",
    cells[4] or ""))
end
print("(http:// URLs probe HTTP_PROXY/http_proxy, https:// URLs HTTPS_PROXY/https_proxy)")
for _, v in ipairs({ "node --version", "npm --version", "git --version", "curl --version | head -1",
  "/usr/bin/python3 --version", "go version" }) do
  local _, out = helpers.run(v .. " 2>&1")
  io.write("  ", v, ": ", (out:gsub("\n$", "")), "\n")
end
proxy:close()
helpers.rmtree(dir)
