/* dra/dra-share-hook.c: the hook's host path, its install (copied once, atomically, mode
 * 0755; not again while the bytes there are the same; replaced when they differ or a link
 * stands there) and the CDI hook entries of one share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "dra/dra-share-hook.h"
#include "tests/common/scratch.h"

static int failures;
#define CHECK(c)                                                                              \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);             \
            failures++;                                                                       \
        }                                                                                     \
    } while (0)

static void put(const char *path, const char *text)
{
    CHECK(write_file_atomic(path, text, strlen(text), 0644, false) == 0);
}

static char *slurp(const char *path)
{
    char *t = NULL;
    size_t n;
    return read_file_bounded(path, 1 << 20, &t, &n, NULL) == 0 ? t : NULL;
}

static void test_install(void)
{
    const char *dir = scratch_dir("gdp-share-hook-");
    char src[512], dst[512];
    struct config cfg = { 0 };
    struct error err = { 0 };
    struct stat st, st2;

    cfg.dra.plugins_dir = (char *)dir;
    CHECK(dra_share_hook_path(&cfg, dst, sizeof(dst)) == 0);
    char want[600];
    snprintf(want, sizeof(want), "%s/gpu.nvidia.com/bin/gpu-device-plugin-cdi-hook", dir);
    CHECK(strcmp(dst, want) == 0);
    char tiny[8];
    CHECK(dra_share_hook_path(&cfg, tiny, sizeof(tiny)) == -ENAMETOOLONG);

    snprintf(src, sizeof(src), "%s/hook-v1", dir);
    put(src, "#!/bin/sh\necho v1\n");
    umask(077);
    CHECK(dra_share_hook_install_from(src, dst, &err) == 1); /* copied, directories made */
    CHECK(stat(dst, &st) == 0 && (st.st_mode & 07777) == 0755);
    char *t = slurp(dst);
    CHECK(t && strcmp(t, "#!/bin/sh\necho v1\n") == 0);
    free(t);
    /* the same bytes: not copied again (the same inode, untouched) */
    CHECK(dra_share_hook_install_from(src, dst, &err) == 0);
    CHECK(stat(dst, &st2) == 0 && st2.st_ino == st.st_ino && st2.st_mtime == st.st_mtime);
    /* a wrong mode is mended */
    CHECK(chmod(dst, 0700) == 0);
    CHECK(dra_share_hook_install_from(src, dst, &err) == 1);
    CHECK(stat(dst, &st) == 0 && (st.st_mode & 07777) == 0755);
    /* new bytes (an upgrade): replaced */
    put(src, "#!/bin/sh\necho v2\n");
    CHECK(dra_share_hook_install_from(src, dst, &err) == 1);
    t = slurp(dst);
    CHECK(t && strcmp(t, "#!/bin/sh\necho v2\n") == 0);
    free(t);
    /* a link planted there is replaced, never written through */
    char victim[600];
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    put(victim, "keep\n");
    CHECK(unlink(dst) == 0 && symlink(victim, dst) == 0);
    CHECK(dra_share_hook_install_from(src, dst, &err) == 1);
    CHECK(lstat(dst, &st) == 0 && S_ISREG(st.st_mode));
    t = slurp(victim);
    CHECK(t && strcmp(t, "keep\n") == 0);
    free(t);
    /* no source: a clear error, nothing changed */
    snprintf(src, sizeof(src), "%s/missing", dir);
    CHECK(dra_share_hook_install_from(src, dst, &err) == -ENOENT);
    CHECK(strstr(err.msg, "missing") != NULL);
    /* from this process's directory: this test has no hook beside it */
    CHECK(dra_share_hook_install(&cfg, &err) == -ENOENT);
    CHECK(strstr(err.msg, "gpu-device-plugin-cdi-hook") != NULL);
    umask(022);
}

static void test_edits(void)
{
    struct config cfg = { 0 };
    cfg.dra.plugins_dir = "/var/lib/kubelet/plugins";
    cfg.driver_root = "/run/nvidia/driver";
    json_t *h = dra_share_hook_edits(&cfg, "GPU-11111111-2222-3333-4444-555555555555",
                                     8589934592ULL);
    char *text = json_dumps(h, JSON_COMPACT);
    const char *want =
        "[{\"hookName\":\"createRuntime\","
        "\"path\":\"/var/lib/kubelet/plugins/gpu.nvidia.com/bin/gpu-device-plugin-cdi-hook\","
        "\"args\":[\"gpu-device-plugin-cdi-hook\",\"share-memory-limit\",\"--gpu\","
        "\"GPU-11111111-2222-3333-4444-555555555555\",\"--driver-root\",\"/run/nvidia/driver\","
        "\"--bytes\",\"8589934592\"],\"timeout\":30},"
        "{\"hookName\":\"poststop\","
        "\"path\":\"/var/lib/kubelet/plugins/gpu.nvidia.com/bin/gpu-device-plugin-cdi-hook\","
        "\"args\":[\"gpu-device-plugin-cdi-hook\",\"share-memory-limit\",\"--gpu\","
        "\"GPU-11111111-2222-3333-4444-555555555555\",\"--driver-root\",\"/run/nvidia/driver\","
        "\"--reset\"],\"timeout\":30}]";
    CHECK(text && strcmp(text, want) == 0);
    if (text && strcmp(text, want) != 0)
        fprintf(stderr, "got  %s\nwant %s\n", text, want);
    free(text);
    json_decref(h);
    /* the driver root "/" is the hook's default: not passed */
    cfg.driver_root = "/";
    h = dra_share_hook_edits(&cfg, "GPU-1", 1);
    text = json_dumps(h, JSON_COMPACT);
    CHECK(text && !strstr(text, "--driver-root"));
    free(text);
    json_decref(h);
}

int main(void)
{
    test_install();
    test_edits();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
