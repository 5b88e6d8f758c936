-- isolation.cli.help: the text of `isolate --help` (and `isolate proxy --help`).

return [[
Usage: isolate [options] -- command [args...]
       isolate proxy (--unix PATH | --listen ADDR) --allow PATTERN... [options]
       isolate doctor

Runs one command in a sandbox and exits with its status (128+n after signal
n). The command is the arguments after --, run exactly as given (each is
shell-quoted into the `bash -c` line the sandbox runs). With the network
denied under bwrap, an egress allowlist proxy runs for the command's
lifetime on a unix socket in a private temporary directory, bridged into
the sandbox's empty network namespace; HTTP_PROXY and HTTPS_PROXY point at
it inside.

Options:
  --mode bwrap|docker|podman|none
                             the tier (default bwrap); podman: rootless, with
                             --userns=keep-id
  --network allow|deny|none  default deny (only the allowlist proxy, for bwrap,
                             docker and podman); none: no route at all; allow
                             with --mode none, which cannot enforce either
  --allow-host PATTERN       repeatable: a host the proxy admits, added to the
                             defaults (the agent's model API hosts, package
                             registries, the --hook-url host). Patterns: name,
                             *.name, name:port, 10.0.0.1, [::1]:8080, 10.0.0.0/8
  --no-default-hosts         the package registries are not admitted: the
                             allowlist is --allow-host, the config's
                             allow_hosts, the --hook-url host and the agent's
                             model API hosts
  --agent NAME               claude, codex, gemini or another name: binds the
                             agent's own config under $HOME, admits its model API
  --workdir DIR              bound read-write, the start directory (default: the
                             current directory); never $HOME or above it, nor
                             in a system directory (/etc, /usr, /run, ...)
  --bind PATH                repeatable: bound read-write at the same path
  --ro-bind PATH             repeatable: bound read-only at the same path
                             (PATH may start with the literal token $HOME/)
  --gpu                      the host's GPU device nodes inside (/dev/nvidia*,
                             /dev/nvidia-caps, /dev/dri, /dev/kfd, /dev/dxg, those
                             present), nothing else of its /dev; bwrap, docker
                             and podman
  --tool PATH                repeatable: an installation (a directory, or a program
                             whose installation is found) bound read-only at the
                             same path, its bin directory first on PATH; bwrap
  --no-tools                 bind no tools: the command's program is not looked
                             for under $HOME (by default its installation there,
                             nvm, pyenv, rustup, claude's, ..., is bound read-only)
  --protect PATH             repeatable: a path relative to the workdir, read-only
                             inside, added to isolation.PROTECTED (.git/hooks,
                             .git/config, .vscode, .claude/settings.json, ...)
  --no-protect               no protected paths: the sandbox may write what the
                             host runs later (.git/hooks, .git/config, ...)
  --agent-config read-write|read-only
                             the agent's own config: read-write (default; the
                             parts that name commands read-only) or read-only
  --ca-cert FILE             a CA certificate, bound read-only as a single file
  --bridge pass|builtin|socat
                             the in-sandbox way to the proxy (default pass: the
                             sandbox's listener is handed to the proxy, which
                             accepts on it; builtin and socat relay each
                             connection; socat when the bridge program is
                             not built)
  --seccomp sandbox|tty      bwrap's system-call filter (default sandbox: no
                             TIOCSTI/TIOCLINUX, no kernel keyrings, ...; see
                             docs/reference/launch-spec.md); tty refuses only
                             the two ioctls
  --target local|ssh|pct|sandbox
                             checked against the config before anything starts
                             (default local); isolate itself runs commands on
                             this machine, so another target needs --dry-run
  --config FILE              a JSON config {"mode", "network", "docker_image",
                             "allow_hosts"}; options on the line win, and
                             --allow-host adds to its allow_hosts
  --hook-url URL             the controller's hook URL: its host:port is admitted
  --allow-private            let admitted names resolve to loopback, link-local,
                             private or reserved addresses (the proxy refuses
                             them otherwise; an IP/CIDR --allow-host admits one)
  --resolve NAME:ADDR[,ADDR] the proxy resolves NAME to these addresses instead of
                             asking DNS (repeatable; like curl --resolve)
  --env NAME                 repeatable: pass NAME from this environment into the
                             sandbox (only when set here). The sandbox starts
                             clean: PATH, the locale, TERM, TZ, USER, LOGNAME,
                             HOME and the --agent's own keys, nothing else
  --setenv NAME=VALUE        repeatable: set NAME to VALUE inside
  --inherit-env              pass the whole environment, secrets included
  --secret [NAME=]ENV@URL[#HEADER]
                             repeatable, deny only: a credential route; the
                             proxy adds ENV's value (bearer, basic:USER or a
                             header name) to requests for
                             $ISOLATION_ROUTE_<NAME>; inside, ENV is only a
                             placeholder
  --git                      the --secret routes also serve git (insteadOf)
  --upstream-ca FILE         verify the routes' upstreams against this PEM file
  --upstream-proxy http://[USER:PASSWORD@]HOST:PORT
                             a parent proxy (a corporate one): every admitted
                             connection goes through it with CONNECT, after the
                             allowlist; the parent resolves the names
  --no-routes                with --agent: pass its key in, keep its API hosts
  --memory SIZE              the sandbox's memory in all (SIZE: bytes, or 512M, 2G)
  --pids N                   at most N processes in the sandbox (its own shell and
                             bwrap's count)
  --tmpfs-size SIZE          the size of each of the private /tmp and $HOME
  --cpus N                   at most N cores (1.5: one and a half)
  --time SECONDS             end the command after SECONDS (SIGTERM, SIGKILL 5 s
                             later); the exit status is then 124
                             --memory, --pids and --cpus under bwrap need a
                             systemd user scope, a writable cgroup, or rlimits:
                             isolate picks the strongest that works here and
                             says which; none is an error (exit 125)
  --dry-run                  print the mounts, the allowlist and the argv (one
                             element a line); run nothing
  --json                     with --dry-run: print only the argv, as a JSON array
  --verbose                  print each proxy decision as it happens (stderr)
  --learn                    learn mode: the proxy admits hosts that are not on
                             the allowlist (the address rule, strict parsing and
                             the TLS server name check still apply) and isolate
                             prints at exit the --allow-host options, and a
                             --config JSON, that would have admitted them
  --log FILE                 the audit log: one JSON object a line per proxy
                             decision, appended as it happens (created 0600)
  --help, --version

Without --verbose, isolate prints on exit which hosts the proxy denied:
those not on the allowlist (admit with --allow-host HOST) apart from
allowed names refused for the address they resolve to (admit with an
IP/CIDR --allow-host or --allow-private). SIGINT, SIGQUIT, SIGTERM and SIGHUP
reach the command (under bwrap: the sandbox's processes, not bwrap, which
Ctrl-C cannot kill). Only descriptors 0, 1 and 2 enter the sandbox. Under
bwrap a seccomp filter refuses TIOCSTI and TIOCLINUX, so that the command
cannot type into your terminal, and the kernel keyrings (bwrap reads it on
descriptor 3). Exit
status: the command's; 2 for a usage error; 125 when isolate itself fails
(the proxy cannot start, bwrap is not on PATH: `isolate doctor` says what
is missing).

Examples:
  isolate -- make test                      bwrap, network denied, the proxy
  isolate --allow-host '*.example.com' --agent claude -- claude
  isolate --network allow -- ./build.sh     filesystem containment only
  isolate --dry-run -- npm ci               what would be mounted and run

isolate proxy: runs an allowlist proxy in the foreground. Prints its
address ("unix:/path" or "127.0.0.1:PORT") as the first line of stdout,
then one line per request on stderr, until SIGINT or SIGTERM; removes its
socket and exits 0.
  --unix PATH                listen on a unix socket (created 0600)
  --listen ADDR              127.0.0.1:PORT or [::1]:PORT (0: any free port)
  --allow PATTERN...         the allowlist (repeatable; patterns may follow)
  --allow-private            let names resolve to private/loopback addresses
  --no-token                 --listen: accept any local client (no token)
  --accept-listeners N       --unix: hold up to N (0 to 64) listeners that
                             sandboxes hand over the socket (bridge pass)
  --upstream-proxy http://HOST:PORT
                             dial every admitted connection through this
                             parent proxy (CONNECT)
  --quiet                    no per-request lines
With --listen the proxy makes a random token that every request must
carry (any local user can reach a TCP port): the second line of stdout is
the proxy URL with it (http://isolation:TOKEN@127.0.0.1:PORT; the same
user and password work for socks5h://).
]]
