-- isolate's exit summary and --learn's learned options come from the
-- events' structured fields only (type, code, host, port, and the refused
-- address and its class in their own fields), never from a reason's text:
-- an agent chooses the TLS server name, the CONNECT authority, the Host
-- header, the path and the SOCKS5 name, and text in any of them shaped like
-- a reason ("x resolves to a loopback address (0.0.0.0/0 --allow-private
-- ...)") must not become a summary line that advises the operator to paste
-- it. Driven for real: a bwrap deny sandbox under bin/isolate, the proxy, a
-- loopback upstream, raw bytes from a client inside.
--
-- Before the fix, the ClientHello's server name turned an sni_mismatch into
-- a "refused for its address" line ending "admit with --allow-host
-- 0.0.0.0/0 --allow-private --allow-host *.evil.example:PORT", and the
-- reason (with the forged text) was printed after the code.
local helpers = require("helpers")
local isolate_run = require("support.isolate_run")
local parsers = require("support.parsers")

local PINNED = "pinned.example.com" -- admitted, pinned to 127.0.0.1 (admitted by 127.0.0.1:PORT)
local PRIVATE = "private.example.com" -- admitted, pinned to 127.0.0.2: refused for its address
local UNLISTED = "unlisted.example.com" -- not on the allowlist, pinned to 127.0.0.1
local FORGED = "x resolves to a loopback address (0.0.0.0/0 --allow-private --allow-host *.evil.example)"
local FORGED_WORD = "x.resolves.to.a.loopback.address(0.0.0.0/0--allow-private--allow-host*.evil.example)"
local PYTHON = "/usr/bin/python3"

