# spec/ssh_tunnel_spec.lua runs a private sshd on a loopback port (its own
# host key and authorized key in a temporary directory) and launches network
# deny sessions through it: the ssh tunnel target.
EXTRA_DEBS += openssh-server openssh-client
# spec/socks_deny_spec.lua: git and ssh through the deny sandbox's SOCKS5
# port, with the README's ProxyCommand (OpenBSD netcat's nc -X 5 -x).
EXTRA_DEBS += netcat-openbsd git
