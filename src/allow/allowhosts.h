/*
 * allowhosts.h - what default_allow_hosts shares between its two files:
 * the http(s) URL parser and the npm registry lookup.
 */
#ifndef ISOLATION_ALLOWHOSTS_H
#define ISOLATION_ALLOWHOSTS_H

#include "allow/hostpat.h"

#include <stdbool.h>
#include <stddef.h>

struct http_url {
    enum host_kind kind;
    char host[HOST_NAME_CAP + 2]; /* canonical; IPv6 in brackets */
    int port;                     /* explicit, or the scheme's */
    bool default_port;            /* port is the scheme's default */
};

/*
 * Parses http://host[:port][/...] or https://...; the scheme is
 * case-insensitive. userinfo is skipped when allow_userinfo, else an error.
 * On failure *why says what is wrong.
 */
bool allowhosts_parse_url(const char *url, size_t len, bool allow_userinfo,
                          struct http_url *out, const char **why);

/*
 * The npm registry's pattern ("host" or "host:port" when the port is not
 * the scheme's) from npm's own configuration, in npm's order: the
 * npm_config_registry environment variable, the user npmrc, the global
 * npmrc files, npm's builtin npmrc, then npm's built-in default read from
 * the installed npm package (cached for the process). False when none is
 * found or the configured URL does not parse.
 */
bool allowhosts_npm_registry(char *out, size_t outcap);

#endif
