/* cdi-hook: the OCI hooks a GPU share's CDI spec names (docs/cdi-hook.md).
 *
 *   gpu-device-plugin-cdi-hook share-memory-limit --gpu <GPU-uuid> --bytes <N>
 *       [--driver-root DIR]                       createRuntime: set the hard limit
 *   gpu-device-plugin-cdi-hook share-memory-limit --gpu <GPU-uuid> --reset
 *       [--driver-root DIR]                       poststop: remove it
 *
 * (also `gpu-device-plugin cdi-hook share-memory-limit ...`). The container runtime runs it
 * on the host with the OCI state JSON on stdin; it finds the container's cgroup v2
 * directory from /proc/<pid>/cgroup and puts the share's hard device-memory limit on it
 * through nvmlDeviceSetMemoryLimits_v1 (driver r615+), before the workload starts.
 *
 * Exit 0: done; or the driver or host cannot limit memory per cgroup (driver before r615,
 * /sys/fs/cgroup not cgroup2 (a v1 or hybrid host), MIG, or no NVML the hook can load under
 * the driver root): one line on stderr says the share is held by MPS's per-client limit
 * only, and the container starts. Exit 1 with one line on stderr: anything else; the
 * runtime then fails the container's start, which is right: on a host that can enforce a
 * share, a share that could not be enforced must not run unbounded next to the others.
 * Exit 2: bad arguments.
 *
 * Built twice: into the plugin, and alone (GDP_CDI_HOOK_MAIN) as gpu-device-plugin-cdi-hook,
 * linked against glibc only, the copy the plugin puts on the host (dra/dra-share-hook.c).
 * So this file uses nothing but the NVML door and core's libc-only helpers; the OCI
 * state is read by the small bounded JSON reader below, not by jansson.
 *
 * Test overrides: GDP_CDI_HOOK_PROC_ROOT stands for /proc; GDP_CDI_HOOK_CGROUP_ROOT for
 * /sys/fs/cgroup where the hook looks at its type (NVML is still given /sys/fs/cgroup<path>,
 * which the simulator maps to MOCK_NVML_CGROUP_ROOT). */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "commands.h"
#include "core/fs.h"
#include "nvml/nvml.h"

#define HOOK "cdi-hook share-memory-limit"
#define HOOK_TIMEOUT_S 20u            /* below the CDI hook timeout (dra-share-hook.c) */
#define STATE_MAX (1u << 20)          /* OCI state: the id, bundle and annotations */
#define CONFIG_MAX (8u << 20)         /* the bundle's config.json, poststop only */
#define PROC_CGROUP_MAX (64u << 10)
#define CGROUP_MOUNT "/sys/fs/cgroup"
#define CGROUP2_MAGIC 0x63677270u  /* CGROUP2_SUPER_MAGIC (linux/magic.h) */
#define PATH_CAP 4096u
#define JSON_DEPTH_MAX 64u
#define BYTES_MAX (1ULL << 50)        /* 1 PiB: larger is a wrong number, not a GPU */

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* ---- a bounded JSON reader: validates the whole document and keeps the one value at a
 * path of object keys (a string, decoded, or a number's text). Deep nesting, bad
 * escapes, control bytes and trailing bytes are errors. */
struct jreader {
    const char *p, *end;
    const char *const *want; /* keys from the top */
    unsigned n_want;
    char *out;               /* cap bytes */
    size_t cap;
    bool found;
    const char *why;         /* what was wrong (static) */
};

static int jfail(struct jreader *j, const char *why)
{
    if (!j->why)
        j->why = why;
    return -EINVAL;
}

static void jws(struct jreader *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

/* A string at j->p; decoded into buf (cap bytes) when buf is set; *truncated when it did
 * not fit. */
static int jstring(struct jreader *j, char *buf, size_t cap, bool *truncated)
{
    size_t n = 0;
    *truncated = false;
    if (j->p >= j->end || *j->p != '"')
        return jfail(j, "a string was expected");
    j->p++;
    for (;;) {
        if (j->p >= j->end)
            return jfail(j, "a string is not closed");
        unsigned char c = (unsigned char)*j->p++;
        unsigned cp = c;
        if (c == '"')
            break;
        if (c < 0x20)
            return jfail(j, "a control byte in a string");
        if (c == '\\') {
            if (j->p >= j->end)
                return jfail(j, "a string is not closed");
            char e = *j->p++;
            const char *esc = strchr("\"\\/bfnrt", e);
            if (e && esc)
                cp = (unsigned char)"\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
            else if (e == 'u') {
                cp = 0;
                for (int i = 0; i < 4; i++, j->p++) {
                    if (j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p) || !*j->p)
                        return jfail(j, "a bad \\u escape");
                    char h = *j->p;
                    cp = cp * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
                }
                if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff))
                    return jfail(j, "a \\u escape this reader does not take (NUL, surrogate)");
            } else
                return jfail(j, "a bad escape");
        }
        char enc[3];
        size_t k = 0;
        if (cp < 0x80 || cp == c)
            enc[k++] = (char)cp; /* ASCII, or a raw UTF-8 byte passed through */
        else if (cp < 0x800) {
            enc[k++] = (char)(0xc0 | (cp >> 6));
            enc[k++] = (char)(0x80 | (cp & 0x3f));
        } else {
            enc[k++] = (char)(0xe0 | (cp >> 12));
            enc[k++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            enc[k++] = (char)(0x80 | (cp & 0x3f));
        }
        if (!buf)
            continue;
        if (n + k >= cap)
            *truncated = true;
        else {
            memcpy(buf + n, enc, k);
            n += k;
        }
    }
    if (buf)
        buf[n] = '\0';
    return 0;
}

