# The specs of what a sandbox reaches of the host's kernel (spec/proc_spec.lua,
# spec/keyring_spec.lua, spec/sandbox_seccomp_spec.lua) plant keys with
# keyctl(1).
EXTRA_DEBS += keyutils
