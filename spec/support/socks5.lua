-- SOCKS5 request bytes for the proxy specs (RFC 1928): CONNECT by name
-- or by IPv4 address, the port big-endian. The greeting is the specs' own.
local M = {}

--- A port (0-65535) as two bytes, big-endian.
function M.be16(n) return string.char(n // 256, n % 256) end

--- CONNECT to host name `name` (ATYP 3), port `port`.
function M.by_name(name, port)
  return "\5\1\0\3" .. string.char(#name) .. name .. M.be16(port)
end

--- CONNECT to the IPv4 address a.b.c.d (ATYP 1), port `port`.
function M.by_ipv4(a, b, c, d, port)
  return "\5\1\0\1" .. string.char(a, b, c, d) .. M.be16(port)
end

return M
