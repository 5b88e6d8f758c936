# spec/session_runtime_spec.lua grants another user write on a parent of
# runtime_dir through a POSIX ACL (setfacl), which must be refused too.
EXTRA_DEBS += acl
