/*
 * hostpat.c - host patterns: parse, compile once, match on every request.
 *
 * A compiled list is one immutable block: exact names and wildcard suffixes
 * in an open-addressing hash table, IP literals and CIDR blocks as masked
 * prefixes. Matching allocates nothing; a name costs one probe plus one per
 * dot when the list has wildcards.
 */
#include "allow/hostpat.h"
#include "allow/hostpat_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACCEPTED                                                               \
    "accepted: name, *.name, IPv4, [IPv6], each with an optional :port, or "   \
    "a CIDR block like 10.0.0.0/8"

enum pat_kind { PAT_NAME, PAT_WILDCARD, PAT_IP };

/* One parsed pattern. For PAT_IP, prefix is 32/128 for a single address. */
struct pattern {
    enum pat_kind kind;
    int port; /* 0: any port */
    size_t name_len;
    char name[HOST_NAME_CAP];
    struct host_addr addr;
    int prefix;
};

struct name_rule {
    uint32_t hash;
    uint16_t len;
    uint16_t port;
    bool wildcard;
    const char *name;
};

struct ip_rule {
    struct host_addr addr; /* host bits are zero */
    int prefix;
    int port;
};

struct hostpat_list {
    size_t n_names, n_ips, table_mask;
    bool has_wildcards;
    struct name_rule *names;
    struct ip_rule *ips;
    uint32_t *table; /* index + 1 into names; 0: empty slot */
};

/* --- errors ------------------------------------------------------------- */

/* Quotes the pattern for a message: printable ASCII, the rest escaped. */
static void quote(const char *s, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    const size_t shown = len > 96 ? 96 : len;
    for (size_t i = 0; i < shown && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            out[o++] = (char)c;
        } else {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        }
    }
    if (shown < len && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o < cap ? o : cap - 1] = '\0';
}

static bool fail(char *err, size_t errcap, const char *pattern, size_t len,
                 const char *why)
{
    if (err && errcap > 0) {
        char q[512];
        quote(pattern, len, q, sizeof q);
        snprintf(err, errcap, "host pattern \"%s\" is invalid: %s (%s)", q, why,
                 ACCEPTED);
    }
    return false;
}

/* --- parsing ------------------------------------------------------------ */

/* 1..65535 in decimal, no sign, no leading zero. */
static int parse_port(const char *s, size_t len)
{
    if (len == 0 || len > 5 || s[0] == '0')
        return 0;
    int value = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        value = value * 10 + (s[i] - '0');
    }
    return value <= 65535 ? value : 0;
}

static bool host_bits_clear(const struct host_addr *a, int prefix)
{
    int total = a->family == 4 ? 4 : 16;
    for (int i = 0; i < total; i++) {
        int keep = prefix - i * 8;
        uint8_t mask = keep >= 8   ? 0xff
                       : keep <= 0 ? 0
                                   : (uint8_t)(0xff << (8 - keep));
        if (a->bytes[i] & (uint8_t)~mask)
            return false;
    }
    return true;
}

