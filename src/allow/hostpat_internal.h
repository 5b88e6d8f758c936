/*
 * hostpat_internal.h - what the hostpat files share beyond hostpat.h.
 */
#ifndef ISOLATION_HOSTPAT_INTERNAL_H
#define ISOLATION_HOSTPAT_INTERNAL_H

#include "allow/hostpat.h"

/*
 * hostpat_match, except that port 0 means "no port given": only patterns
 * without a port can admit the host then.
 */
bool hostpat_match_port_or_none(const hostpat_list *list, enum host_kind kind,
                                const char *host, const struct host_addr *addr,
                                int port);

#endif
