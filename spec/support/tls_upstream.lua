-- The route specs' HTTPS upstream: a CA and leaves made here by openssl,
-- and spec/support/tls_upstream.py started on loopback with one of them.
local helpers = require("helpers")
local json = require("isolation.json")

local M = {}
local HERE = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"

function M.available()
  for _, c in ipairs({ "openssl", "python3", "curl" }) do
    if helpers.run("command -v " .. c) ~= 0 then return false end
  end
  return true
end

--- A CA (dir/NAME.pem, dir/NAME.key).
function M.make_ca(dir, name)
  local code, _, err = helpers.run(("cd %s && openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
    .. "-subj /CN=%s -keyout %s.key -out %s.pem"):format(helpers.shquote(dir), name, name, name))
  assert(code == 0, err)
end

--- A leaf signed by ca with the subjectAltName san.
function M.make_leaf(dir, ca, name, san)
  local cmd = ("cd %s && openssl req -newkey rsa:2048 -nodes -subj /CN=%s -keyout %s.key -out %s.csr"
    .. " && printf 'subjectAltName=%s\\n' > %s.ext"
    .. " && openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key -CAcreateserial -days 2"
    .. " -extfile %s.ext -out %s.pem"):format(helpers.shquote(dir), name, name, name, san, name,
    name, ca, ca, name, name)
  local code, _, err = helpers.run(cmd)
  assert(code == 0, err)
end

--- A new directory holding a CA (ca) and a leaf it signs (good) with the
--- subjectAltName san; nil when available() is not.
function M.ca_and_leaf(san)
  if not M.available() then return nil end
  local dir = helpers.tmpdir()
  M.make_ca(dir, "ca")
  M.make_leaf(dir, "ca", "good", san)
  return dir
end

--- Starts the upstream with leaf; returns { port, stop(), requests() }.
function M.start(dir, leaf)
  os.remove(dir .. "/port")
  os.remove(dir .. "/requests.jsonl")
  local code, out = helpers.run(("python3 %s %s %s %s >/dev/null 2>%s/up.err & echo $!"):format(
    helpers.shquote(HERE .. "tls_upstream.py"), helpers.shquote(dir .. "/" .. leaf .. ".pem"),
    helpers.shquote(dir .. "/" .. leaf .. ".key"), helpers.shquote(dir), helpers.shquote(dir)))
  assert(code == 0)
  local pid = tonumber(out:match("%d+"))
  assert(helpers.wait_for(function() return helpers.exists(dir .. "/port") end, 10), "the upstream started")
  local up = { port = tonumber(helpers.read(dir .. "/port")) }
  function up.stop() if pid then helpers.run("kill " .. pid) end pid = nil end
  function up.requests()
    local list = {}
    local f = io.open(dir .. "/requests.jsonl")
    if not f then return list end
    for line in f:lines() do list[#list + 1] = json.decode(line) end
    f:close()
    return list
  end
  return up
end

--- The values of header name (any case) in a recorded request.
function M.header(req, name)
  local found = {}
  for _, h in ipairs(req.headers) do
    if h[1]:lower() == name:lower() then found[#found + 1] = h[2] end
  end
  return found
end

return M
