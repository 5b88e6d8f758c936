/*
 * launch.h - what the launch*.c files share: the launch spec read into C,
 * and the internal argv form the builders share with wrap(). Their
 * messages show values through msg.h.
 */
#ifndef ISOLATION_LAUNCH_H
#define ISOLATION_LAUNCH_H

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

#include "msg.h"

/*
 * Internal argv elements carry the two shell tokens a builder may emit as
 * markers: a NUL byte followed by one letter. No input can contain a NUL
 * (the spec reader refuses them), so a marker can only come from a builder;
 * that is how wrap() knows which `$HOME` is the builder's token and which is
 * literal text from a path or a command.
 */
#define TOKEN_HOME "\0H" /* $HOME */
#define TOKEN_USER "\0U" /* $(id -u):$(id -g) */
#define TOKEN_HOME_TEXT "$HOME"
/*
 * An element that is "\0E" followed by a variable name is the run-time
 * pass-through of that variable: wrap() writes ${NAME+"NAME=$NAME"} (one
 * word NAME=value when NAME is set in the shell running the line, no word
 * when it is unset); the public argv shows ${NAME+NAME=$NAME}.
 */
#define TOKEN_ENV_PASS 'E'
#define LAUNCH_MAX_ENV 128
#define TOKEN_USER_TEXT "$(id -u):$(id -g)"

#define LAUNCH_MAX_BINDS 128
/* protect: paths given, and the parent directories they pin */
#define LAUNCH_MAX_PROTECT 256
#define LAUNCH_MAX_PINS 256
/* gpu: device nodes bound at most, and the longest name under /dev */
#define LAUNCH_MAX_GPU 64
#define LAUNCH_GPU_NAME 64
#define DEFAULT_PROXY_PORT 3128
/* the bridge's SOCKS5 listener under deny (ALL_PROXY) */
#define DEFAULT_SOCKS_PORT 1080
/* seccomp_fd: 0, 1 and 2 are the terminal; bwrap's own limit is an int */
#define SECCOMP_FD_MIN 3
#define SECCOMP_FD_MAX 1023
/*
 * seccomp_file: the descriptor wrap() opens it on when seccomp_fd is not
 * given, and the highest one it can open: POSIX requires a shell to read
 * only one digit before `<`, and dash reads `15<f` as the word 15 and `<f`.
 */
#define SECCOMP_FD_DEFAULT 3
#define SECCOMP_FD_REDIRECT_MAX 9

enum launch_mode { MODE_NONE, MODE_BWRAP, MODE_DOCKER };
enum limits_via { VIA_NONE, VIA_SYSTEMD, VIA_CGROUP, VIA_RLIMIT };

/* limits (launch_limits.c): 0 means not set */
#define LIMITS_BYTES_MAX ((lua_Integer)1 << 50)
#define LIMITS_COUNT_MAX ((lua_Integer)1 << 22)
#define LIMITS_TIME_MAX ((lua_Integer)366 * 24 * 3600)
#define LIMITS_CPU_MAX 4096.0
/* seconds between timeout's SIGTERM and its SIGKILL */
#define LIMITS_TIME_GRACE 5
struct launch_limits {
    lua_Integer memory, pids, tmpfs, nofile, time;
    double cpu;
    enum limits_via via;
};
enum launch_bridge { BRIDGE_SOCAT, BRIDGE_BUILTIN, BRIDGE_PASS };

/* routes (launch_env.c): the variables of a credential route; no secret */
#define LAUNCH_MAX_ROUTES 64
#define LAUNCH_ROUTE_KEYS 8
struct launch_route {
    const char *name;     /* [a-z0-9-]{1,63} */
    const char *upstream; /* NULL when not given (git needs it) */
    const char *url_env;  /* NULL when not given */
    const char *key_env[LAUNCH_ROUTE_KEYS];
    size_t nkey;
    bool git;
};

