/*
 * hostparse.c - strict parsing of one host (a name, a canonical IPv4
 * dotted-quad or an IPv6 literal) and the address classes the proxy refuses.
 *
 * The rule that matters: text that a resolver could turn into an address
 * without DNS must either be a canonical IP literal, which we then check as
 * an address, or be refused. glibc's inet_aton accepts 127.1, 2130706433,
 * 0x7f000001 and 0177.0.0.1; a check that treated those as names would let
 * a request name one thing and dial another.
 */
#include "hostparse.h"

#include <arpa/inet.h>
#include <string.h>

#define IPV6_TEXT_MAX 45 /* longest IPv6 text inet_pton can accept */

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Exactly four decimal parts 0..255, no leading zeros, nothing else. */
static bool parse_ipv4(const char *s, size_t len, uint8_t out[4])
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= len || s[i] != '.')
                return false;
            i++;
        }
        size_t start = i;
        unsigned value = 0;
        while (i < len && is_digit((unsigned char)s[i]) && i - start < 3) {
            value = value * 10 + (unsigned)(s[i] - '0');
            i++;
        }
        size_t digits = i - start;
        if (digits == 0 || value > 255 || (digits > 1 && s[start] == '0'))
            return false;
        out[part] = (uint8_t)value;
    }
    return i == len;
}

/* Any IPv6 text inet_pton accepts; a zone id (%) is refused by inet_pton. */
static bool parse_ipv6(const char *s, size_t len, uint8_t out[16])
{
    char buf[IPV6_TEXT_MAX + 1];
    if (len == 0 || len > IPV6_TEXT_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!is_hex(c) && c != ':' && c != '.')
            return false;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    return inet_pton(AF_INET6, buf, out) == 1;
}

/*
 * The last label decides whether a resolver would read the name as a
 * number: all digits (decimal or octal) or 0x followed by hex digits.
 */
static bool label_is_numeric(const char *label, size_t len)
{
    if (len >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X')) {
        for (size_t i = 2; i < len; i++)
            if (!is_hex((unsigned char)label[i]))
                return false;
        return true;
    }
    for (size_t i = 0; i < len; i++)
        if (!is_digit((unsigned char)label[i]))
            return false;
    return true;
}

/*
 * Labels of [a-z0-9_-], 1..63 bytes, not starting or ending with '-'
 * (RFC 1123 host names; '_' is tolerated because real service hosts use
 * it); at most 253 bytes once one trailing dot is dropped.
 */
static bool parse_name(const char *s, size_t len, char *out, size_t outcap)
{
    if (len > 0 && s[len - 1] == '.')
        len--;
    if (len == 0 || len > 253 || (out && outcap < len + 1))
        return false;
    size_t label_start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || s[i] == '.') {
            size_t label_len = i - label_start;
            if (label_len == 0 || label_len > 63)
                return false;
            if (s[label_start] == '-' || s[i - 1] == '-')
                return false;
            if (i == len && label_is_numeric(s + label_start, label_len))
                return false;
            label_start = i + 1;
            continue;
        }
        unsigned char c = lower((unsigned char)s[i]);
        if (!(is_digit(c) || (c >= 'a' && c <= 'z') || c == '-' || c == '_'))
            return false;
    }
    if (out) {
        for (size_t i = 0; i < len; i++)
            out[i] = (char)lower((unsigned char)s[i]);
        out[len] = '\0';
    }
    return true;
}

static bool write_addr_text(const struct host_addr *a, char *out, size_t outcap)
{
    char buf[INET6_ADDRSTRLEN];
    if (!inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->bytes, buf,
                   sizeof buf))
        return false;
    size_t n = strlen(buf);
    if (outcap < n + 1)
        return false;
    memcpy(out, buf, n + 1);
    return true;
}

enum host_kind host_parse(const char *host, size_t len, char *out,
                          size_t outcap, struct host_addr *addr)
{
    struct host_addr a;
    memset(&a, 0, sizeof a);
    if (!host || len == 0)
        return HOST_INVALID;
    if (host[0] == '[') {
        if (len < 3 || host[len - 1] != ']' ||
            !parse_ipv6(host + 1, len - 2, a.bytes))
            return HOST_INVALID;
        a.family = 6;
    } else if (memchr(host, ':', len)) {
        if (!parse_ipv6(host, len, a.bytes))
            return HOST_INVALID;
        a.family = 6;
    } else if (parse_ipv4(host, len, a.bytes)) {
        a.family = 4;
    } else {
        return parse_name(host, len, out, outcap) ? HOST_NAME : HOST_INVALID;
    }
    if (out && !write_addr_text(&a, out, outcap))
        return HOST_INVALID;
    if (addr)
        *addr = a;
    return a.family == 4 ? HOST_IPV4 : HOST_IPV6;
}

