/*
 * pass.h - isolation-bridge --pass: hand the sandbox's listener to the
 * proxy instead of relaying (bridge "pass").
 */
#ifndef ISOLATION_BRIDGE_PASS_H
#define ISOLATION_BRIDGE_PASS_H

/* argv: PORT SOCKET COMMAND [ARG...]. Execs COMMAND, or returns the exit
 * status of a failure (2: bad arguments, 126: no handover). */
int pass_main(int argc, char **argv);

#endif
