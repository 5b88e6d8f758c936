# The resource-limit specs (spec/limits_spec.lua) allocate memory, fork and
# open descriptors from python3 inside real sandboxes; prlimit, setpriv and
# unshare come with util-linux (essential on Debian).
EXTRA_DEBS += python3
