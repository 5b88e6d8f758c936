-- Generated inputs for the credential routes' parsing that the user or the
-- orchestrator writes: the proxy's `routes` option (name, upstream, header
-- spec, value) and isolate's `--secret [NAME=]ENV@URL[#HEADER]`. Each input
-- is either refused with a message that names the field and never shows
-- the secret, or accepted; the dry run refuses what the run refuses.
-- Deterministic (a fixed seed): the same inputs on every run. The proxy
-- cases run under the sanitizer build in `make spec-asan`.
local helpers = require("helpers")
local isolation = require("isolation")
local isolate_run = require("support.isolate_run")

-- a linear congruential generator: rnd(n) is 1..n
local function generator(seed)
  return function(n)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n + 1
  end
end

local PIECES = { "a", "z", "0", "9", "-", "_", "A", ".", "/", ":", "@", "?", "#", " ", "\t", "\r\n", "\0", "\127",
  "\255", "é", "%", "%41", "[", "]", "[::1]", "https://", "http://", "example.com", "127.0.0.1", "bearer",
  "basic:", "basic:x-access-token", "x-api-key", "Authorization", "Host", "Proxy-Authorization", "Content-Length",
  "Transfer-Encoding", ":443", ":0", ":65536", "", "x" }

local function text(rnd, max)
  local t = {}
  for _ = 1, rnd(max) - 1 do t[#t + 1] = PIECES[rnd(#PIECES)] end
  return table.concat(t)
end

describe("credential routes, generated inputs", function()
  it("3000 generated `routes` options of the proxy: each refused naming routes[i] and its field, never the "
    .. "value, or a proxy that starts and closes", function()
    local rnd = generator(2804)
    local accepted, refused = 0, 0
    for i = 1, 3000 do
      local routes, secrets = {}, {}
      for j = 1, rnd(4) - 1 do
        -- the value: a marker the message must never hold, sometimes made bad
        local value = "sk-generated-" .. i .. "-" .. j .. "-" .. ("v"):rep(rnd(40))
        local k = rnd(12)
        if k == 1 then value = value .. "\n" elseif k == 2 then value = value .. "\0tail"
        elseif k == 3 then value = ("q"):rep(4097) elseif k == 4 then value = nil end
        secrets[#secrets + 1] = value
        local r = { name = rnd(6) > 1 and ("r" .. j .. text(rnd, 2)):lower():gsub("[^a-z0-9-]", "") or text(rnd, 4),
          upstream = rnd(5) > 1 and "https://" .. text(rnd, 5) or text(rnd, 6),
          header = rnd(3) > 1 and text(rnd, 3) or nil, value = value }
        if rnd(20) == 1 then r.extra = "x" end
        routes[j] = r
      end
      local proxy, err = isolation.proxy({ allow = {}, listen = "127.0.0.1:0", routes = routes })
      if proxy then
        proxy:close()
        accepted = accepted + 1
      else
        assert.matches("^isolation: routes", err, 1, false, "case " .. i .. ": " .. tostring(err))
        for _, s in ipairs(secrets) do
          assert.is_nil(err:find(s, 1, true), "case " .. i .. ": the message shows a secret: " .. err)
        end
        refused = refused + 1
      end
    end
    assert.is_true(accepted > 100 and refused > 100, accepted .. " accepted, " .. refused .. " refused")
  end)

  it("200 generated --secret arguments: the dry run refuses (2, one line naming --secret) exactly what the run "
    .. "refuses, accepts the rest naming the route, and never shows the secret", function()
    if helpers.skip_without_bwrap() then return end
    local secret = "ghp-generated-secret-0123456789abcdef"
    local fx = isolate_run.new()
    local ok, e = pcall(function()
      local rnd = generator(2828)
      -- mostly good pieces (so that many are accepted), now and then a bad one
      local function pick(good)
        if rnd(4) == 1 then return text(rnd, 3) end
        return good[rnd(#good)]
      end
      local names = { "", "gh=", "api-1=", "x=" }
      local hosts = { "git.example.com", "api.example.net", "127.0.0.1", "[::1]", "a.example.com:8443" }
      local paths = { "", "/", "/v1", "/org/repo", "/a-b_c.d" }
      local headers = { "", "#bearer", "#basic:x-access-token", "#x-api-key", "#x-goog-api-key" }
      local forms = {
        function() return pick(names) .. "MY_TOKEN@https://" .. pick(hosts) .. pick(paths) .. pick(headers) end,
        function() return pick(names) .. "MY_TOKEN@https://" .. pick(hosts) .. pick(paths) .. pick(headers) end,
        function() return text(rnd, 3) .. "@" .. text(rnd, 4) end,
        function() return text(rnd, 6) end,
      }
      local accepted, refused, compared = 0, 0, 0
      for i = 1, 200 do
        local arg = forms[rnd(#forms)]()
        -- a NUL cannot be in an argument: exec would cut it there
        arg = arg:gsub("%z", "")
        local args = { "--workdir", fx.tmp, "--network", "deny", "--secret", arg, "--", "true" }
        local dry = { table.unpack(args) }
        table.insert(dry, 1, "--dry-run")
        local status, out, err = fx:isolate(dry, { env = { "MY_TOKEN=" .. secret } })
        local what = ("case %d (%q): %s%s"):format(i, arg, out, err)
        assert.is_nil((out .. err):find(secret, 1, true), what)
        assert.is_nil(err:find("traceback", 1, true), what)
        if status == 0 then
          accepted = accepted + 1
          assert.truthy(out:find("\nproxy route ", 1, true), what)
        else
          refused = refused + 1
          assert.are.equal(2, status, what)
          assert.truthy(err:find("\nisolate: %-%-secret") or err:find("^isolate: %-%-secret"), what)
        end
        -- every fifth: the run itself agrees with its dry run
        if i % 5 == 0 then
          compared = compared + 1
          local rstatus, rout, rerr = fx:isolate(args, { env = { "MY_TOKEN=" .. secret } })
          assert.are.equal(status == 0 and 0 or 2, rstatus, what .. "\nthe run: " .. rout .. rerr)
          assert.is_nil((rout .. rerr):find(secret, 1, true), what)
        end
      end
      assert.is_true(accepted > 20 and refused > 20, accepted .. " accepted, " .. refused .. " refused")
      assert.are.equal(40, compared)
    end)
    fx:close()
    assert(ok, e)
  end)
end)
