/*
 * launch_gpu.c - gpu = true: the host's GPU device nodes inside the
 * sandbox, and nothing else of the host's /dev.
 *
 * bwrap's --dev gives a minimal /dev (null, zero, random, tty, ...): a
 * CUDA, ROCm or Vulkan program finds no device. With gpu = true the spec
 * reader lists the GPU nodes that exist under /dev, by name, from one
 * allowlist: nvidia* (nvidia0.., nvidiactl, nvidia-uvm, nvidia-modeset,
 * the nvidia-caps directory), dri (DRM render and card nodes), kfd (AMD
 * ROCm) and dxg (WSL2). Only character devices are taken, and directories
 * for dri and nvidia-caps; a name with a byte outside [A-Za-z0-9_-] is
 * skipped (docker's --device splits on ':' and ','). bwrap binds each with
 * --dev-bind-try (a node unplugged between the listing and the launch is
 * skipped, not an error); docker and podman get --device.
 *
 * This is the one launch spec key that reads the machine: the argv
 * builders stay pure otherwise. ISOLATION_DEV_ROOT (test-only, documented
 * as such) lists another directory instead of /dev, so that a spec can
 * make fake nodes with mknod; the nodes are still bound at /dev/NAME.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "launch/launch.h"

static bool gpu_name(const char *n)
{
    if (strncmp(n, "nvidia", 6) != 0 && strcmp(n, "dri") != 0 &&
        strcmp(n, "kfd") != 0 && strcmp(n, "dxg") != 0)
        return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return false;
    return true;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The device root: /dev, or ISOLATION_DEV_ROOT (tests) when absolute. */
static const char *dev_root(void)
{
    const char *root = getenv("ISOLATION_DEV_ROOT");
    return root && root[0] == '/' ? root : "/dev";
}

size_t launch_gpu_list(char names[][LAUNCH_GPU_NAME], size_t max)
{
    const char *root = dev_root();
    DIR *d = opendir(root);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d)) != NULL) {
        if (strlen(e->d_name) >= LAUNCH_GPU_NAME || !gpu_name(e->d_name))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        bool dir_ok = strcmp(e->d_name, "dri") == 0 ||
                      strcmp(e->d_name, "nvidia-caps") == 0;
        if (!S_ISCHR(st.st_mode) && !(dir_ok && S_ISDIR(st.st_mode)))
            continue;
        strcpy(names[n++], e->d_name);
    }
    closedir(d);
    const char *sorted[LAUNCH_MAX_GPU];
    for (size_t i = 0; i < n; i++)
        sorted[i] = names[i];
    qsort(sorted, n, sizeof *sorted, by_name);
    char tmp[LAUNCH_MAX_GPU][LAUNCH_GPU_NAME];
    for (size_t i = 0; i < n; i++)
        strcpy(tmp[i], sorted[i]);
    memcpy(names, tmp, n * sizeof *tmp);
    return n;
}

int launch_gpu_read(lua_State *L, int idx, struct launch_spec *s)
{
    lua_pushstring(L, "gpu");
    lua_rawget(L, idx);
    int v = lua_gettop(L);
    if (msg_is_absent(L, v))
        return 1;
    if (lua_type(L, v) != LUA_TBOOLEAN)
        return msg_fail_got(L, v, "gpu", "must be a boolean");
    s->gpu = lua_toboolean(L, v);
    if (!s->gpu)
        return 1;
    char names[LAUNCH_MAX_GPU][LAUNCH_GPU_NAME];
    size_t n = launch_gpu_list(names, LAUNCH_MAX_GPU);
    luaL_checkstack(L, (int)(2 * n + 4), "gpu devices");
    const char *root = dev_root();
    for (size_t i = 0; i < n; i++) {
        s->gpu_host[i] = lua_pushfstring(L, "%s/%s", root, names[i]);
        s->gpu_dev[i] = lua_pushfstring(L, "/dev/%s", names[i]);
    }
    s->ngpu = n;
    return 1;
}

void launch_gpu_bwrap(struct argv_buf *b, const struct launch_spec *s)
{
    for (size_t i = 0; i < s->ngpu; i++) {
        argv_add(b, "--dev-bind-try");
        argv_add(b, s->gpu_host[i]);
        argv_add(b, s->gpu_dev[i]);
    }
}

void launch_gpu_docker(struct argv_buf *b, const struct launch_spec *s)
{
    for (size_t i = 0; i < s->ngpu; i++) {
        argv_add(b, "--device");
        if (strcmp(s->gpu_host[i], s->gpu_dev[i]) == 0) {
            argv_add(b, s->gpu_dev[i]);
        } else {
            lua_pushfstring(b->L, "%s:%s", s->gpu_host[i], s->gpu_dev[i]);
            argv_add_top(b);
        }
    }
}

void launch_gpu_describe(luaL_Buffer *b, const struct launch_spec *s)
{
    if (!s->gpu)
        return;
    if (s->ngpu == 0) {
        luaL_addstring(b, "gpu: no GPU device found (nvidia*, nvidia-caps, "
                          "dri, kfd, dxg): none bound\n");
        return;
    }
    luaL_addstring(b, "gpu devices (host -> sandbox, nothing else of the "
                      "host's /dev):\n");
    for (size_t i = 0; i < s->ngpu; i++) {
        luaL_addstring(b, "  device     ");
        luaL_addstring(b, s->gpu_host[i]);
        luaL_addstring(b, " -> ");
        luaL_addstring(b, s->gpu_dev[i]);
        luaL_addchar(b, '\n');
    }
}

/* isolation.gpu_devices() -> array of the GPU device paths found. */
int launch_gpu_devices(lua_State *L)
{
    char names[LAUNCH_MAX_GPU][LAUNCH_GPU_NAME];
    size_t n = launch_gpu_list(names, LAUNCH_MAX_GPU);
    const char *root = dev_root();
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushfstring(L, "%s/%s", root, names[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}
