/*
 * hostparse.h - one host parsed strictly (a name, a canonical IPv4
 * dotted-quad or an IPv6 literal) and the address classes the proxy
 * refuses. Pure and Lua-free: the wire parsers, the fuzz targets and the C
 * tests include this and nothing of Lua.
 */
#ifndef ISOLATION_HOSTPARSE_H
#define ISOLATION_HOSTPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest host name kept (DNS: 253, plus room for a trailing dot and NUL). */
#define HOST_NAME_CAP 256

enum host_kind { HOST_INVALID = 0, HOST_NAME, HOST_IPV4, HOST_IPV6 };

/* An IP address in network byte order; family is 4 or 6. */
struct host_addr {
    int family;
    uint8_t bytes[16];
};

/*
 * Parses one host (no port). A name is lowercased, loses one trailing dot and
 * is copied to out (NUL-terminated, outcap >= HOST_NAME_CAP). A canonical
 * dotted-quad gives HOST_IPV4; an IPv6 literal, with or without brackets,
 * gives HOST_IPV6; both fill *addr (when addr is not NULL) and write the
 * canonical text to out (IPv6 without brackets). Anything else is
 * HOST_INVALID: empty labels, characters outside [a-z0-9-_], labels over 63
 * bytes, names over 253, and every numeric form that is not a canonical
 * IP literal (127.1, 2130706433, 0x7f000001, 0177.0.0.1, 1.2.3.04): glibc
 * would turn those into addresses, so they are neither IPs nor names.
 */
enum host_kind host_parse(const char *host, size_t len, char *out,
                          size_t outcap, struct host_addr *addr);

/*
 * True for loopback, link-local (cloud metadata included), private
 * (RFC 1918, CGNAT 100.64/10, IPv6 unique-local), unspecified, multicast,
 * broadcast and reserved ranges, and IPv6 forms that embed an IPv4 address
 * of those kinds (mapped, compatible, NAT64 64:ff9b::/96, 6to4 2002::/16,
 * Teredo 2001::/32).
 */
bool host_addr_is_private(const struct host_addr *addr);

/*
 * The class that refuses addr, from the same table: "loopback",
 * "link-local", "private", "unspecified", "multicast", "documentation",
 * "benchmarking" or "reserved" (an IPv6 form that carries an IPv4 address
 * takes that address's class); NULL for a globally reachable address.
 */
const char *host_addr_class(const struct host_addr *addr);

#endif