static int jnumber(struct jreader *j, const char **start)
{
    *start = j->p;
    if (j->p < j->end && *j->p == '-')
        j->p++;
    const char *digits = j->p;
    while (j->p < j->end && *j->p && ((*j->p >= '0' && *j->p <= '9') || strchr(".eE+-", *j->p)))
        j->p++;
    if (j->p == digits || *digits < '0' || *digits > '9')
        return jfail(j, "a bad number");
    return 0;
}

/* One value. `on_path`: how many of the wanted keys lead here, or -1 off the path. */
static int jvalue(struct jreader *j, int on_path, unsigned depth)
{
    bool capture = on_path >= 0 && (unsigned)on_path == j->n_want;
    bool truncated;
    jws(j);
    if (j->p >= j->end)
        return jfail(j, "a value was expected");
    if (depth > JSON_DEPTH_MAX)
        return jfail(j, "nested too deep");
    char c = *j->p;
    if (c == '{' || c == '[') {
        if (capture)
            return jfail(j, "the value is not a string or number");
        char close = c == '{' ? '}' : ']';
        j->p++;
        jws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return 0;
        }
        for (;;) {
            int next = -1;
            if (c == '{') {
                char key[256];
                jws(j);
                if (jstring(j, key, sizeof(key), &truncated) < 0)
                    return -EINVAL;
                if (on_path >= 0 && (unsigned)on_path < j->n_want && !truncated &&
                    streq(key, j->want[on_path]))
                    next = on_path + 1;
                jws(j);
                if (j->p >= j->end || *j->p++ != ':')
                    return jfail(j, "':' was expected");
            }
            if (jvalue(j, next, depth + 1) < 0)
                return -EINVAL;
            jws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == close) {
                j->p++;
                return 0;
            }
            return jfail(j, c == '{' ? "',' or '}' was expected" : "',' or ']' was expected");
        }
    }
    if (c == '"') {
        if (jstring(j, capture ? j->out : NULL, j->cap, &truncated) < 0)
            return -EINVAL;
        if (capture && truncated)
            return jfail(j, "the value is too long");
        j->found = j->found || capture;
        return 0;
    }
    static const char *const literals[] = { "true", "false", "null" };
    for (size_t i = 0; i < ELEMENTSOF(literals); i++) {
        size_t n = strlen(literals[i]);
        if ((size_t)(j->end - j->p) >= n && memcmp(j->p, literals[i], n) == 0) {
            if (capture)
                return jfail(j, "the value is not a string or number");
            j->p += n;
            return 0;
        }
    }
    const char *start;
    if (jnumber(j, &start) < 0)
        return -EINVAL;
    if (capture) {
        if ((size_t)(j->p - start) >= j->cap)
            return jfail(j, "the value is too long");
        memcpy(j->out, start, (size_t)(j->p - start));
        j->out[j->p - start] = '\0';
        j->found = true;
    }
    return 0;
}

