/* core/nvsmi: nvidia-smi as DRA's sharing configs and mps-control-daemon both run it (each
 * had its own copy): found under the driver root (the first executable of usr/bin,
 * usr/sbin, bin, sbin), else on PATH; with a driver root its NVML preloaded and no preload
 * of ours; the compute mode's arguments exactly NVIDIA's, and a failure's words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/nvsmi.h"
#include "tests/common/check.h"

int test_failures;

static void put(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    CHECK(chmod(path, mode) == 0);
}

static int count_prefix(char **envp, const char *prefix, const char **last)
{
    int n = 0;
    for (; *envp; envp++)
        if (strncmp(*envp, prefix, strlen(prefix)) == 0) {
            n++;
            *last = *envp;
        }
    return n;
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    char root[4096];
    snprintf(root, sizeof(root), "%s/test-nvsmi.XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(root) != NULL);
    char *usr = xasprintf("%s/usr", root), *ubin = xasprintf("%s/usr/bin", root),
         *usbin = xasprintf("%s/usr/sbin", root), *bin = xasprintf("%s/bin", root);
    CHECK(mkdir(usr, 0755) == 0 && mkdir(ubin, 0755) == 0 && mkdir(usbin, 0755) == 0 &&
          mkdir(bin, 0755) == 0);

    /* Under the root: a file that is not executable is passed over. */
    char *plain = xasprintf("%s/nvidia-smi", ubin), *found = xasprintf("%s/nvidia-smi", usbin);
    put(plain, "not a program\n", 0644);
    put(found, "#!/bin/sh\nexit 0\n", 0755);
    char *p = nvsmi_path(root);
    CHECK_STR(p, found);
    free(p);
    /* No root, "/" or "": the plain name, for PATH. */
    const char *roots[] = { NULL, "", "/" };
    for (size_t i = 0; i < 3; i++) {
        p = nvsmi_path(roots[i]);
        CHECK_STR(p, "nvidia-smi");
        free(p);
    }
    char *empty = xasprintf("%s/empty", root);
    CHECK(mkdir(empty, 0755) == 0);
    p = nvsmi_path(empty); /* a root without the tool */
    CHECK_STR(p, "nvidia-smi");
    free(p);

    /* The environment: with a root, its NVML preloaded instead of ours; without, ours. */
    CHECK(setenv("LD_PRELOAD", "/ours.so", 1) == 0);
    const char *last = NULL;
    struct nvsmi_env e;
    nvsmi_env_init(&e, root, "/driver/lib/libnvidia-ml.so.1");
    CHECK(count_prefix(e.envp, "LD_PRELOAD=", &last) == 1);
    CHECK_STR(last, "LD_PRELOAD=/driver/lib/libnvidia-ml.so.1");
    CHECK(count_prefix(e.envp, "PATH=", &last) == 1);
    nvsmi_env_clear(&e);
    nvsmi_env_init(&e, root, "libnvidia-ml.so.1"); /* a plain name: nothing to preload */
    CHECK(count_prefix(e.envp, "LD_PRELOAD=", &last) == 0);
    nvsmi_env_clear(&e);
    nvsmi_env_init(&e, NULL, "/driver/lib/libnvidia-ml.so.1");
    CHECK(count_prefix(e.envp, "LD_PRELOAD=", &last) == 1);
    CHECK_STR(last, "LD_PRELOAD=/ours.so");
    nvsmi_env_clear(&e);
    CHECK(unsetenv("LD_PRELOAD") == 0);

    /* The compute mode: NVIDIA's arguments, the tool on PATH; a refusal named. */
    char *args = xasprintf("%s/args", root), *tool = xasprintf("%s/nvidia-smi", bin);
    char *script = xasprintf("#!/bin/sh\nif [ \"$2\" = GPU-2 ]; then echo 'Insufficient "
                             "Permissions'; exit 4; fi\necho \"$@\" > %s\n", args);
    put(tool, script, 0755);
    const char *old_path = getenv("PATH");
    char *path = xasprintf("%s:%s", bin, old_path ? old_path : "/usr/bin:/bin");
    CHECK(setenv("PATH", path, 1) == 0);
    struct error err = { 0 };
    CHECK(nvsmi_set_compute_mode(NULL, NULL, "GPU-1", "EXCLUSIVE_PROCESS", 10000, &err) == 0);
    FILE *f = fopen(args, "r");
    char line[256] = "";
    CHECK(f && fgets(line, sizeof(line), f));
    if (f)
        fclose(f);
    CHECK_STR(line, "-i GPU-1 -c EXCLUSIVE_PROCESS\n");
    CHECK(nvsmi_set_compute_mode(NULL, NULL, "GPU-2", "DEFAULT", 10000, &err) < 0);
    CHECK(strncmp(err.msg, "setting compute mode DEFAULT on GPU-2: ", 39) == 0);
    CHECK(strstr(err.msg, "nvidia-smi") && strstr(err.msg, "Insufficient Permissions"));
    if (old_path)
        setenv("PATH", old_path, 1);

    unlink(args);
    unlink(tool);
    unlink(plain);
    unlink(found);
    rmdir(empty);
    rmdir(bin);
    rmdir(usbin);
    rmdir(ubin);
    rmdir(usr);
    CHECK(rmdir(root) == 0);
    free(args), free(tool), free(script), free(path), free(plain), free(found), free(empty);
    free(usr), free(ubin), free(usbin), free(bin);
    return test_failures ? 1 : 0;
}