static bool parse_cidr(const char *s, size_t len, size_t slash,
                       struct pattern *p, char *err, size_t errcap)
{
    char text[HOST_NAME_CAP];
    const char *bits = s + slash + 1;
    size_t bits_len = len - slash - 1;
    if (s[0] == '[')
        return fail(err, errcap, s, len,
                    "a CIDR block is written without brackets and without a "
                    "port, e.g. fd00::/8");
    enum host_kind k = host_parse(s, slash, text, sizeof text, &p->addr);
    if (k != HOST_IPV4 && k != HOST_IPV6)
        return fail(err, errcap, s, len,
                    memchr(s, ':', len) && memchr(bits, ':', bits_len)
                        ? "a CIDR block takes no port"
                        : "a '/' is allowed only in a CIDR block, after a "
                          "canonical IP address");
    int max = k == HOST_IPV4 ? 32 : 128;
    int prefix = 0;
    bool digits_ok =
        bits_len > 0 && bits_len <= 3 && !(bits_len > 1 && bits[0] == '0');
    for (size_t i = 0; digits_ok && i < bits_len; i++) {
        if (bits[i] < '0' || bits[i] > '9')
            digits_ok = false;
        else
            prefix = prefix * 10 + (bits[i] - '0');
    }
    if (!digits_ok || prefix > max) {
        if (memchr(bits, ':', bits_len))
            return fail(err, errcap, s, len, "a CIDR block takes no port");
        return fail(err, errcap, s, len,
                    k == HOST_IPV4
                        ? "the prefix length of an IPv4 block is 0..32"
                        : "the prefix length of an IPv6 block is 0..128");
    }
    if (!host_bits_clear(&p->addr, prefix))
        return fail(err, errcap, s, len,
                    "the address has bits set beyond the prefix length; "
                    "write the network address of the block");
    p->kind = PAT_IP;
    p->prefix = prefix;
    p->port = 0;
    return true;
}

/* Says why host_parse refused a name, for the message. */
static const char *name_problem(const char *host, size_t len)
{
    bool numeric_looking = host[0] >= '0' && host[0] <= '9';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)host[i];
        if (!(c == '.' || (c >= '0' && c <= '9') || c == 'x' || c == 'X' ||
              (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            numeric_looking = false;
    }
    if (numeric_looking)
        return "a numeric host must be a canonical dotted-quad IPv4 (no "
               "shorthand, decimal, hex, octal or leading zeros)";
    if (len > 0 && host[len - 1] == '.')
        len--;
    if (len > 253)
        return "the name is longer than 253 bytes";
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && host[i] != '.') {
            unsigned char c = (unsigned char)host[i];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                  (c >= 'A' && c <= 'Z') || c == '-' || c == '_'))
                return "a label has a character other than letters, "
                       "digits, '-' and '_'";
            continue;
        }
        size_t label = i - start;
        if (label == 0)
            return "a label is empty";
        if (label > 63)
            return "a label is longer than 63 bytes";
        if (host[start] == '-' || host[i - 1] == '-')
            return "a label starts or ends with '-'";
        start = i + 1;
    }
    return "the last label is a number (a resolver would read the name "
           "as an address)";
}