/* A launch spec, checked. Strings point into Lua values kept on the stack. */
struct launch_spec {
    enum launch_mode mode; /* mode podman is MODE_DOCKER with podman set */
    bool podman;           /* podman run, --userns=keep-id for --user */
    bool deny;
    bool none; /* network "none": no route at all, not even the proxy */
    const char *docker_image; /* mode docker only */
    const char *agent;        /* NULL: no agent */
    const char *workdir;      /* NULL only for mode "" */
    const char *command;
    const char *proxy_socket; /* NULL when not given */
    int proxy_port;
    int socks_port; /* the bridge's second listener: SOCKS5 clients */
    const char *binds[LAUNCH_MAX_BINDS];
    size_t nbinds;
    const char *ro_binds[LAUNCH_MAX_BINDS];
    size_t nro_binds;
    /* tools: installations under $HOME (or elsewhere) bound read-only at
     * the same path; chosen by isolate and the session manager
     * (lua/isolation/tools.lua), which also mask what holds credentials
     * in them and put their bin directories first on PATH */
    const char *tools[LAUNCH_MAX_BINDS];
    size_t ntools;
    /* bwrap only: covered by /dev/null, and by an empty tmpfs (a root
     * launch's files only root may read; chosen by isolate and the session
     * manager, which look) */
    const char *mask_files[LAUNCH_MAX_BINDS];
    size_t nmask_files;
    const char *mask_dirs[LAUNCH_MAX_BINDS];
    size_t nmask_dirs;
    const char *ca_cert; /* NULL when not given */
    enum launch_bridge bridge;
    const char *bridge_path; /* NULL unless bridge is builtin or pass */
    /* the reaper in front of a bwrap, docker or podman line (bridge/reap.c);
       NULL: none */
    const char *reap_path;
    bool tty;
    /*
     * -1 when neither seccomp_fd nor seccomp_file is given; with
     * seccomp_file alone, SECCOMP_FD_DEFAULT. bwrap only.
     */
    int seccomp_fd;
    const char *seccomp_file; /* NULL when not given; bwrap only */
    /* env_pass, env_set (sorted by name) and env_inherit; see launch_env.c */
    const char *env_pass[LAUNCH_MAX_ENV];
    size_t nenv_pass;
    const char *env_set_name[LAUNCH_MAX_ENV];
    const char *env_set_value[LAUNCH_MAX_ENV];
    bool env_set_route[LAUNCH_MAX_ENV]; /* set by routes, not by env_set */
    size_t nenv_set;
    struct launch_route routes[LAUNCH_MAX_ROUTES];
    size_t nroutes;
    bool env_inherit;
    /* protect: relative as given, and each joined to the workdir */
    const char *protect[LAUNCH_MAX_PROTECT];
    const char *protect_path[LAUNCH_MAX_PROTECT];
    size_t nprotect;
    /* workdir/D for each directory D above a protected path, once */
    const char *pins[LAUNCH_MAX_PINS];
    size_t npins;
    bool agent_config_ro; /* agent_config = "read-only" */
    struct launch_limits limits;
    /* gpu = true: the GPU nodes found (launch_gpu.c), host and /dev path */
    bool gpu;
    const char *gpu_host[LAUNCH_MAX_GPU];
    const char *gpu_dev[LAUNCH_MAX_GPU];
    size_t ngpu;
};

/*
 * Reads and checks the spec table at idx. The module table must be at
 * module_idx (for isolation.BRIDGE). forced is a launch_mode that overrides
 * the config's (bwrap_argv, docker_argv), or -1 for the config's. On success
 * fills *s, leaves the values it points into on the stack and returns 1; on bad
 * data pushes the message and returns 0. Raises only when the spec is not a
 * table.
 */
int launch_spec_read(lua_State *L, int idx, int module_idx, int forced,
                     struct launch_spec *s);

/*
 * Reads env_pass, env_set, env_inherit and routes of the spec at idx into s
 * (after the config, agent and proxy_port): 1, or 0 with the message
 * pushed. Values stay on the stack like every other string of the spec;
 * the variables a route sets are made here and join env_set.
 */
int launch_env_read(lua_State *L, int idx, struct launch_spec *s);
/* The length of the array at v, read without reading its elements: a key
 * other than 1..n fails with not_array and the key, more than max entries
 * with their count (binds, ro_binds, protect). */
int launch_array_count(lua_State *L, int v, const char *field,
                       const char *not_array, lua_Integer max,
                       lua_Integer *count);

