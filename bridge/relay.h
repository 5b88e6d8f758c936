/*
 * relay.h - the bridge's event loop: every TCP client accepted on the
 * listening socket is relayed, both ways, to a fresh connection to a unix
 * socket. One process, one epoll loop, no fork or thread per connection.
 */
#ifndef ISOLATION_BRIDGE_RELAY_H
#define ISOLATION_BRIDGE_RELAY_H

#define RELAY_MAX_LISTENERS 2

/*
 * Prepares the loop around the n (1..RELAY_MAX_LISTENERS) listen_fds
 * (already listening, non-blocking). Returns 0, or -1 with errno set;
 * nothing is left open on failure.
 */
int relay_init(const int *listen_fds, int n, const char *unix_path);

/* Runs the loop; returns only on a fatal error of epoll itself. */
int relay_run(void);

#endif
