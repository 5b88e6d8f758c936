# Real container engines for the specs (spec/containers_spec.lua): docker
# and podman from Debian, uidmap (newuidmap, newgidmap), which rootless
# podman needs, and catatonit, podman's --init (docker.io brings tini for
# docker's): `--no-install-recommends` would leave both out. The specs
# start a private dockerd themselves when no daemon answers (a socket in a
# temporary directory, vfs storage, no bridge, no iptables), run podman
# rootless with private vfs storage, and build their images with `docker
# import` / `podman import` from this machine's files: nothing is pulled.
# Where no engine can run, the spec prints why and skips.
EXTRA_DEBS += docker.io podman uidmap catatonit