/* Whether key is one of the environment's launch spec keys. */
bool launch_env_is_key(const char *key);

/* argv() for bwrap: bwrap_argv behind `env -i` and the names it keeps. */
void launch_push_bwrap_env(lua_State *L, const struct launch_spec *s);

/* Appends docker's -e options for the environment. */
struct argv_buf;
void launch_env_docker(struct argv_buf *b, const struct launch_spec *s);

/* Appends the dry-run lines about the environment. */
void launch_env_describe(luaL_Buffer *b, const struct launch_spec *s);

/* Adds AGENT_ENV and SANDBOX_ENV to the module table at the top. */
void launch_env_open(lua_State *L);

/* The agent's own config paths ("$HOME/..." text), NULL-terminated. */
const char *const *launch_agent_paths(const char *agent);

/* Environment variables that name the CA certificate, NULL-terminated. */
extern const char *const launch_ca_env[];

/* A mount of the bwrap plan, shared by the argv builder and dry_run. */
enum mount_kind {
    MOUNT_RO,
    MOUNT_RO_TRY,
    MOUNT_RW,
    MOUNT_RW_TRY,
    MOUNT_DEV,
    MOUNT_PROC,
    MOUNT_TMPFS
};

struct mount {
    enum mount_kind kind;
    const char *path; /* host and sandbox path, "$HOME..." text allowed */
    const char *sandbox_path; /* when it differs from path, else NULL */
    const char *why;
};

#define LAUNCH_MAX_MOUNTS                                                      \
    (5 * LAUNCH_MAX_BINDS + LAUNCH_MAX_PROTECT + LAUNCH_MAX_PINS + 64)

/*
 * launch_protect.c: reads protect and agent_config into s (after workdir);
 * 1, or 0 with the message pushed.
 */
int launch_protect_read(lua_State *L, int idx, int module_idx,
                        struct launch_spec *s);
/* The pins (read-write, at their own paths) and the protected paths. */
size_t launch_protect_pins(const struct launch_spec *s, struct mount *out);
size_t launch_protect_leaves(const struct launch_spec *s, struct mount *out);
/* The agent's config binds, then its read-only parts inside them. */
size_t launch_agent_mounts(const struct launch_spec *s, struct mount *out);
/* The agent's parts that configure commands ("$HOME/..."), NULL-ended. */
const char *const *launch_agent_protected(const char *agent);
/* The places the agent writes ("$HOME/..."), NULL-ended. */
const char *const *launch_agent_writable(const char *agent);
/* isolation.PROTECTED's built-in value, NULL-terminated. */
extern const char *const launch_protected_default[];

/* The bwrap mounts in the order they are given to bwrap. */
size_t launch_bwrap_mounts(const struct launch_spec *s, struct mount *out);

/*
 * 1, or 0 with a message pushed when the caller's mounts cannot be ordered
 * so that each keeps its mode wherever $HOME turns out to be.
 */
int launch_bwrap_check_order(lua_State *L, const struct launch_spec *s);

/* Pushes the internal argv (markers for tokens) of each builder. */
void launch_push_bwrap(lua_State *L, const struct launch_spec *s);
void launch_push_docker(lua_State *L, const struct launch_spec *s);
void launch_push_plain(lua_State *L, const struct launch_spec *s);
void launch_push_for_mode(lua_State *L, const struct launch_spec *s);

/* The deny-mode script for bash -c inside bwrap. */
void launch_push_deny_script(lua_State *L, const struct launch_spec *s);

/* Pushes `path` with a leading "$HOME" turned into the marker. */
void launch_push_path(lua_State *L, const char *path);

/* An internal argv being built: a new table at stack index t. */
struct argv_buf {
    lua_State *L;
    int t;
    lua_Integer n;
};

void argv_start(struct argv_buf *b, lua_State *L);
void argv_add(struct argv_buf *b, const char *s);
/* Appends the string on top of the stack and pops it. */
void argv_add_top(struct argv_buf *b);
void argv_add_path(struct argv_buf *b, const char *path);

/* launch_script.c: bwrap's end for bridge "pass": the proxy variables
 * (--setenv), then "--" and the starter, which execs bash -c -- command. */
void launch_add_pass_command(struct argv_buf *b, const struct launch_spec *s);

