/*
 * listen.c - the port argument and the loopback listener of isolation-bridge.
 */
#include "listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int bridge_parse_port(const char *s)
{
    long v = 0;
    if (*s == '\0' || strlen(s) > 5)
        return -1;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9')
            return -1;
        v = v * 10 + (*c - '0');
    }
    return v >= 1 && v <= 65535 ? (int)v : -1;
}

int bridge_parse_ports(const char *s, int ports[BRIDGE_MAX_PORTS])
{
    const char *comma = strchr(s, ',');
    if (comma == NULL) {
        ports[0] = bridge_parse_port(s);
        return ports[0] < 0 ? -1 : 1;
    }
    char first[8];
    size_t len = (size_t)(comma - s);
    if (len >= sizeof first)
        return -1;
    memcpy(first, s, len);
    first[len] = '\0';
    ports[0] = bridge_parse_port(first);
    ports[1] = bridge_parse_port(comma + 1); /* a second comma: not a digit */
    if (ports[0] < 0 || ports[1] < 0 || ports[0] == ports[1])
        return -1;
    return 2;
}

int bridge_listen_all(const int *ports, int n, int type_flags, int *fds,
                      int *failed_port)
{
    for (int i = 0; i < n; i++) {
        fds[i] = bridge_listen_loopback(ports[i], type_flags);
        if (fds[i] < 0) {
            int err = errno;
            *failed_port = ports[i];
            while (i-- > 0)
                close(fds[i]);
            errno = err;
            return -1;
        }
    }
    return 0;
}

int bridge_listen_loopback(int port, int type_flags)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | type_flags, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(fd, SOMAXCONN) < 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}
