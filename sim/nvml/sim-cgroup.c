/* Memory-limit records per cgroup on the simulated host (sim-cgroup.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sim-cgroup.h"
#include "sim-env.h"

#define CG2_MAGIC 0x63677270 /* CGROUP2_SUPER_MAGIC */
#define REC_MAX 16384

const char *sim_cg_root(void)
{
    const char *r = sim_env(SIM_CG_ROOT_ENV);
    return r && *r ? r : SIM_CG_REAL_ROOT;
}

static bool is_cgroup2(const char *path)
{
    struct statfs s;
    return statfs(path, &s) == 0 && (unsigned long)s.f_type == CG2_MAGIC;
}

int sim_cg_version(void)
{
    const char *v = sim_env(SIM_CG_VERSION_ENV);
    if (v && *v)
        return strcmp(v, "2") == 0 ? 2 : 1;
    const char *root = sim_cg_root();
    if (is_cgroup2(root))
        return 2;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/cgroup.controllers", root);
    return access(p, F_OK) == 0 ? 2 : 1;
}

/* `path` with trailing slashes removed (a copy). */
static char *trimmed(const char *path)
{
    char *s = strdup(path);
    if (!s)
        return NULL;
    for (size_t n = strlen(s); n > 1 && s[n - 1] == '/'; n--)
        s[n - 1] = 0;
    return s;
}

/* The part of `path` below `root` ("" for the root itself), or NULL when not under it. */
static const char *below(const char *path, const char *root)
{
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    if (strncmp(path, root, n) != 0 || (path[n] && path[n] != '/'))
        return NULL;
    return path + n;
}

char *sim_cg_resolve(const char *ns)
{
    const char *root = sim_cg_root();
    char *p = trimmed(ns);
    if (!p)
        return NULL;
    const char *rel = below(p, SIM_CG_REAL_ROOT);
    if (!rel)
        rel = below(p, root);
    if (!rel || strstr(rel, "/../") || (strlen(rel) >= 3 && strcmp(rel + strlen(rel) - 3, "/..") == 0)) {
        free(p);
        errno = EINVAL;
        return NULL;
    }
    if (!*rel || strcmp(rel, "/") == 0) {
        free(p);
        errno = EPERM;
        return NULL;
    }
    size_t len = strlen(root) + strlen(rel) + 1;
    char *dir = malloc(len);
    if (dir)
        snprintf(dir, len, "%s%s", root, rel);
    free(p);
    struct stat st;
    if (dir && (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))) {
        free(dir);
        errno = ENOENT;
        return NULL;
    }
    return dir;
}

/* Read the records of `dir` into buf (NUL-terminated). Length, 0 when none, or -errno. */
static int read_records(const char *dir, char *buf, size_t size)
{
    ssize_t n;
    buf[0] = 0;
    if (is_cgroup2(dir)) {
        n = getxattr(dir, SIM_CG_XATTR, buf, size - 1);
        if (n < 0)
            return errno == ENODATA ? 0 : -errno;
    } else {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/" SIM_CG_FILE, dir);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return errno == ENOENT ? 0 : -errno;
        n = read(fd, buf, size - 1);
        int e = errno;
        close(fd);
        if (n < 0)
            return -e;
    }
    buf[n] = 0;
    return (int)n;
}

