#!/bin/sh
# spec/support/dns_netns.sh DIR COMMAND...: runs COMMAND in a network
# namespace of its own (only loopback, up) and a mount namespace where
# /etc/resolv.conf names 127.0.0.1 as the only name server, /etc/hosts holds
# localhost and b.example.net (127.0.0.1) and /etc/nsswitch.conf says
# "hosts: files dns" (the files are made in DIR). The name server is the
# caller's (spec/support/dns_stub.lua): nothing leaves loopback. Needs root
# (or a user namespace with CAP_SYS_ADMIN), unshare and ip.
# Environment: DNS_NETNS_OPTIONS resolv.conf's options (e.g. "timeout:2
# attempts:1"), DNS_NETNS_HOSTS lines added to /etc/hosts,
# DNS_NETNS_NSSWITCH the hosts line's sources ("files dns").
# `dns_netns.sh DIR true` is the probe: exit 0 when all of it works.
set -eu
dir=$1
shift
{
    printf 'nameserver 127.0.0.1\n'
    [ -z "${DNS_NETNS_OPTIONS:-}" ] || printf 'options %s\n' "$DNS_NETNS_OPTIONS"
} >"$dir/resolv.conf"
{
    printf '127.0.0.1 localhost\n::1 localhost\n127.0.0.1 b.example.net\n'
    [ -z "${DNS_NETNS_HOSTS:-}" ] || printf '%s\n' "$DNS_NETNS_HOSTS"
} >"$dir/hosts"
printf 'hosts: %s\n' "${DNS_NETNS_NSSWITCH:-files dns}" >"$dir/nsswitch.conf"
exec unshare -n -m sh -c '
  set -e
  ip link set lo up
  for f in resolv.conf hosts nsswitch.conf; do mount --bind "$0/$f" "/etc/$f"; done
  exec "$@"' "$dir" "$@"
