-- isolation.config: the contract's table (docs/reference/launch-spec.md, Config), every default, every refusal, and
-- the normalized form keeping only what applies.
local isolation = require("isolation")

local deep_copy = require("support.tables").deep_copy

local function refused(t, pattern)
  local before = deep_copy(t)
  local cfg, err = isolation.config(t)
  assert.is_nil(cfg)
  assert.is_string(err)
  assert.matches("^isolation: ", err)
  assert.matches(pattern, err, 1, true)
  assert.are.same(before, t) -- never changed
  return err
end

describe("isolation.config", function()
  describe("defaults", function()
    it("nil, no argument and {} give mode none with network allow", function()
      assert.are.same({ mode = "", network = "allow" }, isolation.config(nil))
      assert.are.same({ mode = "", network = "allow" }, isolation.config())
      assert.are.same({ mode = "", network = "allow" }, isolation.config({}))
    end)

    it("\"\" and nil network mean allow", function()
      assert.are.same({ mode = "bwrap", network = "allow" }, isolation.config({ mode = "bwrap", network = "" }))
      assert.are.same({ mode = "bwrap", network = "allow" }, isolation.config({ mode = "bwrap" }))
      assert.are.same({ mode = "", network = "allow" }, isolation.config({ mode = "", network = "" }))
    end)

    it("docker defaults its image to debian:bookworm-slim, also for an empty image", function()
      assert.are.same({ mode = "docker", network = "allow", docker_image = "debian:bookworm-slim" },
        isolation.config({ mode = "docker" }))
      assert.are.same({ mode = "docker", network = "allow", docker_image = "debian:bookworm-slim" },
        isolation.config({ mode = "docker", docker_image = "" }))
    end)

    it("network deny gets an empty allow_hosts array when none is given", function()
      assert.are.same({ mode = "bwrap", network = "deny", allow_hosts = {} },
        isolation.config({ mode = "bwrap", network = "deny" }))
      assert.are.same({ mode = "docker", network = "deny", docker_image = "debian:bookworm-slim", allow_hosts = {} },
        isolation.config({ mode = "docker", network = "deny" }))
    end)

    it("a JSON null (cjson.null) for a key means absent", function()
      local cjson = require("cjson")
      assert.are.same({ mode = "bwrap", network = "allow" },
        isolation.config({ mode = "bwrap", network = cjson.null, docker_image = cjson.null, allow_hosts = cjson.null }))
      assert.are.same({ mode = "", network = "allow" }, isolation.config(cjson.decode('{"mode": null}')))
    end)
  end)

  describe("keeps only what applies", function()
    it("drops docker_image outside mode docker and allow_hosts outside network deny", function()
      assert.are.same({ mode = "bwrap", network = "allow" },
        isolation.config({ mode = "bwrap", docker_image = "alpine:3", allow_hosts = {} }))
      assert.are.same({ mode = "", network = "allow" },
        isolation.config({ mode = "", docker_image = "alpine:3" }))
      assert.are.same({ mode = "docker", network = "allow", docker_image = "alpine:3" },
        isolation.config({ mode = "docker", docker_image = "alpine:3", allow_hosts = {} }))
    end)

    it("keeps a given image reference as it is", function()
      for _, image in ipairs({ "alpine", "alpine:3.19", "ghcr.io/owner/repo:tag", "localhost:5000/x/y:1.0",
        "debian@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "A_b-c.d" }) do
        local cfg, err = isolation.config({ mode = "docker", docker_image = image })
        assert.is_nil(err)
        assert.are.equal(image, cfg.docker_image)
      end
    end)
  end)

  describe("allow_hosts", function()
    it("keeps valid patterns in order, in a new table", function()
      local hosts = { "example.com", "*.example.net", "example.com:8443", "10.0.0.1", "[::1]:9110", "10.0.0.0/8" }
      local t = { mode = "bwrap", network = "deny", allow_hosts = hosts }
      local cfg, err = isolation.config(t)
      assert.is_nil(err)
      assert.are.same(hosts, cfg.allow_hosts)
      assert.are_not.equal(hosts, cfg.allow_hosts)
    end)

    it("validates patterns even where they do not apply", function()
      refused({ mode = "bwrap", allow_hosts = { "http://example.com/" } }, "allow_hosts[1]")
    end)

    it("refuses invalid host patterns, naming the index and the pattern", function()
      for _, bad in ipairs({ "http://example.com", "example.com/path", "user@example.com", "exa mple.com",
        "a..example.com", "", "127.1", "0x7f000001" }) do
        local err = refused({ mode = "bwrap", network = "deny", allow_hosts = { bad } }, "allow_hosts[1]")
        assert.matches("invalid", err, 1, true)
      end
      local err = refused({ mode = "bwrap", network = "deny", allow_hosts = { "example.com", "bad host" } },
        "allow_hosts[2]")
      assert.matches('"bad host"', err, 1, true)
    end)

    it("refuses a map, a string, a number, holes and non-string elements", function()
      refused({ mode = "bwrap", network = "deny", allow_hosts = { host = "example.com" } },
        "allow_hosts must be an array")
      refused({ mode = "bwrap", network = "deny", allow_hosts = "example.com" }, "allow_hosts must be an array")
      refused({ mode = "bwrap", network = "deny", allow_hosts = 3 }, "allow_hosts must be an array")
      refused({ mode = "bwrap", network = "deny", allow_hosts = { 42 } },
        "allow_hosts[1] must be a host pattern string")
      refused({ mode = "bwrap", network = "deny", allow_hosts = { [2] = "example.com", [3] = "example.net" } },
        "allow_hosts must be an array")
      refused({ mode = "bwrap", network = "deny", allow_hosts = { [1.5] = "example.com" } },
        "allow_hosts must be an array")
    end)
  end)

  describe("refuses", function()
    it("an unknown key, naming it and the accepted keys", function()
      local err = refused({ mode = "bwrap", netwrok = "deny" }, '"netwrok"')
      assert.matches("mode, network, docker_image, allow_hosts", err, 1, true)
      refused({ "bwrap" }, "config key number 1 is unknown")
      refused({ [true] = 1 }, "config key true is unknown")
    end)

    it("a mode outside the table or of the wrong type", function()
      assert.are.equal('isolation: mode must be "", "bwrap", "docker" or "podman" (got "lxc")',
        refused({ mode = "lxc" }, "mode"))
      refused({ mode = "BWRAP" }, '(got "BWRAP")')
      refused({ mode = 1 }, "mode must be")
      refused({ mode = true }, "(got true)")
      refused({ mode = {} }, "(got table)")
    end)

    it("a network outside the table or of the wrong type", function()
      assert.are.equal('isolation: network must be "allow", "deny" or "none" (got "block")',
        refused({ mode = "bwrap", network = "block" }, "network"))
      refused({ mode = "bwrap", network = false }, "network must be")
      refused({ mode = "bwrap", network = 0 }, "(got number 0)")
    end)

    it("network deny with mode none: nothing could enforce it", function()
      local err = refused({ network = "deny" }, "network \"deny\"")
      assert.matches('mode ""', err, 1, true)
      refused({ mode = "", network = "deny" }, "network \"deny\"")
    end)

    it("a docker_image of the wrong type or one docker would read as an option", function()
      refused({ mode = "docker", docker_image = 5 }, "docker_image")
      refused({ mode = "docker", docker_image = "--privileged" }, '(got "--privileged")')
      refused({ mode = "docker", docker_image = "debian bookworm" }, "docker_image")
      refused({ mode = "docker", docker_image = "debian\0x" }, "docker_image")
      refused({ mode = "docker", docker_image = "debian;id" }, "docker_image")
      refused({ mode = "docker", docker_image = string.rep("a", 300) }, "docker_image")
    end)

    it("shows control characters escaped and long values cut", function()
      local err = refused({ mode = "bwrap\n\27[31m" }, "mode")
      assert.is_nil(err:find("[\n\27]"))
      assert.matches("\\n\\x1b", err, 1, true)
      err = refused({ mode = string.rep("x", 1000) }, "mode")
      assert.is_true(#err < 300)
    end)

    it("raises for a config that is not a table", function()
      assert.has_error(function() isolation.config("bwrap") end)
      assert.has_error(function() isolation.config(5) end)
    end)
  end)

  it("accepts its own output, giving an equal new table", function()
    for _, t in ipairs({ {}, { mode = "bwrap" }, { mode = "docker", network = "deny" },
      { mode = "bwrap", network = "deny" }, { mode = "docker", docker_image = "alpine:3" } }) do
      local once = assert(isolation.config(t))
      local twice = assert(isolation.config(once))
      assert.are.same(once, twice)
      assert.are_not.equal(once, twice)
      assert.are_not.equal(t, once)
    end
  end)

  it("returns a new allow_hosts table each time", function()
    local a = assert(isolation.config({ mode = "bwrap", network = "deny" }))
    local b = assert(isolation.config({ mode = "bwrap", network = "deny" }))
    assert.are_not.equal(a.allow_hosts, b.allow_hosts)
  end)
end)
