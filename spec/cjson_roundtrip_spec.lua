-- A config encoded by lua-cjson is accepted back (the API contract's conventions):
-- Debian's lua-cjson writes an empty Lua table, such as the normalized
-- config's empty allow_hosts, as {}. Every entry point that reads a config
-- from JSON takes that {} for the empty array it was, and gives back a
-- config equal to the one encoded. A non-empty object is still an error
-- naming the field; the rest of the strict codec is unchanged.
local cjson = require("cjson")
local uv = require("luv")
local isolation = require("isolation")
local helpers = require("helpers")
local policy = require("isolation.policy")
local session = require("isolation.session")
local cli = require("support.cli")

-- Every normalized shape: none, bwrap allow, bwrap deny without and with
-- hosts, docker allow and deny (an image with a "/", which cjson writes "\/").
local SHAPES = {
  { "none", {} },
  { "bwrap allow", { mode = "bwrap" } },
  { "bwrap deny", { mode = "bwrap", network = "deny" } },
  { "bwrap deny with hosts",
    { mode = "bwrap", network = "deny", allow_hosts = { "example.com", "*.example.net:443" } } },
  { "docker allow", { mode = "docker", docker_image = "example.net/team/img:1" } },
  { "docker deny", { mode = "docker", network = "deny" } },
  { "docker deny with hosts", { mode = "docker", network = "deny", allow_hosts = { "10.0.0.0/8" } } },
}

local function normalized(raw)
  local cfg = assert(isolation.config(raw))
  return cfg
end

describe("a config encoded by lua-cjson", function()
  it("is what the issue says: an empty allow_hosts comes out as {}", function()
    local text = cjson.encode(normalized({ mode = "bwrap", network = "deny" }))
    assert.truthy(text:find('"allow_hosts":{}', 1, true), text)
  end)

  for _, case in ipairs(SHAPES) do
    local name, raw = case[1], case[2]

    it(name .. ": policy.project_default reads it back equal", function()
      local cfg = normalized(raw)
      local got, err = policy.project_default({ default_isolation_json = cjson.encode(cfg) })
      assert.is_table(got, err)
      assert.same(cfg, got)
    end)

    it(name .. ": policy.session_isolation takes it as the project default and as a POST override", function()
      local cfg = normalized(raw)
      local project = { default_isolation_json = cjson.encode(cfg) }
      assert.same(cfg, policy.session_isolation(project, nil))
      assert.same(cfg, policy.session_isolation(project, '{"isolation": null}'))
      local got, err = policy.session_isolation({}, cjson.encode({ isolation = cfg }))
      assert.is_table(got, err)
      assert.same(cfg, got)
      -- the same document decoded by cjson itself, given as a table
      assert.same(cfg, policy.session_isolation({}, cjson.decode(cjson.encode({ isolation = cfg }))))
    end)

    it(name .. ": policy.patch_project stores it, written back with [] (strict form)", function()
      local cfg = normalized(raw)
      local p = {}
      assert.equal(p, policy.patch_project(p, cjson.encode({ isolation = cfg })))
      assert.same(cfg, policy.project_default(p))
      assert.equal(policy.json_encode(cfg), p.default_isolation_json)
      if cfg.allow_hosts and #cfg.allow_hosts == 0 then
        assert.truthy(p.default_isolation_json:find('"allow_hosts":[]', 1, true))
      end
    end)

    it(name .. ": a launch configuration decodes, continues with it, and is written back with []", function()
      local cfg = normalized(raw)
      local text = cjson.encode({ profile_name = "p", yolo = false, isolation = cfg, extra = { n = 1 } })
      local lc, err = policy.decode_launch(text)
      assert.is_table(lc, err)
      assert.same(cfg, policy.for_continuation(text))
      assert.same(cfg, policy.for_continuation(cjson.decode(text)))
      local back = assert(policy.encode_launch(lc))
      assert.same(lc, policy.decode_launch(back))
      assert.is_nil(back:find("{}", 1, true), back) -- the empty allow_hosts is [] again
      assert.equal("integer", math.type(lc.extra.n))
    end)

    it(name .. ": the badge and the scheduler read it", function()
      local cfg = normalized(raw)
      local decoded = cjson.decode(cjson.encode(cfg))
      assert.equal(policy.badge(cfg), policy.badge(decoded))
      assert.is_table(require("isolation.scheduler").task_isolation(decoded, { id = "t" }, function() end))
    end)
  end

  it("is refused when allow_hosts is a non-empty object, naming the field, everywhere", function()
    local text = '{"mode":"bwrap","network":"deny","allow_hosts":{"a":"example.com"}}'
    local cfg, err = policy.project_default({ default_isolation_json = text })
    assert.is_nil(cfg)
    assert.matches("allow_hosts", err, 1, true)
    cfg, err = policy.session_isolation({}, '{"isolation":' .. text .. '}')
    assert.is_nil(cfg)
    assert.matches("allow_hosts", err, 1, true)
    cfg, err = policy.decode_launch('{"isolation":' .. text .. '}')
    assert.is_nil(cfg)
    assert.matches("allow_hosts", err, 1, true)
    local p = { default_isolation_json = '{"mode":"bwrap","network":"allow"}' }
    assert.is_nil(policy.patch_project(p, '{"isolation":' .. text .. '}'))
    assert.equal('{"mode":"bwrap","network":"allow"}', p.default_isolation_json)
  end)

  it("keeps the rest of the strict codec: duplicate keys, [] for an object, integers", function()
    assert.is_nil(policy.project_default({ default_isolation_json = '{"mode":"bwrap","mode":""}' }))
    assert.is_nil(policy.session_isolation({}, '{"isolation": []}'))
    assert.is_nil(policy.session_isolation({}, '{"isolation": {"mode": "bwrap"}, "isolation": null}'))
    local lc = assert(policy.decode_launch('{"n":3,"o":{},"a":[]}'))
    assert.equal('{"a":[],"n":3,"o":{}}', policy.encode_launch(lc))
  end)
end)

describe("a config encoded by lua-cjson, through a session manager", function()
  local root, mgr

  before_each(function()
    root = helpers.tmpdir()
    assert(uv.fs_mkdir(root .. "/work", 448))
    mgr = assert(session.manager({ runtime_dir = root .. "/run", launcher = function() return { pid = 0 } end }))
  end)
  after_each(function()
    mgr:close()
    helpers.rmtree(root)
  end)

  for i, case in ipairs(SHAPES) do
    local name, raw = case[1], case[2]
    it(name .. ": mgr:launch takes it as the project default, an override and a continuation", function()
      local cfg = normalized(raw)
      local base = { workdir = root .. "/work", command = "true" }
      local function launch(id, extra)
        local req = { id = id .. i }
        for k, v in pairs(base) do req[k] = v end
        for k, v in pairs(extra) do req[k] = v end
        local s, err = mgr:launch(req)
        assert.is_table(s, err)
        assert.same(cfg, s.isolation)
        assert(mgr:kill(req.id))
        return s
      end
      launch("default", { project = { default_isolation_json = cjson.encode(cfg) } })
      launch("override", { isolation = cjson.decode(cjson.encode(cfg)) })
      local s = launch("first", { isolation = cfg })
      launch("continued", { continuation = cjson.encode(s.launch_configuration) })
    end)
  end
end)

describe("a config encoded by lua-cjson, through isolate --config", function()
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  local function argv_for(text)
    helpers.write(dir .. "/c.json", text)
    local code, out, err = cli.isolate({ "--config", dir .. "/c.json", "--dry-run", "--json", "--", "echo", "hi" },
      { cwd = dir })
    assert.equal(0, code, text .. ": " .. err)
    return out
  end

  for _, case in ipairs(SHAPES) do
    local name, raw = case[1], case[2]
    it(name .. ": gives the same argv as the strict form of the same config", function()
      local cfg = normalized(raw)
      local strict = assert(policy.json_encode(cfg))
      local from_cjson = argv_for(cjson.encode(cfg))
      assert.equal(argv_for(strict), from_cjson)
      -- and the argv is the one the module builds for that config
      local spec = { config = cfg, workdir = assert(uv.fs_realpath(dir)), command = "echo hi",
        proxy_socket = cfg.network == "deny" and "/tmp/isolate.X/proxy.sock" or nil }
      local want = assert(isolation.argv(spec))
      assert.equal(want[1], cjson.decode(from_cjson)[1])
    end)
  end

  it("refuses a non-empty object for allow_hosts, naming it", function()
    helpers.write(dir .. "/c.json", '{"mode":"bwrap","network":"deny","allow_hosts":{"a":"example.com"}}')
    local code, _, err = cli.isolate({ "--config", dir .. "/c.json", "--dry-run", "--", "true" }, { cwd = dir })
    assert.equal(2, code)
    assert.matches("allow_hosts", err, 1, true)
  end)
end)
