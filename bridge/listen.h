/*
 * listen.h - what both modes of isolation-bridge (the relay and --pass)
 * start with: the port from the command line, and the listener on the
 * sandbox's loopback.
 */
#ifndef ISOLATION_BRIDGE_LISTEN_H
#define ISOLATION_BRIDGE_LISTEN_H

/* Decimal 1..65535, nothing else (no sign, no leading space); else -1. */
int bridge_parse_port(const char *s);

/* The most ports one PORT argument holds: the HTTP and the SOCKS5 port. */
#define BRIDGE_MAX_PORTS 2

/*
 * PORT[,PORT]: one port, or two different ones joined by a comma, each as
 * bridge_parse_port takes it. Fills ports[] and returns how many, or -1.
 */
int bridge_parse_ports(const char *s, int ports[BRIDGE_MAX_PORTS]);

/*
 * A listener (bridge_listen_loopback) on each of the n ports, into fds[];
 * -1 with errno set and nothing left open when any fails, its port in
 * *failed_port.
 */
int bridge_listen_all(const int *ports, int n, int type_flags, int *fds,
                      int *failed_port);

/*
 * A TCP socket listening on 127.0.0.1:port, close-on-exec, with
 * `type_flags` (SOCK_NONBLOCK or 0) added to its type; -1 with errno set,
 * nothing left open, on failure.
 */
int bridge_listen_loopback(int port, int type_flags);

#endif
