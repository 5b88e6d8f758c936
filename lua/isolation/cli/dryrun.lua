-- isolation.cli.dryrun: --dry-run's output: the script and the notes of a
-- run (tools, the seccomp program, the allowlist, routes, the parent
-- proxy) and the argv one element a line, or, with --json, the argv alone.
local isolation = require("isolation")
local toolsmod = require("isolation.tools")
local common = require("isolation.cli.common")
local proxyopts = require("isolation.cli.proxyopts")

local die_usage, json_array = common.die_usage, common.json_array

local function dry_run(o, spec, allow)
  local argv, err = isolation.argv(spec)
  if not argv then die_usage(err) end
  -- what the run's proxy would refuse, the dry run refuses
  if allow then proxyopts.check(o, spec, allow) end
  if o.json then
    local text, jerr = json_array(argv, "argv")
    if not text then die_usage("--json: " .. jerr .. " (JSON holds text only: use the text form)") end
    io.stdout:write(text, "\n")
    return
  end
  local text, derr = isolation.dry_run(spec)
  if not text then die_usage(derr) end
  local out = { (text:gsub("\n*$", "")) }
  for _, l in ipairs(o.tools_plan and toolsmod.describe(o.tools_plan) or {}) do out[#out + 1] = l end
  if spec.seccomp_fd then
    out[#out + 1] = "seccomp program on descriptor 3: " .. (o.seccomp == "tty"
      and "isolation.tty_seccomp_filter() (refuses TIOCSTI and TIOCLINUX)"
      or "isolation.sandbox_seccomp_filter() (refuses TIOCSTI and TIOCLINUX, the kernel keyrings,"
        .. " io_uring, bpf, perf_event_open, userfaultfd, kexec, modules, mounts, setns, unshare and clone"
        .. " with namespace flags, clone3 (ENOSYS), vsock, packet and non-route netlink sockets;"
        .. " docs/reference/launch-spec.md says why each)")
  end
  if allow then
    out[#out + 1] = ""
    out[#out + 1] = "proxy allowlist (" .. #allow .. " patterns; the socket is made at run time in "
      .. o.tmp_base .. "/isolate.XXXXXX):"
    for _, h in ipairs(allow) do out[#out + 1] = "  " .. h end
  end
  for _, r in ipairs(o.routes or {}) do
    out[#out + 1] = string.format("proxy route %s: sets %s on the way to %s (the secret is not shown)",
      r.name, r.header == "bearer" and "Authorization: Bearer" or r.header:match("^basic:")
        and "Authorization: Basic (" .. r.header:sub(7) .. ":secret)" or r.header, r.upstream)
  end
  if allow and o.upstream_proxy then
    out[#out + 1] = ""
    out[#out + 1] = "proxy parent (every admitted connection goes through it with CONNECT; it resolves the names): "
      .. o.upstream_proxy:gsub("^([^/]*//)[^/]*@", "%1(credentials not shown)@")
  end
  out[#out + 1] = ""
  out[#out + 1] = "argv (" .. #argv .. " elements, one a line):"
  for _, a in ipairs(argv) do out[#out + 1] = a end
  io.stdout:write(table.concat(out, "\n"), "\n")
end

return dry_run