/*
 * launch_gpu.c: gpu = true. Reads the key and lists the GPU nodes under
 * /dev (ISOLATION_DEV_ROOT in tests) into s: 1, or 0 with the message.
 */
int launch_gpu_read(lua_State *L, int idx, struct launch_spec *s);
/* The names of the GPU nodes found, sorted; at most max. */
size_t launch_gpu_list(char names[][LAUNCH_GPU_NAME], size_t max);
/* bwrap's --dev-bind-try, docker's --device, dry_run's lines. */
void launch_gpu_bwrap(struct argv_buf *b, const struct launch_spec *s);
void launch_gpu_docker(struct argv_buf *b, const struct launch_spec *s);
void launch_gpu_describe(luaL_Buffer *b, const struct launch_spec *s);
/* isolation.gpu_devices() */
int launch_gpu_devices(lua_State *L);

/* launch_protect.c: protect's pins and read-only paths as docker -v. */
void launch_docker_protect(struct argv_buf *b, const struct launch_spec *s);

/* launch_protect.c: dry_run's protected paths section. */
void launch_protect_describe(luaL_Buffer *b, lua_State *L,
                             const struct launch_spec *s);

/* Replaces the markers in the internal argv at idx, in place. */
void launch_argv_publish(lua_State *L, int idx);

/*
 * Pushes the one shell line for the internal argv at idx, which s built;
 * for a bwrap spec with seccomp_file, with the redirection that opens it.
 */
void launch_push_wrapped(lua_State *L, int idx, const struct launch_spec *s);

/*
 * The run-time check of a bwrap or docker line (launch_prologue.c): the
 * line's first word, a command substitution that prints `program` only
 * when the shell's HOME is usable and no workdir or bind is $HOME or above
 * it. add_word is how wrap() writes one element (with its quoting).
 */
typedef void (*launch_word_fn)(luaL_Buffer *b, const char *s, size_t len);
bool launch_needs_prologue(const struct launch_spec *s);
void launch_add_prologue(luaL_Buffer *b, const struct launch_spec *s,
                         const char *program, size_t len,
                         launch_word_fn add_word);

/*
 * limits and limits_via of the spec at idx (after the config: the mode
 * decides what is enforceable): 1, or 0 with the message pushed.
 */
int launch_limits_read(lua_State *L, int idx, struct launch_spec *s);
const char *launch_limits_via_name(enum limits_via via);
const char *launch_limits_cgroup_prologue(void);
/* Pushes a new table: the programs argv() and wrap() put before bwrap. */
void launch_limits_push_prefix(lua_State *L, const struct launch_spec *s);
/* Puts that prefix in front of the internal argv at argv_idx. */
void launch_limits_prepend(lua_State *L, int argv_idx,
                           const struct launch_spec *s);
/* Puts the reaper (isolation-bridge --reap GRACE --) in front of it. */
void launch_reap_prepend(lua_State *L, int argv_idx,
                         const struct launch_spec *s);
/*
 * bwrap, with limits.tmpfs: --size before a --tmpfs; after --dev /dev, /dev
 * read-only and a sized /dev/shm (bwrap's /dev is an unsized tmpfs).
 */
void launch_limits_add_tmpfs_size(struct argv_buf *b,
                                  const struct launch_spec *s);
void launch_limits_add_dev(struct argv_buf *b, const struct launch_spec *s);
/* docker run's limit flags (before the image), and its in-container time. */
void launch_limits_add_docker(struct argv_buf *b, const struct launch_spec *s);
void launch_limits_add_docker_time(struct argv_buf *b,
                                   const struct launch_spec *s);

/* Adds dry_run's lines on what enforces each limit. */
struct luaL_Buffer;
void launch_limits_add_dry_run(struct luaL_Buffer *b, lua_State *L,
                               const struct launch_spec *s);

/* Pushes the dry-run text. */
/*
 * Checks the ssh tunnel target table at idx as ssh_argv reads it: 1, or 0
 * with the message pushed (launch_ssh.c).
 */
int launch_ssh_check_target(lua_State *L, int idx);

void launch_push_dry_run(lua_State *L, const struct launch_spec *s);

#endif
