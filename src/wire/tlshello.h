/*
 * tlshello.h - reads the server name (SNI) from a TLS ClientHello that may
 * arrive split over several reads and several TLS records. Pure, no
 * allocation; has a fuzz target in fuzz/.
 */
#ifndef ISOLATION_TLSHELLO_H
#define ISOLATION_TLSHELLO_H

#include <stddef.h>
#include <stdint.h>

/* The proxy buffers at most this much of a tunnel's first bytes. */
#define TLS_HELLO_MAX 16384

enum tls_sni {
    TLS_SNI_NEED_MORE = 0, /* a ClientHello so far; give it more bytes */
    TLS_SNI_FOUND,         /* host_name found, copied to name */
    TLS_SNI_ABSENT,        /* a whole ClientHello with no server name */
    TLS_SNI_NOT_TLS,       /* the first bytes are not a TLS handshake */
    TLS_SNI_MALFORMED      /* TLS framing, but a broken or oversized hello */
};

/*
 * Looks at buf[0..len), the first bytes the client sent into a tunnel.
 * On TLS_SNI_FOUND, name (namecap bytes) holds the host_name, NUL-terminated
 * and unchanged (the caller normalizes it with host_parse). A hello longer
 * than TLS_HELLO_MAX is TLS_SNI_MALFORMED.
 */
enum tls_sni tls_hello_sni(const uint8_t *buf, size_t len, char *name,
                           size_t namecap);

#endif
