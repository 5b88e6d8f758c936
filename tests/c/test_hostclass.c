/*
 * test_hostclass.c - the address classes of hostparse.c's one table: what
 * the proxy's private-address rule refuses and the name its reasons give,
 * for IPv4, IPv6, and IPv6 forms that carry an IPv4 address (named by the
 * address they carry).
 */
#include <string.h>

#include "wire/hostparse.h"
#include "runner.h"

struct class_case {
    const char *text;
    const char *class; /* NULL: globally reachable */
};

static const struct class_case cases[] = {
    {"0.0.0.0", "unspecified"},
    {"0.1.2.3", "unspecified"},
    {"10.0.0.1", "private"},
    {"100.64.0.1", "private"},
    {"100.128.0.1", NULL},
    {"127.0.0.1", "loopback"},
    {"169.254.169.254", "link-local"},
    {"172.16.0.1", "private"},
    {"172.32.0.1", NULL},
    {"192.0.0.8", "reserved"},
    {"192.0.2.1", "documentation"},
    {"192.88.99.1", "reserved"},
    {"192.168.1.1", "private"},
    {"198.18.0.1", "benchmarking"},
    {"198.51.100.1", "documentation"},
    {"203.0.113.1", "documentation"},
    {"224.0.0.1", "multicast"},
    {"240.0.0.1", "reserved"},
    {"255.255.255.255", "reserved"},
    {"93.184.215.14", NULL},
    {"::", "unspecified"},
    {"::1", "loopback"},
    {"::10.0.0.1", "private"},
    {"::ffff:10.0.0.1", "private"},
    {"::ffff:127.0.0.1", "loopback"},
    {"::ffff:169.254.169.254", "link-local"},
    {"::ffff:93.184.215.14", NULL},
    {"::ffff:0:10.0.0.1", "private"},
    {"64:ff9b::7f00:1", "loopback"},
    {"64:ff9b::a00:1", "private"},
    {"64:ff9b::5db8:d70e", NULL},
    {"64:ff9b:1::1", "reserved"},
    {"2002:a00:1::1", "private"},
    {"2002:5db8:d70e::1", NULL},
    {"2001:0:a00:1::1", "private"},              /* Teredo server 10.0.0.1 */
    {"2001:0:5db8:d70e::80ff:fffe", "loopback"}, /* client 127.0.0.1 */
    {"2001:0:5db8:d70e::a247:28f1", NULL},       /* client 93.184.215.14 */
    {"2001:2::1", "benchmarking"},
    {"2001:10::1", "reserved"},
    {"2001:20::1", "reserved"},
    {"2001:db8::1", "documentation"},
    {"3fff::1", "documentation"},
    {"2606:4700::1", NULL},
    {"fe80::1", "link-local"},
    {"fec0::1", "reserved"},
    {"fc00::1", "private"},
    {"fd00::1", "private"},
    {"ff02::1", "multicast"},
    {"100::1", "reserved"},
};

void test_hostclass(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct class_case *t = &cases[i];
        struct host_addr a;
        char out[HOST_NAME_CAP];
        enum host_kind k =
            host_parse(t->text, strlen(t->text), out, sizeof out, &a);
        CHECKM(k == HOST_IPV4 || k == HOST_IPV6, "%s parses", t->text);
        const char *got = host_addr_class(&a);
        CHECKM(t->class ? got && strcmp(got, t->class) == 0 : got == NULL,
               "%s: class %s, expected %s", t->text, got ? got : "(global)",
               t->class ? t->class : "(global)");
        CHECKM(host_addr_is_private(&a) == (t->class != NULL),
               "%s: the decision follows the class", t->text);
    }
    CHECK(strcmp(host_addr_class(NULL), "invalid") == 0);
}