/* 1 with out set, 0 when the document has no such value, -EINVAL (*why) when it is not
 * JSON or the value is of the wrong kind. */
static int json_get(const char *text, size_t len, const char *const *path, unsigned n,
                    char *out, size_t cap, const char **why)
{
    struct jreader j = { .p = text, .end = text + len, .want = path, .n_want = n,
                         .out = out, .cap = cap };
    int r = jvalue(&j, 0, 0);
    if (r == 0) {
        jws(&j);
        if (j.p != j.end)
            r = jfail(&j, "bytes after the document");
    }
    *why = j.why;
    return r < 0 ? r : j.found;
}

/* ---- the container's cgroup */
struct hook_args {
    const char *gpu, *driver_root;
    uint64_t bytes;
    bool have_bytes, reset;
};

static const char *proc_root(void)
{
    const char *p = getenv("GDP_CDI_HOOK_PROC_ROOT");
    return p && *p ? p : "/proc";
}

static const char *cgroup_root(void)
{
    const char *p = getenv("GDP_CDI_HOOK_CGROUP_ROOT");
    return p && *p ? p : CGROUP_MOUNT;
}

/* Whether /sys/fs/cgroup is the cgroup v2 hierarchy, where NVML's per-cgroup limits live
 * (the hook names a cgroup as /sys/fs/cgroup<path>). A v1 host has a tmpfs there (hybrid:
 * with cgroup2 below it, at unified), yet the kernel prints a "0::" line for every process
 * once cgroup2 was mounted anywhere: "0::/" there is the v2 root the container never left,
 * not a sign of a hook run in its cgroup namespace. Only a cgroup2 root has
 * cgroup.controllers (also the tests' tree, which is not a cgroup2 mount). */
static bool cgroup2_at_mount(void)
{
    struct statfs s;
    char p[PATH_CAP];
    if (statfs(cgroup_root(), &s) == 0 && (unsigned long)s.f_type == CGROUP2_MAGIC)
        return true;
    if (snprintf(p, sizeof(p), "%s/cgroup.controllers", cgroup_root()) >= (int)sizeof(p))
        return false;
    return access(p, F_OK) == 0;
}

/* A cgroup path as the kernel prints it below the hierarchy's root: absolute, printable,
 * no "." or ".." component, short enough to join to /sys/fs/cgroup. */
static bool cgroup_path_ok(const char *p)
{
    if (p[0] != '/' || strlen(p) + sizeof(CGROUP_MOUNT) >= PATH_CAP)
        return false;
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return false;
    for (const char *c = p; (c = strchr(c, '/')); c++)
        if ((c[1] == '.' && (c[2] == '/' || !c[2])) ||
            (c[1] == '.' && c[2] == '.' && (c[3] == '/' || !c[3])))
            return false;
    return true;
}

/* The `0::<path>` line of /proc/<pid>/cgroup. -ENOTSUP: none (a cgroup v1 host). */
static int cgroup_of_pid(long pid, char *out, size_t cap, struct error *err)
{
    char path[PATH_CAP];
    if (snprintf(path, sizeof(path), "%s/%ld/cgroup", proc_root(), pid) >= (int)sizeof(path))
        return error_set(err, -ENAMETOOLONG, "the proc root is too long");
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = read_file_bounded(path, PROC_CGROUP_MAX, &text, &len, NULL);
    if (r < 0)
        return error_set(err, r, "reading %s: %s", path, strerror(-r));
    for (char *line = text, *nl; line && *line; line = nl) {
        nl = strchr(line, '\n');
        if (nl)
            *nl++ = '\0';
        if (strncmp(line, "0::", 3) != 0)
            continue;
        const char *cg = line + 3;
        if (!cgroup_path_ok(cg) || strstr(cg, " (deleted)"))
            return error_set(err, -EINVAL, "%s: not a usable cgroup v2 path: \"%s\"", path, cg);
        snprintf(out, cap, "%s", cg);
        return 0;
    }
    return error_set(err, -ENOTSUP, "%s has no cgroup v2 line (a cgroup v1 host)", path);
}

