/*
 * hostpat.h - strict host parsing, host patterns and address classes.
 *
 * Shared by isolation.config (validation of allow_hosts),
 * isolation.host_allowed, and the proxy (every request's check). A compiled
 * list is immutable: the proxy swaps whole lists on set_allow.
 */
#ifndef ISOLATION_HOSTPAT_H
#define ISOLATION_HOSTPAT_H

#include <lua.h>
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

typedef struct hostpat_list hostpat_list;

/*
 * Checks one pattern. On failure writes a message to err (errcap bytes) that
 * quotes the pattern and says what is accepted, without a prefix.
 */
bool hostpat_valid(const char *pattern, size_t len, char *err, size_t errcap);

/*
 * Compiles n patterns. NULL on the first invalid one (err as above) or out of
 * memory (err says so). n == 0 gives an empty list that matches nothing.
 */
hostpat_list *hostpat_compile(const char *const *patterns, const size_t *lens,
                              size_t n, char *err, size_t errcap);

/*
 * Compiles the Lua array at idx (a table of strings; a map, a hole or a
 * non-string element is an error naming `field`). NULL with err on failure;
 * never raises.
 */
hostpat_list *hostpat_from_lua(lua_State *L, int idx, const char *field,
                               char *err, size_t errcap);

void hostpat_free(hostpat_list *list);

/*
 * Does the list admit this host (already parsed by host_parse) on port? A
 * name matches name and wildcard patterns; an IP literal matches only IP and
 * CIDR patterns. port is 1..65535.
 */
bool hostpat_match(const hostpat_list *list, enum host_kind kind,
                   const char *host, const struct host_addr *addr, int port);

/*
 * Does an IP or CIDR pattern (with its port, if it has one) admit this
 * resolved address? Lets a private answer through the proxy's address check.
 */
bool hostpat_admits_addr(const hostpat_list *list, const struct host_addr *addr,
                         int port);

#endif
