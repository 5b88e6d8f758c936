/*
 * proxy_decide.c - the proxy's allow/deny decisions about one request, in
 * the order a request meets them: its host against the allowlist (before
 * any lookup), each address it resolves to (before any dial: never the
 * proxy's own listener, no private class the allowlist does not admit),
 * and a tunnel's TLS server name (before any client byte goes upstream).
 * The address classes and their names come from one table (hostparse.c),
 * the one host_addr_is_private decides by.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "proxy/proxy_decide.h"
#include "wire/tlshello.h"

static bool refuse(struct verdict *v, int status, const char *code)
{
    v->status = status;
    v->code = code;
    return false;
}

bool decide_host(const struct proxy *p, const hostpat_list *list,
                 enum host_kind kind, const char *host,
                 const struct host_addr *addr, int port, bool *reported,
                 struct verdict *v)
{
    bool listed = hostpat_match(list, kind, host, addr, port);
    *reported = !listed && p->opts.report;
    if (listed || *reported)
        return true;
    bool v6 = kind == HOST_IPV6;
    snprintf(v->reason, sizeof v->reason,
             "host %s%s%s:%d is not in the allowlist", v6 ? "[" : "", host,
             v6 ? "]" : "", port);
    return refuse(v, 403, "not_allowed");
}

void proxy_addr_text(const struct host_addr *a, char *out, size_t cap)
{
    if (!inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->bytes, out,
                   (socklen_t)cap))
        snprintf(out, cap, "?");
}

/*
 * Would dialing a:port reach our own listener? Also true for the
 * unspecified address (Linux routes it to a local listener) and for an
 * IPv4-mapped IPv6 form of our address.
 */
static bool is_self(const struct proxy *p, const struct host_addr *a, int port)
{
    static const uint8_t zero[16];
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};
    if (p->is_unix || port != p->port)
        return false;
    const uint8_t *v4 = NULL;
    if (a->family == 4)
        v4 = a->bytes;
    else if (memcmp(a->bytes, mapped, 12) == 0)
        v4 = a->bytes + 12;
    if ((a->family == 4 && memcmp(a->bytes, zero, 4) == 0) ||
        (a->family == 6 && memcmp(a->bytes, zero, 16) == 0) ||
        (v4 && memcmp(v4, zero, 4) == 0))
        return true;
    if (p->self.ss_family == AF_INET && v4)
        return memcmp(&((const struct sockaddr_in *)&p->self)->sin_addr, v4,
                      4) == 0;
    if (p->self.ss_family == AF_INET6 && a->family == 6)
        return memcmp(&((const struct sockaddr_in6 *)&p->self)->sin6_addr,
                      a->bytes, 16) == 0;
    return false;
}

bool decide_addr(const struct proxy *p, const hostpat_list *list,
                 enum host_kind kind, const char *host, int port,
                 const struct host_addr *a, struct verdict *v)
{
    v->addr[0] = '\0';
    v->addr_class = NULL;
    if (is_self(p, a, port)) {
        proxy_addr_text(a, v->addr, sizeof v->addr);
        snprintf(v->reason, sizeof v->reason,
                 "%s:%d is the proxy's own listening address", host, port);
        return refuse(v, 403, "own_address");
    }
    const char *class = host_addr_class(a);
    if (!class || p->opts.allow_private || hostpat_admits_addr(list, a, port))
        return true;
    char text[INET6_ADDRSTRLEN];
    proxy_addr_text(a, text, sizeof text);
    snprintf(v->addr, sizeof v->addr, "%s", text);
    v->addr_class = class;
    if (kind == HOST_NAME)
        snprintf(v->reason, sizeof v->reason,
                 "%s resolves to a %s address (%s), which the allowlist does "
                 "not admit",
                 host, class, text);
    else
        snprintf(v->reason, sizeof v->reason,
                 "%s is a %s address, which the allowlist does not admit", text,
                 class);
    return refuse(v, 403, "private_address");
}

bool decide_parent_addr(const struct proxy *p, const struct host_addr *a,
                        struct verdict *v)
{
    v->addr[0] = '\0';
    v->addr_class = NULL;
    if (!is_self(p, a, p->opts.parent.port))
        return true;
    proxy_addr_text(a, v->addr, sizeof v->addr);
    snprintf(v->reason, sizeof v->reason,
             "the parent proxy %s is this proxy's own listening address",
             p->opts.parent.text);
    return refuse(v, 502, "upstream_proxy_failed");
}

enum sni_verdict decide_sni(const uint8_t *hello, size_t len,
                            enum host_kind kind, const char *host,
                            struct verdict *v)
{
    char name[HOST_NAME_CAP + 1];
    switch (tls_hello_sni(hello, len, name, sizeof name)) {
    case TLS_SNI_NEED_MORE:
        if (len < TLS_HELLO_MAX)
            return SNI_WAIT;
        snprintf(v->reason, sizeof v->reason,
                 "TLS ClientHello larger than the proxy reads");
        break;
    case TLS_SNI_FOUND: {
        char norm[HOST_NAME_CAP];
        enum host_kind k =
            host_parse(name, strlen(name), norm, sizeof norm, NULL);
        /* Any name in a tunnel to an IP address is a mismatch. */
        const char *why = kind != HOST_NAME ? "in a tunnel to the IP address"
                                            : "does not match the CONNECT host";
        if (kind != HOST_NAME || k != HOST_NAME || strcmp(norm, host) != 0) {
            snprintf(v->reason, sizeof v->reason,
                     "TLS server name \"%.*s\" %s %s", HOST_NAME_CAP / 2, name,
                     why, host);
            refuse(v, 403, "sni_mismatch");
            return SNI_REFUSE;
        }
        return SNI_PASS;
    }
    case TLS_SNI_MALFORMED:
        /* Refused: a hello the reader cannot parse might be one the
         * server parses differently. */
        snprintf(v->reason, sizeof v->reason, "malformed TLS ClientHello");
        break;
    case TLS_SNI_ABSENT:
    case TLS_SNI_NOT_TLS:
        return SNI_PASS;
    }
    refuse(v, 403, "tls_malformed");
    return SNI_REFUSE;
}