/* systemd's slice name "a-b-c.slice" as its path "/a.slice/a-b.slice/a-b-c.slice". */
static int systemd_slice_path(const char *slice, char *out, size_t cap)
{
    size_t n = strlen(slice), used = 0;
    out[0] = '\0';
    if (streq(slice, "-.slice"))
        return 0;
    if (n < 7 || strcmp(slice + n - 6, ".slice") != 0 || strchr(slice, '/'))
        return -EINVAL;
    for (size_t i = 0; i + 6 <= n; i++) {
        if (slice[i] != '-' && i + 6 != n)
            continue;
        int w = snprintf(out + used, cap - used, "/%.*s.slice", (int)i, slice);
        if (w < 0 || (size_t)w >= cap - used)
            return -ENAMETOOLONG;
        used += (size_t)w;
    }
    return 0;
}

/* The bundle's linux.cgroupsPath as a path below /sys/fs/cgroup: "slice:prefix:name"
 * (runc's systemd driver: <slice path>/<prefix>-<name>.scope) or an absolute cgroupfs
 * path. For poststop, when the container's process is gone. */
static int cgroup_of_bundle(const char *bundle, char *out, size_t cap, struct error *err)
{
    char path[PATH_CAP], cg[PATH_CAP];
    const char *why = NULL;
    if (bundle[0] != '/' ||
        snprintf(path, sizeof(path), "%s/config.json", bundle) >= (int)sizeof(path))
        return error_set(err, -EINVAL, "the state's bundle is not a usable absolute path");
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = read_file_bounded_flags(path, O_NOFOLLOW, CONFIG_MAX, &text, &len, NULL);
    if (r < 0)
        return error_set(err, r, "reading %s: %s", path, strerror(-r));
    static const char *const key[] = { "linux", "cgroupsPath" };
    r = json_get(text, len, key, 2, cg, sizeof(cg), &why);
    if (r < 0)
        return error_set(err, r, "%s: not an OCI config: %s", path, why);
    if (r == 0)
        return error_set(err, -ENOENT, "%s has no linux.cgroupsPath", path);
    char *c1 = strchr(cg, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c2) {
        char slice[PATH_CAP];
        *c1 = *c2 = '\0';
        if (systemd_slice_path(*cg ? cg : "system.slice", slice, sizeof(slice)) < 0)
            return error_set(err, -EINVAL, "%s: linux.cgroupsPath: a bad slice", path);
        const char *name = c2 + 1;
        size_t nl = strlen(name);
        bool unit = nl > 6 && streq(name + nl - 6, ".slice");
        r = snprintf(out, cap, "%s/%s%s%s%s", slice, unit ? "" : c1 + 1,
                     unit || !c1[1] ? "" : "-", name, unit ? "" : ".scope");
        if (r < 0 || (size_t)r >= cap)
            return error_set(err, -ENAMETOOLONG, "%s: linux.cgroupsPath is too long", path);
    } else if (snprintf(out, cap, "%s", cg) >= (int)cap)
        return error_set(err, -ENAMETOOLONG, "%s: linux.cgroupsPath is too long", path);
    if (!cgroup_path_ok(out) || streq(out, "/"))
        return error_set(err, -EINVAL, "%s: linux.cgroupsPath is not an absolute cgroup path",
                         path);
    return 0;
}

