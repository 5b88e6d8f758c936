/*
 * listen.h - what both modes of isolation-bridge (the relay and --pass)
 * start with: the port from the command line, and the listener on the
 * sandbox's loopback.
 */
#ifndef ISOLATION_BRIDGE_LISTEN_H
#define ISOLATION_BRIDGE_LISTEN_H

/* Decimal 1..65535, nothing else (no sign, no leading space); else -1. */
int bridge_parse_port(const char *s);

/*
 * A TCP socket listening on 127.0.0.1:port, close-on-exec, with
 * `type_flags` (SOCK_NONBLOCK or 0) added to its type; -1 with errno set,
 * nothing left open, on failure.
 */
int bridge_listen_loopback(int port, int type_flags);

#endif
