# Real container engines for the specs (spec/containers_spec.lua): docker
# and podman from Debian. The specs start a private dockerd themselves when
# no daemon answers (a socket in a temporary directory, vfs storage, no
# bridge, no iptables) and build their images with `docker import` from this
# machine's files: nothing is pulled. Where no engine can run, the spec
# prints why and skips.
EXTRA_DEBS += docker.io podman
