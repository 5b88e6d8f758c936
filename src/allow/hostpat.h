/*
 * hostpat.h - host patterns (the allowlist) over hostparse.h's hosts.
 *
 * Shared by isolation.config (validation of allow_hosts),
 * isolation.host_allowed, and the proxy (every request's check). A compiled
 * list is immutable: the proxy swaps whole lists on set_allow. Lua-free:
 * hostpat_lua.h is the Lua face (hostpat_from_lua).
 */
#ifndef ISOLATION_HOSTPAT_H
#define ISOLATION_HOSTPAT_H

#include <stdbool.h>
#include <stddef.h>

#include "wire/hostparse.h"

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
