/*
 * allowhosts_npm.c - the npm registry's host, read from npm's own
 * configuration at run time.
 *
 * This is the one impure corner of the module: it reads the environment and
 * a few files on every call, and npm's built-in default once per process.
 * The project never writes the registry's name down: a user with a mirror
 * configured gets the mirror, and a machine without npm gets no npm entry.
 */
#include "allow/allowhosts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define NPMRC_MAX (256 * 1024)
#define DEFINITIONS_MAX (8 * 1024 * 1024)
#define URL_MAX 2048
#define NPM_COMMAND_TIMEOUT_MS 5000

/* Reads a whole small file; NULL when missing, unreadable or too large. */
static char *read_file(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
    fclose(f);
    if (!buf || n > max) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static const char *env_either(const char *lower_name, const char *upper_name)
{
    const char *v = getenv(lower_name);
    if (!v || !*v)
        v = getenv(upper_name);
    return v && *v ? v : NULL;
}

/* npm expands ${VAR} in npmrc values; an unset variable becomes empty. */
static void expand_env(const char *in, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < cap; i++) {
        if (in[i] == '$' && i + 1 < len && in[i + 1] == '{') {
            const char *close = memchr(in + i + 2, '}', len - i - 2);
            if (close) {
                char name[256];
                size_t nlen = (size_t)(close - (in + i + 2));
                if (nlen < sizeof name) {
                    memcpy(name, in + i + 2, nlen);
                    name[nlen] = '\0';
                    const char *v = getenv(name);
                    for (; v && *v && o + 1 < cap; v++)
                        out[o++] = *v;
                }
                i = (size_t)(close - in);
                continue;
            }
        }
        out[o++] = in[i];
    }
    out[o] = '\0';
}

/*
 * The last `registry = value` line of an npmrc (ini: a later key wins);
 * scoped `@scope:registry` keys and comments are not it.
 */
static bool npmrc_registry(const char *path, char *url, size_t cap)
{
    size_t len;
    char *text = read_file(path, NPMRC_MAX, &len);
    if (!text)
        return false;
    bool found = false;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        while (*line == ' ' || *line == '\t')
            line++;
        char *eq = strchr(line, '=');
        if (eq && *line != ';' && *line != '#') {
            char *key_end = eq;
            while (key_end > line &&
                   (key_end[-1] == ' ' || key_end[-1] == '\t'))
                key_end--;
            if ((size_t)(key_end - line) == 8 &&
                strncmp(line, "registry", 8) == 0) {
                char *v = eq + 1;
                size_t vlen = strlen(v);
                while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == ' ' ||
                                v[vlen - 1] == '\t'))
                    vlen--;
                while (vlen && (*v == ' ' || *v == '\t'))
                    v++, vlen--;
                if (vlen >= 2 && (v[0] == '"' || v[0] == '\'') &&
                    v[vlen - 1] == v[0])
                    v++, vlen -= 2;
                expand_env(v, vlen, url, cap);
                found = true;
            }
        }
        line = next;
    }
    free(text);
    return found;
}

/*
 * npm's built-in default: the `registry` definition in the installed npm's
 * config definitions (npm 7+), `default: '<url>'`.
 */
static bool definitions_registry(const char *path, char *url, size_t cap)
{
    size_t len;
    char *text = read_file(path, DEFINITIONS_MAX, &len);
    if (!text)
        return false;
    bool found = false;
    static const char *const keys[] = {"'registry', {", "\"registry\", {"};
    for (size_t k = 0; k < 2 && !found; k++) {
        const char *at = strstr(text, keys[k]);
        if (!at)
            continue;
        const char *def = strstr(at, "default:");
        if (!def || def - at > 400)
            continue;
        def += 8;
        while (*def == ' ')
            def++;
        char q = *def;
        if (q != '\'' && q != '"' && q != '`')
            continue;
        const char *end = strchr(def + 1, q);
        if (!end || (size_t)(end - def - 1) >= cap)
            continue;
        memcpy(url, def + 1, (size_t)(end - def - 1));
        url[end - def - 1] = '\0';
        found = true;
    }
    free(text);
    return found;
}

/* The npm package directory behind `npm` on PATH, if any. */
static bool npm_dir_from_path(char *dir, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        char candidate[PATH_MAX], real[PATH_MAX];
        if (n > 0 && n + 5 < sizeof candidate) {
            memcpy(candidate, path, n);
            memcpy(candidate + n, "/npm", 5);
            if (realpath(candidate, real)) {
                /* .../node_modules/npm/bin/npm-cli.js */
                char *slash = strrchr(real, '/');
                if (slash)
                    *slash = '\0';
                slash = strrchr(real, '/');
                if (slash && strcmp(slash, "/bin") == 0) {
                    *slash = '\0';
                    if (strlen(real) < cap) {
                        memcpy(dir, real, strlen(real) + 1);
                        return true;
                    }
                }
            }
        }
        path = colon ? colon + 1 : path + n;
    }
    return false;
}

