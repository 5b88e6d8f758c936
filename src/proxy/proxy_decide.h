/*
 * proxy_decide.h - every allow/deny decision of the proxy about a request,
 * in one unit (proxy_decide.c): the allowlist (and learn mode), the
 * address rule (the proxy's own listener, the private classes), and the
 * TLS server name of a tunnel. Each takes values, not a connection, and
 * says why in a verdict; the caller answers and counts it.
 */
#ifndef ISOLATION_PROXY_DECIDE_H
#define ISOLATION_PROXY_DECIDE_H

#include <stdbool.h>
#include <stddef.h>

#include "proxy/proxy.h"

/* A refusal: its status, event code (a string literal) and reason. */
struct verdict {
    int status;
    const char *code;
    char reason[2 * HOST_NAME_CAP + 96];
    /* decide_addr's refusals: the refused address as text, and its class
     * (private_address; NULL for own_address). */
    char addr[48];
    const char *addr_class;
};

/*
 * May a request for host:port (kind and addr as host_parse gave them) go
 * on under list? Learn mode (opts.report) lets an unlisted host on with
 * *reported set; every later decision still applies to it. False with v
 * filled: refused.
 */
bool decide_host(const struct proxy *p, const hostpat_list *list,
                 enum host_kind kind, const char *host,
                 const struct host_addr *addr, int port, bool *reported,
                 struct verdict *v);

/*
 * May the proxy dial a:port for host (as the client named it, kind its
 * kind)? Never its own listener; a private address (host_addr_class) only
 * with allow_private or an IP pattern of list that admits it. False with v
 * filled: refused.
 */
bool decide_addr(const struct proxy *p, const hostpat_list *list,
                 enum host_kind kind, const char *host, int port,
                 const struct host_addr *a, struct verdict *v);

/*
 * May the proxy dial its parent (opts.parent) at a? The option admits the
 * parent's address whatever its class; only the proxy's own listener is
 * refused (a request would go round through itself without end).
 */
bool decide_parent_addr(const struct proxy *p, const struct host_addr *a,
                        struct verdict *v);

enum sni_verdict { SNI_WAIT = 0, SNI_PASS, SNI_REFUSE };

/*
 * The first len client bytes of a tunnel to host (kind its kind): a TLS
 * ClientHello must name host, or be absent (not TLS, no server name); a
 * hello naming another host, one naming any host in a tunnel to an IP
 * address, and one that cannot be read are refused (v filled). SNI_WAIT:
 * more bytes are needed (at most TLS_HELLO_MAX).
 */
enum sni_verdict decide_sni(const uint8_t *hello, size_t len,
                            enum host_kind kind, const char *host,
                            struct verdict *v);

/* An address as text for reasons ("?" if it has none). */
void proxy_addr_text(const struct host_addr *a, char *out, size_t cap);

#endif
