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
  OPENSSL = { header = "openssl/ssl.h", library = "ssl" },
}
build = {
  type = "builtin",
  modules = {
    isolation = {
      sources = {
        "src/allow/allowhosts.c", "src/allow/allowhosts_npm.c", "src/launch/bridge_path.c",
        "src/launch/config.c", "src/wire/hostparse.c", "src/allow/hostpat.c",
        "src/allow/hostpat_lua.c", "src/wire/httpparse.c", "src/wire/httpparse_chunked.c",
        "src/wire/httpparse_response.c", "src/wire/httpparse_upstream.c",
        "src/isolation.c", "src/launch/launch.c", "src/launch/launch_argv.c",
        "src/launch/launch_bwrap.c", "src/launch/launch_docker.c",
        "src/launch/launch_dryrun.c", "src/launch/launch_gpu.c", "src/launch/launch_env.c", "src/launch/launch_limits.c",
        "src/launch/launch_prologue.c",
        "src/launch/launch_protect.c", "src/launch/launch_script.c", "src/launch/launch_spec.c", "src/launch/launch_wrap.c",
        "src/launch/launch_ssh.c", "src/msg.c",
        "src/launch/orphans.c", "src/launch/preflight.c", "src/launch/protect_runtime.c", "src/proxy/proxy_audit.c",
        "src/proxy/proxy_buf.c", "src/proxy/proxy_conn.c", "src/proxy/proxy_request.c",
        "src/proxy/proxy_dial.c", "src/proxy/proxy_tunnel.c", "src/proxy/proxy_reply.c", "src/proxy/proxy_decide.c",
        "src/proxy/proxy_event.c", "src/proxy/proxy_listen.c", "src/proxy/proxy_loop.c",
        "src/proxy/proxy_pass.c", "src/proxy/proxy_auth.c", "src/proxy/proxy_socks.c", "src/wire/socks5.c",
        "src/proxy/proxy_route.c", "src/proxy/proxy_route_idle.c", "src/proxy/proxy_tls.c", "src/proxy/proxy_parent.c",
        "src/proxy/proxy_hosts.c", "src/proxy/proxy_dns.c",
        "src/proxy/proxy_lua.c", "src/proxy/proxy_relay.c", "src/launch/seccomp.c",
        "src/selftest.c", "src/strarg.c", "src/launch/target.c", "src/wire/tlshello.c",
      },
      defines = { "_GNU_SOURCE" },
      incdirs = { "src", "$(LIBUV_INCDIR)", "$(OPENSSL_INCDIR)" },
      libdirs = { "$(LIBUV_LIBDIR)", "$(OPENSSL_LIBDIR)" },
      libraries = { "uv", "pthread", "ssl", "crypto" },
    },
    ["isolation.cli"] = "lua/isolation/cli.lua",
    ["isolation.cli.args"] = "lua/isolation/cli/args.lua",
    ["isolation.cli.common"] = "lua/isolation/cli/common.lua",
    ["isolation.cli.config"] = "lua/isolation/cli/config.lua",
    ["isolation.cli.doctor"] = "lua/isolation/cli/doctor.lua",
    ["isolation.cli.dryrun"] = "lua/isolation/cli/dryrun.lua",
    ["isolation.cli.help"] = "lua/isolation/cli/help.lua",
    ["isolation.cli.paths"] = "lua/isolation/cli/paths.lua",
    ["isolation.cli.prepare"] = "lua/isolation/cli/prepare.lua",
    ["isolation.cli.proxy"] = "lua/isolation/cli/proxy.lua",
    ["isolation.cli.proxyopts"] = "lua/isolation/cli/proxyopts.lua",
    ["isolation.cli.routes"] = "lua/isolation/cli/routes.lua",
    ["isolation.cli.run"] = "lua/isolation/cli/run.lua",
    ["isolation.cli.signals"] = "lua/isolation/cli/signals.lua",
    ["isolation.cli.summary"] = "lua/isolation/cli/summary.lua",
    ["isolation.limits"] = "lua/isolation/limits.lua",
    ["isolation.hostpaths"] = "lua/isolation/hostpaths.lua",
    ["isolation.gitcheck"] = "lua/isolation/gitcheck.lua",
    ["isolation.json"] = "lua/isolation/json.lua",
    ["isolation.policy"] = "lua/isolation/policy.lua",
    ["isolation.preflight"] = "lua/isolation/preflight.lua",
    ["isolation.protect"] = "lua/isolation/protect.lua",
    ["isolation.text"] = "lua/isolation/text.lua",
    ["isolation.agentcfg"] = "lua/isolation/agentcfg.lua",
    ["isolation.scheduler"] = "lua/isolation/scheduler.lua",
    ["isolation.routes"] = "lua/isolation/routes.lua",
    ["isolation.session"] = "lua/isolation/session.lua",
    ["isolation.setid"] = "lua/isolation/setid.lua",
    ["isolation.endcheck"] = "lua/isolation/endcheck.lua",
    ["isolation.tools"] = "lua/isolation/tools.lua",
  },
  -- The built-in bridge is a program, which the builtin build cannot make:
  -- run `make` first; the rock installs the binary beside isolation.so,
  -- where isolation.BRIDGE finds it.
  install = {
    lib = { ["isolation-bridge"] = "build/isolation-bridge" },
    bin = { isolate = "bin/isolate" },
  },
}