-- The client inside: each case is a list of byte strings sent in turn on one
-- connection to the proxy (HTTP_PROXY's host:port), reading what comes
-- between them and until the proxy closes after the last; prints the case's
-- label and the first line (or the first bytes) of the last answer.
local CLIENT = [[
import os, socket, sys
from urllib.parse import urlsplit
u = urlsplit(os.environ["HTTP_PROXY"])
for line in sys.stdin.read().split("\n"):
    if not line:
        continue
    label, *sends = line.split(" ")
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    got = b""
    for i, h in enumerate(sends):
        s.sendall(bytes.fromhex(h))
        got = b""
        while True:
            try:
                d = s.recv(4096)
            except socket.timeout:
                break
            if not d:
                break
            got += d
            if i < len(sends) - 1:
                break
    s.close()
    print(label, got.split(b"\r\n")[0][:12].hex() if got[:1] == b"\x05" or got[:1] == b"\x00" else
          got.split(b"\r\n")[0].decode("latin-1"))
]]

local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

local function u16(n) return string.char(n >> 8 & 255, n & 255) end

local function socks5(name, port)
  return { "\5\1\0", "\5\1\0\3" .. string.char(#name) .. name .. u16(port) }
end

-- The cases, each a label and its sends; port: the upstream's.
local function cases(port)
  local p = tostring(port)
  return {
    -- the server name of a tunnel that is admitted (an sni_mismatch)
    { "sni", "CONNECT " .. PINNED .. ":" .. p .. " HTTP/1.1\r\nHost: " .. PINNED .. ":" .. p .. "\r\n\r\n",
      parsers.client_hello({ sni = FORGED }) },
    { "sni-word", "CONNECT " .. PINNED .. ":" .. p .. " HTTP/1.1\r\nHost: " .. PINNED .. ":" .. p .. "\r\n\r\n",
      parsers.client_hello({ sni = FORGED_WORD }) },
    -- the CONNECT authority
    { "authority", "CONNECT " .. FORGED_WORD .. ":443 HTTP/1.1\r\nHost: " .. FORGED_WORD .. ":443\r\n\r\n" },
    { "authority-spaces", "CONNECT " .. FORGED .. ":443 HTTP/1.1\r\n\r\n" },
    -- the Host header, with an origin-form target and with an absolute one
    { "host", "GET / HTTP/1.1\r\nHost: " .. FORGED .. "\r\n\r\n" },
    { "host-word", "GET / HTTP/1.1\r\nHost: " .. FORGED_WORD .. "\r\n\r\n" },
    { "host-absolute", "GET http://" .. UNLISTED .. ":" .. p .. "/ HTTP/1.1\r\nHost: " .. FORGED .. "\r\n\r\n" },
    -- the path, to a host not on the list and to one refused for its address
    { "path", "GET http://" .. UNLISTED .. ":" .. p .. "/" .. FORGED_WORD .. " HTTP/1.1\r\nHost: " .. UNLISTED
      .. ":" .. p .. "\r\n\r\n" },
    { "path-private", "GET http://" .. PRIVATE .. ":" .. p .. "/" .. FORGED_WORD .. " HTTP/1.1\r\nHost: "
      .. PRIVATE .. ":" .. p .. "\r\n\r\n" },
    -- the SOCKS5 name
    { "socks", table.unpack(socks5(FORGED, port)) },
    { "socks-word", table.unpack(socks5(FORGED_WORD, port)) },
  }
end

local function client_input(port)
  local lines = {}
  for _, c in ipairs(cases(port)) do
    local parts = { c[1] }
    for i = 2, #c do parts[#parts + 1] = hex(c[i]) end
    lines[#lines + 1] = table.concat(parts, " ")
  end
  return table.concat(lines, "\n") .. "\n"
end

-- The lines isolate wrote after the command's own output: every "isolate:"
-- line but the learn-mode banner at the start.
local function summary(err)
  local out = {}
  for l in err:gmatch("[^\n]*") do
    if l:find("^isolate: ") and not l:find("^isolate: learn mode: the proxy admits every host") then
      out[#out + 1] = l
    end
  end
  return out
end

describe("isolate's summary and learned options from client-controlled fields", function()
  local fx, tmp, up
  before_each(function()
    fx = isolate_run.new(1)
    tmp, up = fx.tmp, fx.up
  end)
  after_each(function() fx:close() end)

  local function run(extra)
    helpers.write(tmp .. "/cases", client_input(up.port))
    helpers.write(tmp .. "/client.py", CLIENT)
    local head = { "--workdir", tmp, "--resolve", PINNED .. ":127.0.0.1", "--resolve", PRIVATE .. ":127.0.0.2",
      "--resolve", UNLISTED .. ":127.0.0.1", "--allow-host", PINNED, "--allow-host", PRIVATE,
      "--allow-host", "127.0.0.1:" .. up.port }
    -- the cases on the client's stdin, through sh (cli.isolate gives it none)
    return fx:sh(head, extra, PYTHON .. " " .. tmp .. "/client.py < " .. tmp .. "/cases", { timeout = 120 })
  end

  local function skip()
    if helpers.skip_without_bwrap() then return true end
    if not io.open(PYTHON) then
      pending(PYTHON .. " is not installed: the client inside the sandbox is a python script")
      return true
    end
  end

  local function assert_clean(err)
    for _, l in ipairs(summary(err)) do
      assert.falsy(l:find("evil", 1, true), l)
      assert.falsy(l:find("x resolves", 1, true), l)
      assert.falsy(l:find("x.resolves", 1, true), l)
      assert.falsy(l:find("0.0.0.0", 1, true), l)
      assert.falsy(l:find("--allow-host 0", 1, true), l)
    end
  end

  it("under deny: the summary names hosts, codes and addresses, never the forged text", function()
    if skip() then return end
    local status, out, err = run({})
    assert.are.equal(0, status, err)
    local p = tostring(up.port)
    assert.truthy(out:find("path HTTP/1.1 403", 1, true), out)
    assert.truthy(out:find("path-private HTTP/1.1 403", 1, true), out)
    assert_clean(err)
    assert.are.same({
      "isolate: the proxy denied 1 request to 1 host not on the allowlist (admit one with --allow-host HOST):",
      "isolate:   " .. UNLISTED .. ":" .. p .. " (1)",
      "isolate: the proxy refused 1 request to 1 host on the allowlist for the address it resolves to (loopback,"
        .. " link-local, private or reserved; admit the address with an IP/CIDR --allow-host, or every such address"
        .. " with --allow-private):",
      "isolate:   " .. PRIVATE .. ":" .. p .. " -> 127.0.0.2 (loopback) (1); admit with --allow-host 127.0.0.2:" .. p,
      "isolate: the proxy refused 2 requests for what they sent:",
      "isolate:   " .. PINNED .. ":" .. p .. " (2): sni_mismatch: the TLS server name is not the CONNECT host",
      "isolate: the proxy ended connections that named no host:",
      "isolate:   bad_request (7): a malformed request",
    }, summary(err))
    assert.are.same({}, up.requests())
  end)

  it("under --learn: the learned options are the admitted host:ports, never the forged text", function()
    if skip() then return end
    local status, _, err = run({ "--learn" })
    assert.are.equal(0, status, err)
    local p = tostring(up.port)
    assert_clean(err)
    local lines = summary(err)
    local learned
    for i, l in ipairs(lines) do
      if l:find("^isolate: learn mode: the command used") then
        learned = { l, lines[i + 1], lines[i + 2], lines[i + 3] }
      end
    end
    assert.are.same({
      "isolate: learn mode: the command used 1 host; these options admit it:",
      "isolate:   --allow-host " .. UNLISTED .. ":" .. p,
      "isolate: or, in a --config file:",
      'isolate:   {"allow_hosts": ["' .. UNLISTED .. ":" .. p .. '"]}',
    }, learned)
    for _, l in ipairs(lines) do
      if l:find("--allow-host", 1, true) and not l:find("admit one with --allow-host HOST", 1, true)
        and not l:find("IP/CIDR --allow-host", 1, true) then
        assert.truthy(l:find("^isolate:   %-%-allow%-host [%w.-]+:%d+$")
          or l:find("admit with %-%-allow%-host 127%.0%.0%.2:%d+$"), l)
      end
    end
  end)
end)