/* The container's cgroup from the OCI state on stdin. -ENOTSUP: no v2 cgroup to limit. */
static int container_cgroup(bool reset, char *out, size_t cap, struct error *err)
{
    _cleanup_free_ char *state = NULL;
    size_t len;
    const char *why = NULL;
    char pid_text[32] = "", bundle[PATH_CAP] = "";
    int r = read_fd_bounded(STDIN_FILENO, 0, STATE_MAX, &state, &len);
    if (r == -EFBIG)
        return error_set(err, r, "the OCI state on stdin is larger than %u bytes", STATE_MAX);
    if (r < 0)
        return error_set(err, r, "reading the OCI state from stdin: %s", strerror(-r));
    static const char *const k_pid[] = { "pid" }, *const k_bundle[] = { "bundle" };
    r = json_get(state, len, k_pid, 1, pid_text, sizeof(pid_text), &why);
    if (r >= 0)
        r = json_get(state, len, k_bundle, 1, bundle, sizeof(bundle), &why);
    if (r < 0)
        return error_set(err, -EINVAL, "the OCI state on stdin is not valid: %s", why);
    char *end = NULL;
    errno = 0;
    long pid = *pid_text ? strtol(pid_text, &end, 10) : 0;
    if (*pid_text && (errno || *end || pid < 0 || pid > INT_MAX))
        return error_set(err, -EINVAL, "the OCI state's pid is not a process id");
    if (pid > 0) {
        r = cgroup_of_pid(pid, out, cap, err);
        /* poststop: the process may be gone, its pid then names nothing (or another) */
        if (r >= 0 || !reset || !*bundle)
            goto check;
    }
    if (!reset)
        return error_set(err, -EINVAL, "the OCI state carries no pid (run as a createRuntime "
                         "hook, when the container's process exists)");
    if (!*bundle)
        return error_set(err, -ENOENT, "the OCI state carries neither a live pid nor a bundle");
    r = cgroup_of_bundle(bundle, out, cap, err);
check:
    if (r == 0 && !cgroup2_at_mount())
        return error_set(err, -ENOTSUP, "%s is not cgroup v2 (a cgroup v1 or hybrid host): no "
                         "per-cgroup memory limit there", CGROUP_MOUNT);
    if (r == 0 && streq(out, "/"))
        /* on a v2 host, the root of this hook's cgroup namespace: the hook runs inside the
         * container's namespaces (createContainer with a cgroup namespace), where it cannot
         * name it */
        return error_set(err, -EINVAL, "the container's cgroup reads as \"/\" from the hook "
                         "(run it as a createRuntime hook, in the runtime's namespaces)");
    return r;
}

/* ---- the command */
static int usage(const char *why)
{
    fprintf(stderr, "%s: %s\nusage: gpu-device-plugin-cdi-hook share-memory-limit --gpu "
            "<GPU-uuid> (--bytes <N> | --reset) [--driver-root DIR]\n"
            "  (the OCI state on stdin; see docs/cdi-hook.md)\n", HOOK, why);
    return EXIT_USAGE;
}

static bool uuid_ok(const char *u)
{
    size_t n = strlen(u);
    if (n < 5 || n > 80 || (strncmp(u, "GPU-", 4) != 0 && strncmp(u, "MIG-", 4) != 0))
        return false;
    return strspn(u + 4, "0123456789abcdefABCDEF-") == n - 4;
}

/* `--name value` or `--name=value` at argv[*i]: 1 with *val set, 0 when argv[*i] is not
 * this flag, -1 when its value is missing. */
static int flag(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t n = strlen(name);
    const char *arg = argv[*i];
    if (strncmp(arg, name, n) != 0 || (arg[n] != '=' && arg[n] != '\0'))
        return 0;
    *val = arg[n] == '=' ? arg + n + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
    return *val ? 1 : -1;
}

static int parse_args(int argc, char **argv, struct hook_args *a)
{
    for (int i = 2; i < argc; i++) {
        const char *val = NULL, *bytes = NULL;
        int f = 0;
        if (streq(argv[i], "--reset"))
            a->reset = true;
        else if ((f = flag(argc, argv, &i, "--gpu", &val)) != 0)
            a->gpu = val;
        else if ((f = flag(argc, argv, &i, "--driver-root", &val)) != 0)
            a->driver_root = val;
        else if ((f = flag(argc, argv, &i, "--bytes", &val)) != 0)
            bytes = val;
        else
            return usage(streq(argv[i], "--help") || streq(argv[i], "-h")
                         ? "the hooks of a GPU share's CDI spec" : "unknown argument");
        if (f < 0)
            return usage("a flag without its value");
        if (bytes) {
            char *end = NULL;
            errno = 0;
            unsigned long long b = strtoull(bytes, &end, 10);
            if (errno || *end || *bytes < '0' || *bytes > '9' || b == 0 || b > BYTES_MAX)
                return usage("--bytes: a whole number of bytes, 1 to 2^50");
            a->bytes = b;
            a->have_bytes = true;
        }
    }
    if (!a->gpu || !uuid_ok(a->gpu))
        return usage("--gpu: a GPU UUID (GPU-...) is required");
    if (a->reset == a->have_bytes)
        return usage("one of --bytes and --reset is required");
    if (a->driver_root && (a->driver_root[0] != '/' || strlen(a->driver_root) >= PATH_CAP))
        return usage("--driver-root: an absolute path");
    return 0;
}

