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
#include "wire/hostparse.h"

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

/* An IPv4 address in dotted decimal, as inet_ntop writes it; by hand,
 * because inet_ntop formats through sprintf, and every forward or route
 * request whose Host names an IPv4 literal comes here (about 1,500 of the
 * proxy's 28,000 instructions on a kept route request). */
static void ipv4_text(const uint8_t b[4], char *buf)
{
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        unsigned v = b[i];
        if (i > 0)
            buf[n++] = '.';
        if (v >= 100)
            buf[n++] = (char)('0' + v / 100);
        if (v >= 10)
            buf[n++] = (char)('0' + v / 10 % 10);
        buf[n++] = (char)('0' + v % 10);
    }
    buf[n] = '\0';
}

static bool write_addr_text(const struct host_addr *a, char *out, size_t outcap)
{
    char buf[INET6_ADDRSTRLEN];
    if (a->family == 4)
        ipv4_text(a->bytes, buf);
    else if (!inet_ntop(AF_INET6, a->bytes, buf, sizeof buf))
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

/*
 * One table per family, read top down, first match wins: each row both
 * decides (a class name: refused by the proxy's private-address rule;
 * NULL: globally reachable) and names the class in the proxy's reasons.
 * An IPv6 row may instead say where an IPv4 address sits in it: that
 * address is then classified by the IPv4 table, so ::ffff:10.0.0.1 is
 * "private" and 64:ff9b::7f00:1 "loopback", exactly as their IPv4 forms.
 */
enum embed { EMBED_NONE = 0, EMBED_LAST4, EMBED_6TO4, EMBED_TEREDO };

struct range {
    uint8_t bytes[16];
    uint8_t prefix;
    uint8_t embed;
    const char *class;
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

/* IANA special-purpose IPv4 blocks that are not globally reachable; the
 * last row: everything else is. */
static const struct range v4_classes[] = {
    {{0}, 8, 0, "unspecified"},    /* "this network" */
    {{10}, 8, 0, "private"},       /* RFC 1918 */
    {{100, 64}, 10, 0, "private"}, /* CGNAT, shared address space */
    {{127}, 8, 0, "loopback"},
    {{169, 254}, 16, 0, "link-local"},     /* cloud metadata included */
    {{172, 16}, 12, 0, "private"},         /* RFC 1918 */
    {{192, 0, 0}, 24, 0, "reserved"},      /* IETF protocol assignments */
    {{192, 0, 2}, 24, 0, "documentation"}, /* TEST-NET-1 */
    {{192, 88, 99}, 24, 0, "reserved"},    /* deprecated 6to4 relay anycast */
    {{192, 168}, 16, 0, "private"},        /* RFC 1918 */
    {{198, 18}, 15, 0, "benchmarking"},
    {{198, 51, 100}, 24, 0, "documentation"}, /* TEST-NET-2 */
    {{203, 0, 113}, 24, 0, "documentation"},  /* TEST-NET-3 */
    {{224}, 4, 0, "multicast"},
    {{240}, 4, 0, "reserved"}, /* broadcast included */
    {{0}, 0, 0, NULL},         /* global */
};

static const struct range v6_classes[] = {
    {{0}, 128, 0, "unspecified"},                     /* :: */
    {{[15] = 1}, 128, 0, "loopback"},                 /* ::1 */
    {{0}, 96, EMBED_LAST4, NULL},                     /* IPv4-compatible */
    {{[10] = 0xff, 0xff}, 96, EMBED_LAST4, NULL},     /* IPv4-mapped */
    {{[8] = 0xff, 0xff}, 96, EMBED_LAST4, NULL},      /* SIIT */
    {{0, 0x64, 0xff, 0x9b}, 96, EMBED_LAST4, NULL},   /* NAT64 */
    {{0, 0x64, 0xff, 0x9b, 0, 1}, 48, 0, "reserved"}, /* local-use NAT64 */
    {{0x20, 0x01, 0, 0}, 32, EMBED_TEREDO, NULL},     /* Teredo */
    {{0x20, 0x01, 0, 2, 0, 0}, 48, 0, "benchmarking"},
    {{0x20, 0x01, 0, 0x10}, 28, 0, "reserved"}, /* ORCHID */
    {{0x20, 0x01, 0, 0x20}, 28, 0, "reserved"}, /* ORCHIDv2 */
    {{0x20, 0x01, 0x0d, 0xb8}, 32, 0, "documentation"},
    {{0x20, 0x02}, 16, EMBED_6TO4, NULL}, /* 6to4 */
    {{0x3f, 0xff}, 20, 0, "documentation"},
    {{0x20}, 3, 0, NULL}, /* global unicast */
    {{0xfe, 0x80}, 10, 0, "link-local"},
    {{0xfc}, 7, 0, "private"}, /* unique-local */
    {{0xff}, 8, 0, "multicast"},
    /* Outside 2000::/3 there is no global unicast: site-local, discard
     * 100::/64 and everything unassigned. */
    {{0}, 0, 0, "reserved"},
};

static const struct range *first_match(const uint8_t *a,
                                       const struct range *table)
{
    while (!in_range(a, table))
        table++; /* each table ends with a /0 row */
    return table;
}

static const char *v4_class(const uint8_t v4[4])
{
    return first_match(v4, v4_classes)->class;
}

static const char *v6_class(const uint8_t *a)
{
    const struct range *r = first_match(a, v6_classes);
    switch (r->embed) {
    case EMBED_LAST4:
        return v4_class(a + 12);
    case EMBED_6TO4:
        return v4_class(a + 2);
    case EMBED_TEREDO: {
        /* Teredo: server at bytes 4..7, client obfuscated in the last 4. */
        uint8_t client[4];
        for (int i = 0; i < 4; i++)
            client[i] = (uint8_t)(a[12 + i] ^ 0xff);
        const char *server = v4_class(a + 4);
        return server ? server : v4_class(client);
    }
    default:
        return r->class;
    }
}

const char *host_addr_class(const struct host_addr *addr)
{
    if (addr && addr->family == 4)
        return v4_class(addr->bytes);
    if (addr && addr->family == 6)
        return v6_class(addr->bytes);
    return "invalid";
}

bool host_addr_is_private(const struct host_addr *addr)
{
    return host_addr_class(addr) != NULL;
}
