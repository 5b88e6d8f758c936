rockspec_format = "3.0"
package = "isolation"
version = "scm-1"
source = { url = "git+file:///dev/null" }
description = {
  summary = "Fast sandbox tier for AI coding-agent launches: bwrap/docker argv, egress allowlist proxy",
  license = "MIT",
}
dependencies = { "lua >= 5.4, < 5.5", "luv", "lua-cjson" }
external_dependencies = {
  LIBUV = { header = "uv.h", library = "uv" },
}
build = {
  type = "builtin",
  modules = {
    isolation = {
      sources = {
        "src/allowhosts.c", "src/allowhosts_npm.c", "src/bridge_path.c",
        "src/config.c", "src/hostparse.c", "src/hostpat.c",
        "src/hostpat_lua.c", "src/httpparse.c", "src/httpparse_chunked.c",
        "src/httpparse_response.c", "src/httpparse_upstream.c",
        "src/isolation.c", "src/launch.c", "src/launch_argv.c",
        "src/launch_bwrap.c", "src/launch_docker.c",
        "src/launch_dryrun.c", "src/launch_env.c", "src/launch_limits.c",
        "src/launch_prologue.c",
        "src/launch_protect.c", "src/launch_script.c", "src/launch_spec.c", "src/launch_wrap.c",
        "src/launch_ssh.c", "src/msg.c",
        "src/preflight.c", "src/protect_runtime.c", "src/proxy_audit.c",
        "src/proxy_buf.c", "src/proxy_conn.c", "src/proxy_decide.c",
        "src/proxy_event.c", "src/proxy_listen.c", "src/proxy_loop.c",
        "src/proxy_pass.c", "src/proxy_auth.c", "src/proxy_socks.c", "src/socks5.c",
        "src/proxy_lua.c", "src/proxy_relay.c", "src/seccomp.c",
        "src/selftest.c", "src/strarg.c", "src/target.c", "src/tlshello.c",
      },
      defines = { "_GNU_SOURCE" },
      incdirs = { "src", "$(LIBUV_INCDIR)" },
      libdirs = { "$(LIBUV_LIBDIR)" },
      libraries = { "uv", "pthread" },
    },
    ["isolation.cli"] = "lua/isolation/cli.lua",
    ["isolation.limits"] = "lua/isolation/limits.lua",
    ["isolation.json"] = "lua/isolation/json.lua",
    ["isolation.policy"] = "lua/isolation/policy.lua",
    ["isolation.preflight"] = "lua/isolation/preflight.lua",
    ["isolation.protect"] = "lua/isolation/protect.lua",
    ["isolation.scheduler"] = "lua/isolation/scheduler.lua",
    ["isolation.session"] = "lua/isolation/session.lua",
  },
  -- The built-in bridge is a program, which the builtin build cannot make:
  -- run `make` first; the rock installs the binary beside isolation.so,
  -- where isolation.BRIDGE finds it.
  install = {
    lib = { ["isolation-bridge"] = "build/isolation-bridge" },
    bin = { isolate = "bin/isolate" },
  },
}