static void on_alarm(int sig)
{
    static const char msg[] = HOOK ": timed out (NVML or /proc did not answer in time)\n";
    (void)sig;
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(EXIT_FAIL);
}

static int apply(const struct hook_args *a, const char *ns, struct error *err)
{
    nvml_device dev;
    int r = nvml_open(a->driver_root ? a->driver_root : "/", err);
    if (r < 0)
        return r;
    r = nvml_device_by_uuid(a->gpu, &dev, err);
    if (r == 0 && a->reset)
        r = nvml_device_reset_memory_limits(dev, ns, err);
    else if (r == 0) {
        /* hard only, soft 0: nothing is added to the ancestors' guarantees, so nothing
         * leaks when the cgroup goes (docs/cdi-hook.md) */
        r = nvml_device_set_memory_limits(dev, ns, 0, a->bytes, err);
        uint64_t soft, hard;
        int g = r == 0 ? nvml_device_memory_limits(dev, ns, &soft, &hard, NULL) : -ENOSYS;
        if (g == 0 && hard != a->bytes)
            r = error_set(err, -EIO, "the limit read back is %llu bytes, not %llu",
                          (unsigned long long)hard, (unsigned long long)a->bytes);
    }
    nvml_close();
    return r;
}

int cmd_cdi_hook(int argc, char **argv)
{
    struct hook_args a = { 0 };
    struct error err = { 0 };
    char cg[PATH_CAP], ns[PATH_CAP + sizeof(CGROUP_MOUNT)];

    if (argc < 2 || !streq(argv[1], "share-memory-limit"))
        return usage("the one hook is share-memory-limit");
    int r = parse_args(argc, argv, &a);
    if (r)
        return r;
    struct sigaction sa = { .sa_handler = on_alarm };
    sigaction(SIGALRM, &sa, NULL);
    alarm(HOOK_TIMEOUT_S);

    r = container_cgroup(a.reset, cg, sizeof(cg), &err);
    if (r == -ENOTSUP) {
        if (!a.reset)
            fprintf(stderr, "%s: share of %s: %s; the share is enforced by MPS's per-client "
                    "limit only\n", HOOK, a.gpu, err.msg);
        return EXIT_OK;
    }
    if (r < 0) {
        fprintf(stderr, "%s: share of %s: %s\n", HOOK, a.gpu, err.msg);
        return EXIT_FAIL;
    }
    snprintf(ns, sizeof(ns), CGROUP_MOUNT "%s", cg);
    r = apply(&a, ns, &err);
    /* no NVML to ask (-ELIBACC: a host whose driver the hook cannot find) says nothing of
     * what the host could enforce: as a driver without the call, the share starts held by
     * MPS alone, with the line saying so, instead of every share pod failing */
    if (r == -ENOTSUP || r == -ENOSYS || r == -ELIBACC) {
        if (!a.reset)
            fprintf(stderr, "%s: share of %s: no per-cgroup memory limit with this driver or "
                    "host (%s); the share is enforced by MPS's per-client limit only\n",
                    HOOK, a.gpu, err.msg);
        return EXIT_OK;
    }
    if (r == -ENOENT && a.reset)
        return EXIT_OK; /* the cgroup is gone: its limits went with it */
    if (r < 0) {
        fprintf(stderr, "%s: share of %s on %s: %s %s\n", HOOK, a.gpu, ns,
                a.reset ? "removing the limit:" : "setting the limit failed, the container "
                "must not start unbounded:", err.msg);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

#ifdef GDP_CDI_HOOK_MAIN
int main(int argc, char **argv)
{
    return cmd_cdi_hook(argc, argv);
}
#endif