/* --- address classes ---------------------------------------------------- */

struct range {
    uint8_t bytes[16];
    int prefix;
};

static bool in_range(const uint8_t *a, const struct range *r)
{
    int full = r->prefix / 8, rest = r->prefix % 8;
    if (memcmp(a, r->bytes, (size_t)full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[full] & mask) == (r->bytes[full] & mask);
}

/* IANA special-purpose IPv4 blocks that are not globally reachable. */
static const struct range v4_private[] = {
    {{0}, 8},             /* "this network", unspecified */
    {{10}, 8},            /* RFC 1918 */
    {{100, 64}, 10},      /* CGNAT */
    {{127}, 8},           /* loopback */
    {{169, 254}, 16},     /* link-local, cloud metadata */
    {{172, 16}, 12},      /* RFC 1918 */
    {{192, 0, 0}, 24},    /* IETF protocol assignments */
    {{192, 0, 2}, 24},    /* TEST-NET-1 */
    {{192, 88, 99}, 24},  /* deprecated 6to4 relay anycast */
    {{192, 168}, 16},     /* RFC 1918 */
    {{198, 18}, 15},      /* benchmarking */
    {{198, 51, 100}, 24}, /* TEST-NET-2 */
    {{203, 0, 113}, 24},  /* TEST-NET-3 */
    {{224}, 4},           /* multicast */
    {{240}, 4},           /* reserved, broadcast included */
};

static bool v4_is_private(const uint8_t v4[4])
{
    for (size_t i = 0; i < sizeof v4_private / sizeof v4_private[0]; i++)
        if (in_range(v4, &v4_private[i]))
            return true;
    return false;
}

/* IPv6 blocks that carry an IPv4 address in their last four bytes. */
static const struct range v6_embeds_last4[] = {
    {{0}, 96},                                        /* compatible */
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96}, /* mapped */
    {{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0}, 96}, /* SIIT */
    {{0, 0x64, 0xff, 0x9b}, 96},                      /* NAT64 */
};

/* Inside 2000::/3 but not globally reachable. */
static const struct range v6_private[] = {
    {{0x64, 0xff, 0x9b, 0x00, 0x01}, 48},       /* local-use NAT64 */
    {{0x20, 0x01, 0x00, 0x02, 0x00, 0x00}, 48}, /* benchmarking */
    {{0x20, 0x01, 0x00, 0x10}, 28},             /* ORCHID */
    {{0x20, 0x01, 0x00, 0x20}, 28},             /* ORCHIDv2 */
    {{0x20, 0x01, 0x0d, 0xb8}, 32},             /* documentation */
    {{0x3f, 0xff}, 20},                         /* documentation */
};

static const struct range v6_teredo = {{0x20, 0x01, 0x00, 0x00}, 32};
static const struct range v6_6to4 = {{0x20, 0x02}, 16};
static const struct range v6_global = {{0x20}, 3};

static bool v6_is_private(const uint8_t *a)
{
    for (size_t i = 0; i < sizeof v6_private / sizeof v6_private[0]; i++)
        if (in_range(a, &v6_private[i]))
            return true;
    for (size_t i = 0; i < sizeof v6_embeds_last4 / sizeof v6_embeds_last4[0];
         i++)
        if (in_range(a, &v6_embeds_last4[i]))
            return v4_is_private(a + 12); /* :: and ::1 land in 0/8 */
    if (in_range(a, &v6_6to4))
        return v4_is_private(a + 2);
    if (in_range(a, &v6_teredo)) {
        /* Teredo: server at bytes 4..7, client obfuscated in the last 4. */
        uint8_t client[4];
        for (int i = 0; i < 4; i++)
            client[i] = (uint8_t)(a[12 + i] ^ 0xff);
        return v4_is_private(a + 4) || v4_is_private(client);
    }
    /*
     * Outside 2000::/3 there is no global unicast: loopback, link-local
     * fe80::/10, site-local, unique-local fc00::/7, multicast ff00::/8,
     * discard 100::/64 and everything unassigned.
     */
    return !in_range(a, &v6_global);
}

bool host_addr_is_private(const struct host_addr *addr)
{
    if (!addr)
        return true;
    if (addr->family == 4)
        return v4_is_private(addr->bytes);
    if (addr->family == 6)
        return v6_is_private(addr->bytes);
    return true;
}
