/* nvidia-smi found, its environment and its arguments (nvsmi.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "nvsmi.h"

static bool has_root(const char *root)
{
    return root && *root && !streq(root, "/");
}

char *nvsmi_path(const char *driver_root)
{
    static const char *const dirs[] = { "usr/bin", "usr/sbin", "bin", "sbin" };
    for (size_t i = 0; has_root(driver_root) && i < ELEMENTSOF(dirs); i++) {
        char *p = xasprintf("%s/%s/" NVSMI_NAME, driver_root, dirs[i]);
        if (access(p, X_OK) == 0)
            return p;
        free(p);
    }
    return xstrdup(NVSMI_NAME);
}

void nvsmi_env_init(struct nvsmi_env *e, const char *driver_root, const char *nvml_path)
{
    extern char **environ;
    /* With a driver root, never a preload of ours: it may name another libnvidia-ml. */
    bool root = has_root(driver_root), preload = root && nvml_path && strchr(nvml_path, '/');
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    *e = (struct nvsmi_env){ .envp = xcalloc(n + 2, sizeof(char *)) };
    for (size_t i = 0; i < n; i++)
        if (!root || strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            e->envp[k++] = environ[i];
    if (preload)
        e->envp[k++] = e->preload = xasprintf("LD_PRELOAD=%s", nvml_path);
}

void nvsmi_env_clear(struct nvsmi_env *e)
{
    free(e->envp);
    free(e->preload);
    *e = (struct nvsmi_env){ 0 };
}

int nvsmi_set_compute_mode(const char *driver_root, const char *nvml_path, const char *uuid,
                           const char *mode, unsigned timeout_ms, struct error *err)
{
    _cleanup_free_ char *tool = nvsmi_path(driver_root);
    _cleanup_(nvsmi_env_clear) struct nvsmi_env e;
    nvsmi_env_init(&e, driver_root, nvml_path);
    char *argv[] = { tool, "-i", (char *)uuid, "-c", (char *)mode, NULL };
    char out[TOOL_OUTPUT_MAX];
    int r = tool_run(argv, e.envp, NULL, timeout_ms, out, sizeof(out), err);
    if (r < 0)
        return error_prefix(err, "setting compute mode %s on %s", mode, uuid);
    return 0;
}

struct tool_run *nvsmi_set_timeslice(struct loop *l, const char *driver_root,
                                     const char *nvml_path, const char *uuid, unsigned value,
                                     unsigned timeout_ms, tool_done_fn done, void *userdata,
                                     struct error *err)
{
    _cleanup_free_ char *tool = nvsmi_path(driver_root);
    _cleanup_(nvsmi_env_clear) struct nvsmi_env e;
    nvsmi_env_init(&e, driver_root, nvml_path);
    char v[12];
    snprintf(v, sizeof(v), "%u", value);
    char *argv[] = { tool, "compute-policy", "-i", (char *)uuid, "--set-timeslice", v, NULL };
    return tool_start(l, argv, e.envp, NULL, timeout_ms, done, userdata, err);
}