static bool parse_pattern(const char *s, size_t len, struct pattern *p,
                          char *err, size_t errcap)
{
    memset(p, 0, sizeof *p);
    if (!s || len == 0)
        return fail(err, errcap, "", 0, "the pattern is empty");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f)
            return fail(err, errcap, s, len,
                        "whitespace, control and non-ASCII characters are "
                        "not allowed (IDN names go in their xn-- form)");
    }
    for (size_t i = 0; i + 2 < len; i++)
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/')
            return fail(err, errcap, s, len,
                        "a pattern is a host, not a URL: drop the scheme");
    if (memchr(s, '@', len))
        return fail(err, errcap, s, len, "userinfo ('@') is not allowed");
    const char *slash = memchr(s, '/', len);
    if (slash)
        return parse_cidr(s, len, (size_t)(slash - s), p, err, errcap);

    /* Split off the port. */
    size_t host_len = len;
    const char *port_text = NULL;
    if (s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return fail(err, errcap, s, len, "'[' without a closing ']'");
        host_len = (size_t)(close - s) + 1;
        if (host_len < len) {
            if (s[host_len] != ':')
                return fail(err, errcap, s, len, "only :port may follow ']'");
            port_text = s + host_len + 1;
        }
    } else {
        const char *colon = memchr(s, ':', len);
        if (colon) {
            if (memchr(colon + 1, ':', len - (size_t)(colon - s) - 1))
                return fail(err, errcap, s, len,
                            "an IPv6 address must be in brackets, e.g. "
                            "[2001:db8::1] or [2001:db8::1]:443");
            host_len = (size_t)(colon - s);
            port_text = colon + 1;
        }
    }
    if (port_text) {
        p->port = parse_port(port_text, len - (size_t)(port_text - s));
        if (p->port == 0)
            return fail(err, errcap, s, len,
                        "the port must be a number from 1 to 65535, "
                        "without leading zeros");
    }
    if (host_len == 0)
        return fail(err, errcap, s, len, "the host is empty");

    const char *host = s;
    if (host_len >= 2 && host[0] == '*' && host[1] == '.') {
        p->kind = PAT_WILDCARD;
        host += 2;
        host_len -= 2;
    } else {
        p->kind = PAT_NAME;
    }
    if (p->kind == PAT_WILDCARD && host_len == 0)
        return fail(err, errcap, s, len, "'*.' must be followed by a name");
    if (memchr(host, '*', host_len))
        return fail(err, errcap, s, len,
                    "'*' is allowed only as a leading '*.' before a name");
    enum host_kind k =
        host_parse(host, host_len, p->name, sizeof p->name, &p->addr);
    if (k == HOST_INVALID) {
        if (host[0] == '[')
            return fail(err, errcap, s, len,
                        memchr(host, '%', host_len)
                            ? "an IPv6 zone id ('%') is not allowed"
                            : "not a valid IPv6 address in brackets");
        return fail(err, errcap, s, len, name_problem(host, host_len));
    }
    if (k != HOST_NAME) {
        if (p->kind == PAT_WILDCARD)
            return fail(err, errcap, s, len,
                        "a wildcard applies to names, not IP addresses; use "
                        "a CIDR block");
        p->kind = PAT_IP;
        p->prefix = k == HOST_IPV4 ? 32 : 128;
        return true;
    }
    p->name_len = strlen(p->name);
    return true;
}

bool hostpat_valid(const char *pattern, size_t len, char *err, size_t errcap)
{
    struct pattern p;
    return parse_pattern(pattern, len, &p, err, errcap);
}

/* --- compiled lists ----------------------------------------------------- */

static uint32_t name_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h;
}

static size_t table_size_for(size_t n)
{
    size_t size = 8;
    while (size < n * 2)
        size *= 2;
    return size;
}

hostpat_list *hostpat_compile(const char *const *patterns, const size_t *lens,
                              size_t n, char *err, size_t errcap)
{
    struct pattern *parsed = n ? calloc(n, sizeof *parsed) : NULL;
    if (n && !parsed) {
        if (err && errcap)
            snprintf(err, errcap, "out of memory compiling host patterns");
        return NULL;
    }
    size_t n_names = 0, n_ips = 0, name_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!parse_pattern(patterns[i], lens[i], &parsed[i], err, errcap)) {
            free(parsed);
            return NULL;
        }
        if (parsed[i].kind == PAT_IP) {
            n_ips++;
        } else {
            n_names++;
            name_bytes += parsed[i].name_len + 1;
        }
    }
    size_t table_size = table_size_for(n_names);
    /* One block: header, name rules, ip rules, hash table, name text. */
    size_t off_names = sizeof(struct hostpat_list);
    size_t off_ips = off_names + n_names * sizeof(struct name_rule);
    off_ips = (off_ips + 15) & ~(size_t)15;
    size_t off_table = off_ips + n_ips * sizeof(struct ip_rule);
    size_t off_text = off_table + table_size * sizeof(uint32_t);
    char *block = calloc(1, off_text + name_bytes);
    if (!block) {
        free(parsed);
        if (err && errcap)
            snprintf(err, errcap, "out of memory compiling host patterns");
        return NULL;
    }
    hostpat_list *list = (hostpat_list *)(void *)block;
    list->names = (struct name_rule *)(void *)(block + off_names);
    list->ips = (struct ip_rule *)(void *)(block + off_ips);
    list->table = (uint32_t *)(void *)(block + off_table);
    list->table_mask = table_size - 1;
    char *text = block + off_text;
    for (size_t i = 0; i < n; i++) {
        struct pattern *p = &parsed[i];
        if (p->kind == PAT_IP) {
            struct ip_rule *r = &list->ips[list->n_ips++];
            r->addr = p->addr;
            r->prefix = p->prefix;
            r->port = p->port;
            continue;
        }
        struct name_rule *r = &list->names[list->n_names];
        memcpy(text, p->name, p->name_len + 1);
        r->name = text;
        text += p->name_len + 1;
        r->len = (uint16_t)p->name_len;
        r->hash = name_hash(p->name, p->name_len);
        r->port = (uint16_t)p->port;
        r->wildcard = p->kind == PAT_WILDCARD;
        list->has_wildcards |= r->wildcard;
        size_t slot = r->hash & list->table_mask;
        while (list->table[slot])
            slot = (slot + 1) & list->table_mask;
        list->table[slot] = (uint32_t)(++list->n_names);
    }
    free(parsed);
    return list;
}

