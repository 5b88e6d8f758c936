#ifndef ISOLATION_BRIDGE_REAP_H
#define ISOLATION_BRIDGE_REAP_H

/*
 * isolation-bridge --reap GRACE -- COMMAND [ARG...]: runs COMMAND (a local
 * launch line's limits and bwrap) as its child and returns only when every
 * process below it is gone. argv[0] is "--reap".
 */
int reap_main(int argc, char **argv);

#endif
