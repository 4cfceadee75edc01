/* The share memory-limit hook on the host and in a share's CDI spec (dra-share-hook.h).
 *
 * The hook is a createRuntime hook, not createContainer: createRuntime runs in the
 * runtime's namespaces once the container's process exists and sits in its cgroup, so
 * the hook reads /proc/<pid>/cgroup with the host's pid and the host's cgroup namespace.
 * A createContainer hook runs inside the container's namespaces (runc: in its cgroup
 * namespace, where its cgroup reads "0::/", and its pid namespace, where the state's pid
 * is 1); both run before `start` executes the workload, so either fails closed. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/fs.h"
#include "dra/dra-share-hook.h"
#include "dra/dra-types.h"

#define HOOK_MAX (64u << 20) /* bytes of the hook executable, either copy */

int dra_share_hook_path(const struct config *cfg, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s/bin/%s", cfg->dra.plugins_dir, DRA_DRIVER_NAME,
                     DRA_SHARE_HOOK_NAME);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int dra_share_hook_install_from(const char *src, const char *dst, struct error *err)
{
    _cleanup_free_ char *want = NULL, *have = NULL;
    size_t want_len, have_len;
    struct stat st;
    int r = read_file_bounded(src, HOOK_MAX, &want, &want_len, NULL);
    if (r < 0)
        return error_set(err, r, "reading the share hook %s: %s", src, strerror(-r));
    /* not followed: a link planted there is replaced, never written through */
    r = read_file_bounded_flags(dst, O_NOFOLLOW, HOOK_MAX, &have, &have_len, &st);
    if (r == 0 && have_len == want_len && memcmp(have, want, want_len) == 0 &&
        (st.st_mode & 07777) == 0755)
        return 0;
    char dir[PATH_MAX];
    const char *slash = strrchr(dst, '/');
    if (!slash || (size_t)(slash - dst) >= sizeof(dir))
        return error_set(err, -EINVAL, "the share hook's path %s has no directory", dst);
    snprintf(dir, sizeof(dir), "%.*s", (int)(slash - dst), dst);
    r = mkdir_p(dir, 0755);
    if (r < 0)
        return error_set(err, r, "creating %s: %s", dir, strerror(-r));
    /* synced: a host crash must not leave a runtime a half-written hook to run */
    r = write_file_atomic(dst, want, want_len, 0755, true);
    if (r < 0)
        return error_set(err, r, "writing the share hook %s: %s", dst, strerror(-r));
    /* the mode exactly, whatever the umask took from it */
    if (chmod(dst, 0755) < 0)
        return error_set(err, -errno, "chmod %s: %s", dst, strerror(errno));
    return 1;
}

int dra_share_hook_install(const struct config *cfg, struct error *err)
{
    char exe[PATH_MAX], src[PATH_MAX + sizeof(DRA_SHARE_HOOK_NAME)], dst[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n < 0)
        return error_set(err, -errno, "reading /proc/self/exe: %s", strerror(errno));
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return error_set(err, -EINVAL, "/proc/self/exe is not a path: %s", exe);
    *slash = '\0';
    snprintf(src, sizeof(src), "%s/%s", exe, DRA_SHARE_HOOK_NAME);
    if (dra_share_hook_path(cfg, dst, sizeof(dst)) < 0)
        return error_set(err, -ENAMETOOLONG, "the share hook's path under %s is too long",
                         cfg->dra.plugins_dir);
    return dra_share_hook_install_from(src, dst, err);
}

static json_t *hook_entry(const char *hook_name, const char *path, json_t *args)
{
    json_t *o = json_object();
    json_object_set_new(o, "hookName", json_string(hook_name));
    json_object_set_new(o, "path", json_string(path));
    json_object_set_new(o, "args", args);
    json_object_set_new(o, "timeout", json_integer(DRA_SHARE_HOOK_TIMEOUT_S));
    return o;
}

static json_t *hook_args(const struct config *cfg, const char *gpu_uuid)
{
    json_t *a = json_array();
    json_array_append_new(a, json_string(DRA_SHARE_HOOK_NAME));
    json_array_append_new(a, json_string("share-memory-limit"));
    json_array_append_new(a, json_string("--gpu"));
    json_array_append_new(a, json_string(gpu_uuid));
    /* the host's driver root: the hook runs on the host */
    if (cfg->driver_root && *cfg->driver_root && !streq(cfg->driver_root, "/")) {
        json_array_append_new(a, json_string("--driver-root"));
        json_array_append_new(a, json_string(cfg->driver_root));
    }
    return a;
}

json_t *dra_share_hook_edits(const struct config *cfg, const char *gpu_uuid, uint64_t bytes)
{
    char path[PATH_MAX], num[32];
    if (dra_share_hook_path(cfg, path, sizeof(path)) < 0)
        return NULL;
    snprintf(num, sizeof(num), "%llu", (unsigned long long)bytes);
    json_t *set = hook_args(cfg, gpu_uuid), *reset = hook_args(cfg, gpu_uuid);
    json_array_append_new(set, json_string("--bytes"));
    json_array_append_new(set, json_string(num));
    json_array_append_new(reset, json_string("--reset"));
    json_t *hooks = json_array();
    json_array_append_new(hooks, hook_entry("createRuntime", path, set));
    json_array_append_new(hooks, hook_entry("poststop", path, reset));
    return hooks;
}