static int write_records(const char *dir, const char *buf)
{
    size_t n = strlen(buf);
    if (is_cgroup2(dir)) {
        if (n == 0)
            return removexattr(dir, SIM_CG_XATTR) < 0 && errno != ENODATA ? -errno : 0;
        return setxattr(dir, SIM_CG_XATTR, buf, n, 0) < 0 ? -errno : 0;
    }
    char p[PATH_MAX], tmp[PATH_MAX];
    snprintf(p, sizeof(p), "%s/" SIM_CG_FILE, dir);
    if (n == 0)
        return unlink(p) < 0 && errno != ENOENT ? -errno : 0;
    snprintf(tmp, sizeof(tmp), "%s/." SIM_CG_FILE ".%d", dir, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int r = write(fd, buf, n) == (ssize_t)n ? 0 : -EIO;
    close(fd);
    if (r == 0 && rename(tmp, p) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    return r;
}

static int parse_line(const char *line, char *uuid, size_t ulen, uint64_t *soft, uint64_t *hard)
{
    char u[128], s[32], h[32];
    if (sscanf(line, "%127s %31s %31s", u, s, h) != 3)
        return -1;
    snprintf(uuid, ulen, "%s", u);
    *soft = strtoull(s, NULL, 10);
    *hard = strcmp(h, "max") == 0 ? SIM_CG_NONE : strtoull(h, NULL, 10);
    return 0;
}

int sim_cg_get(const char *dir, const char *uuid, uint64_t *soft, uint64_t *hard)
{
    char buf[REC_MAX];
    int n = read_records(dir, buf, sizeof(buf));
    if (n < 0)
        return n;
    for (char *line = buf, *next; *line; line = next) {
        next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        char u[128];
        uint64_t s, h;
        if (parse_line(line, u, sizeof(u), &s, &h) == 0 && strcasecmp(u, uuid) == 0) {
            *soft = s;
            *hard = h;
            return 0;
        }
    }
    return -ENOENT;
}

int sim_cg_set(const char *dir, const char *uuid, uint64_t soft, uint64_t hard)
{
    /* Two setters on one cgroup (two GPUs of a container in parallel) must not lose a
     * record: the read-modify-write holds the directory's lock. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    flock(dfd, LOCK_EX);
    char buf[REC_MAX], out[REC_MAX];
    size_t o = 0;
    int r = read_records(dir, buf, sizeof(buf));
    for (char *line = buf, *next; r >= 0 && *line; line = next) {
        next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        char u[128];
        uint64_t s, h;
        if (parse_line(line, u, sizeof(u), &s, &h) < 0 || strcasecmp(u, uuid) == 0)
            continue;
        o += (size_t)snprintf(out + o, sizeof(out) - o, "%.*s", (int)(next - line), line);
    }
    if (r >= 0 && (soft || hard != SIM_CG_NONE)) {
        char h[32];
        if (hard == SIM_CG_NONE)
            snprintf(h, sizeof(h), "max");
        else
            snprintf(h, sizeof(h), "%" PRIu64, hard);
        o += (size_t)snprintf(out + o, sizeof(out) - o, "%s %" PRIu64 " %s\n", uuid, soft, h);
    }
    out[o < sizeof(out) ? o : sizeof(out) - 1] = 0;
    if (r >= 0)
        r = o >= sizeof(out) ? -ENOSPC : write_records(dir, out);
    flock(dfd, LOCK_UN);
    close(dfd);
    return r < 0 ? r : 0;
}

char *sim_cg_self(void)
{
    const char *env = sim_env(SIM_CG_PROCESS_ENV);
    if (env && *env)
        return trimmed(env);
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return NULL;
    char line[4096], *dir = NULL;
    while (!dir && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "0::", 3) != 0)
            continue;
        line[strcspn(line, "\n")] = 0;
        const char *root = sim_cg_root();
        const char *rel = strcmp(line + 3, "/") == 0 ? "" : line + 3;
        size_t len = strlen(root) + strlen(rel) + 1;
        if ((dir = malloc(len)))
            snprintf(dir, len, "%s%s", root, rel);
    }
    fclose(f);
    return dir;
}

uint64_t sim_cg_hard_limit(const char *dir, const char *uuid)
{
    uint64_t best = SIM_CG_NONE;
    char *p = trimmed(dir);
    if (!p)
        return best;
    const char *root = sim_cg_root();
    bool walk = below(p, root) != NULL;
    for (;;) {
        uint64_t soft, hard;
        if (sim_cg_get(p, uuid, &soft, &hard) == 0 && hard < best)
            best = hard;
        /* Ancestors count too (dmem is hierarchical), up to the root, which has none. */
        char *slash = strrchr(p, '/');
        if (!walk || !slash || slash == p)
            break;
        *slash = 0;
        const char *rel = below(p, root);
        if (!rel || !*rel)
            break;
    }
    free(p);
    return best;
}
