rockspec_format = "3.0"
package = "isolation"
version = "scm-1"
source = { url = "git+file:///dev/null" }
description = {
  summary = "Fast sandbox tier for AI coding-agent launches: bwrap/docker argv, egress allowlist proxy",
  license = "MIT",
}
dependencies = { "lua >= 5.4, < 5.5" }
external_dependencies = {
  LIBUV = { header = "uv.h", library = "uv" },
}
build = {
  type = "builtin",
  modules = {
    isolation = {
      sources = {
        "src/bridge_path.c", "src/config.c", "src/hostpat.c", "src/httpparse.c", "src/isolation.c",
        "src/launch.c", "src/proxy.c", "src/selftest.c", "src/target.c",
        "src/tlshello.c",
      },
      defines = { "_GNU_SOURCE" },
      incdirs = { "src", "$(LIBUV_INCDIR)" },
      libdirs = { "$(LIBUV_LIBDIR)" },
      libraries = { "uv", "pthread" },
    },
    ["isolation.policy"] = "lua/isolation/policy.lua",
    ["isolation.scheduler"] = "lua/isolation/scheduler.lua",
    ["isolation.session"] = "lua/isolation/session.lua",
  },
  install = {
    bin = { isolate = "bin/isolate" },
  },
}