static bool from_npm_package(const char *dir, char *url, size_t cap)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/npmrc", dir); /* the builtin npmrc */
    if (npmrc_registry(path, url, cap))
        return true;
    static const char *const definitions[] = {
        "node_modules/@npmcli/config/lib/definitions/definitions.js",
        "lib/utils/config/definitions.js",
    };
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, definitions[i]);
        if (definitions_registry(path, url, cap))
            return true;
    }
    return false;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Last resort: `npm config get registry`, run from / with a deadline, its
 * environment without the sanitizer preload of a spec-asan run.
 */
static bool from_npm_command(char *url, size_t cap)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return false;
    size_t n_env = 0;
    while (environ && environ[n_env])
        n_env++;
    char **env = calloc(n_env + 1, sizeof *env);
    if (!env) {
        close(fds[0]);
        close(fds[1]);
        return false;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            env[k++] = environ[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addchdir_np(&fa, "/");
    /* Its own process group, so that a deadline ends node and any wrapper. */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    char *argv[] = {"npm", "config", "get", "registry", NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "npm", &fa, &attr, argv, env);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return false;
    }
    size_t got = 0;
    long long deadline = now_ms() + NPM_COMMAND_TIMEOUT_MS;
    bool eof = false;
    while (!eof && got + 1 < cap) {
        long long left = deadline - now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        ssize_t n = read(fds[0], url + got, cap - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            eof = true;
        else
            got += (size_t)n;
    }
    close(fds[0]);
    int status = 0;
    if (!eof)
        kill(-pid, SIGKILL); /* past the deadline, or more output than a URL */
    /* Reap it; after EOF it gets the rest of the deadline to exit. */
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 ||
           (r < 0 && errno == EINTR)) {
        if (now_ms() >= deadline) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            return false;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    url[got] = '\0';
    while (got && (url[got - 1] == '\n' || url[got - 1] == '\r' ||
                   url[got - 1] == ' '))
        url[--got] = '\0';
    return eof && WIFEXITED(status) && WEXITSTATUS(status) == 0 && got > 0;
}

static pthread_mutex_t builtin_lock = PTHREAD_MUTEX_INITIALIZER;
static bool builtin_done, builtin_found;
static char builtin_url[URL_MAX];

/* npm's own default, found once per process. */
static bool builtin_default(char *url, size_t cap)
{
    pthread_mutex_lock(&builtin_lock);
    if (!builtin_done) {
        static const char *const dirs[] = {
            "/usr/lib/node_modules/npm",
            "/usr/local/lib/node_modules/npm",
            "/usr/share/nodejs/npm",
        };
        char dir[PATH_MAX];
        builtin_found = npm_dir_from_path(dir, sizeof dir) &&
                        from_npm_package(dir, builtin_url, sizeof builtin_url);
        for (size_t i = 0; !builtin_found && i < 3; i++)
            builtin_found =
                from_npm_package(dirs[i], builtin_url, sizeof builtin_url);
        if (!builtin_found)
            builtin_found = from_npm_command(builtin_url, sizeof builtin_url);
        builtin_done = true;
    }
    bool found = builtin_found && strlen(builtin_url) < cap;
    if (found)
        memcpy(url, builtin_url, strlen(builtin_url) + 1);
    pthread_mutex_unlock(&builtin_lock);
    return found;
}

/* The configured registry URL, first source that names one. */
static bool configured_url(char *url, size_t cap)
{
    const char *v = env_either("npm_config_registry", "NPM_CONFIG_REGISTRY");
    if (v) {
        snprintf(url, cap, "%s", v);
        return true;
    }
    char path[PATH_MAX];
    const char *user =
        env_either("npm_config_userconfig", "NPM_CONFIG_USERCONFIG");
    const char *home = getenv("HOME");
    if (user) {
        if (npmrc_registry(user, url, cap))
            return true;
    } else if (home && *home) {
        snprintf(path, sizeof path, "%s/.npmrc", home);
        if (npmrc_registry(path, url, cap))
            return true;
    }
    const char *global =
        env_either("npm_config_globalconfig", "NPM_CONFIG_GLOBALCONFIG");
    if (global)
        return npmrc_registry(global, url, cap) || builtin_default(url, cap);
    const char *prefix = env_either("npm_config_prefix", "NPM_CONFIG_PREFIX");
    if (!prefix)
        prefix = getenv("PREFIX");
    if (prefix && *prefix) {
        snprintf(path, sizeof path, "%s/etc/npmrc", prefix);
        if (npmrc_registry(path, url, cap))
            return true;
    }
    static const char *const globals[] = {"/etc/npmrc", "/usr/etc/npmrc",
                                          "/usr/local/etc/npmrc"};
    for (size_t i = 0; i < 3; i++)
        if (npmrc_registry(globals[i], url, cap))
            return true;
    return builtin_default(url, cap);
}

bool allowhosts_npm_registry(char *out, size_t outcap)
{
    char url[URL_MAX];
    if (!configured_url(url, sizeof url))
        return false;
    struct http_url parsed;
    const char *why;
    if (!allowhosts_parse_url(url, strlen(url), true, &parsed, &why))
        return false;
    int n = parsed.default_port
                ? snprintf(out, outcap, "%s", parsed.host)
                : snprintf(out, outcap, "%s:%d", parsed.host, parsed.port);
    return n > 0 && (size_t)n < outcap;
}
