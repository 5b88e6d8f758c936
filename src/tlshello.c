/* tlshello.c - placeholder until its issue lands. */
#include "tlshello.h"

enum tls_sni tls_hello_sni(const uint8_t *buf, size_t len, char *name,
                           size_t namecap)
{
    (void)buf, (void)len, (void)name, (void)namecap;
    return TLS_SNI_NOT_TLS;
}
