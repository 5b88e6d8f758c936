/*
 * sendfd SOCKET KIND: a process inside a container handing the proxy a
 * descriptor over its unix socket (SCM_RIGHTS) with the handover message of
 * bridge "pass", as an attacker would (spec/containers_spec.lua builds it
 * static: the image has no compiler, no python, no libc of its own need).
 * KIND: connected (a connected TCP socket), file (a file with "secret" in
 * it), any_address (a listener on 0.0.0.0), loopback (a listener on
 * 127.0.0.1: valid, but the starter holds the proxy's slots). Prints
 * KIND_reply=<the proxy's first line or <eof>>, then what the proxy did
 * with the descriptor: file=<its contents>, peer=<what the connected
 * socket's peer received, <nothing> when nothing>, KIND_reached=<1 when a
 * client on the listener got any byte back within 1 s, else 0>.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static const char MAGIC[] = "\0isolation-pass 1\n";

static int listener(in_addr_t addr, struct sockaddr_in *bound)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = addr};
    socklen_t len = sizeof *bound;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(s, 8) < 0 || getsockname(s, (struct sockaddr *)bound, &len) < 0)
        return -1;
    return s;
}

static int send_fd(int sock, int fd)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)MAGIC, .iov_len = sizeof MAGIC - 1};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.buf,
                       .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof fd);
    return sendmsg(sock, &m, 0) == (ssize_t)iov.iov_len ? 0 : -1;
}

/* Whether a client of the listener at a gets a byte within 1 s. */
static int reached(const struct sockaddr_in *a)
{
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = *a;
    if (to.sin_addr.s_addr == htonl(INADDR_ANY))
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c < 0 || connect(c, (struct sockaddr *)&to, sizeof to) < 0)
        return 0;
    const char req[] = "GET http://blocked.example.net/ HTTP/1.1\r\n"
                       "Host: blocked.example.net\r\n\r\n";
    if (write(c, req, sizeof req - 1) < 0)
        return 0;
    struct pollfd p = {.fd = c, .events = POLLIN};
    char b;
    int got = poll(&p, 1, 1000) == 1 && read(c, &b, 1) == 1;
    close(c);
    return got;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fputs("usage: sendfd SOCKET KIND\n", stderr);
        return 2;
    }
    const char *kind = argv[2];
    int fd = -1, peer = -1;
    struct sockaddr_in bound;
    if (strcmp(kind, "connected") == 0) {
        int srv = listener(htonl(INADDR_LOOPBACK), &bound);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (srv < 0 || fd < 0 ||
            connect(fd, (struct sockaddr *)&bound, sizeof bound) < 0)
            return 3;
        peer = accept(srv, NULL, NULL);
    } else if (strcmp(kind, "file") == 0) {
        fd = open("/tmp/sendfd-file", O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, "secret", 6) != 6)
            return 3;
    } else if (strcmp(kind, "any_address") == 0) {
        fd = listener(htonl(INADDR_ANY), &bound);
    } else if (strcmp(kind, "loopback") == 0) {
        fd = listener(htonl(INADDR_LOOPBACK), &bound);
    } else {
        fputs("sendfd: unknown KIND\n", stderr);
        return 2;
    }
    if (fd < 0)
        return 3;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        send_fd(sock, fd) < 0) {
        printf("%s_reply=<%s>\n", kind, strerror(errno));
        return 0;
    }
    struct timeval tv = {.tv_sec = 10};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char reply[200];
    ssize_t n = read(sock, reply, sizeof reply - 1);
    reply[n > 0 ? n : 0] = '\0';
    reply[strcspn(reply, "\r\n")] = '\0';
    printf("%s_reply=%s\n", kind, n > 0 ? reply : "<eof>");
    if (strcmp(kind, "file") == 0) {
        char b[32] = {0};
        if (pread(fd, b, sizeof b - 1, 0) < 0)
            return 3;
        printf("file=%s\n", b);
    } else if (strcmp(kind, "connected") == 0) {
        char b[32] = {0};
        fcntl(peer, F_SETFL, O_NONBLOCK);
        ssize_t r = read(peer, b, sizeof b - 1);
        printf("peer=%s\n", r > 0 ? b : r == 0 ? "<eof>" : "<nothing>");
    } else {
        /* our own copy still listens: nobody accepts on it, so no byte */
        printf("%s_reached=%d\n", kind, reached(&bound));
    }
    return 0;
}