void hostpat_free(hostpat_list *list)
{
    free(list);
}

static bool port_ok(int rule_port, int port)
{
    return rule_port == 0 || rule_port == port;
}

static bool name_lookup(const hostpat_list *list, const char *name, size_t len,
                        bool wildcard, int port)
{
    uint32_t hash = name_hash(name, len);
    for (size_t slot = hash & list->table_mask; list->table[slot];
         slot = (slot + 1) & list->table_mask) {
        const struct name_rule *r = &list->names[list->table[slot] - 1];
        if (r->hash == hash && r->len == len && r->wildcard == wildcard &&
            port_ok(r->port, port) && memcmp(r->name, name, len) == 0)
            return true;
    }
    return false;
}

static bool ip_rule_contains(const struct ip_rule *r, const struct host_addr *a)
{
    if (r->addr.family != a->family)
        return false;
    int full = r->prefix / 8, rest = r->prefix % 8;
    if (memcmp(r->addr.bytes, a->bytes, (size_t)full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a->bytes[full] & mask) == r->addr.bytes[full];
}

static bool admits_addr(const hostpat_list *list, const struct host_addr *addr,
                        int port)
{
    for (size_t i = 0; i < list->n_ips; i++)
        if (port_ok(list->ips[i].port, port) &&
            ip_rule_contains(&list->ips[i], addr))
            return true;
    return false;
}

bool hostpat_admits_addr(const hostpat_list *list, const struct host_addr *addr,
                         int port)
{
    if (!list || !addr || port < 1 || port > 65535)
        return false;
    return admits_addr(list, addr, port);
}

bool hostpat_match_port_or_none(const hostpat_list *list, enum host_kind kind,
                                const char *host, const struct host_addr *addr,
                                int port)
{
    if (!list || !host || port < 0 || port > 65535)
        return false;
    if (kind == HOST_IPV4 || kind == HOST_IPV6) {
        struct host_addr parsed;
        if (!addr) {
            if (host_parse(host, strlen(host), NULL, 0, &parsed) != kind)
                return false;
            addr = &parsed;
        }
        return admits_addr(list, addr, port);
    }
    if (kind != HOST_NAME || list->n_names == 0)
        return false;
    size_t len = strlen(host);
    if (name_lookup(list, host, len, false, port))
        return true;
    if (!list->has_wildcards)
        return false;
    /* Every proper suffix after a dot: *.example.com never admits the apex. */
    for (size_t i = 0; i < len; i++)
        if (host[i] == '.' &&
            name_lookup(list, host + i + 1, len - i - 1, true, port))
            return true;
    return false;
}

bool hostpat_match(const hostpat_list *list, enum host_kind kind,
                   const char *host, const struct host_addr *addr, int port)
{
    if (port < 1 || port > 65535)
        return false;
    return hostpat_match_port_or_none(list, kind, host, addr, port);
}
