/* The DRA checkpoint against a killed plugin (src/dra/dra-checkpoint.c, replace()): a
 * child process opens the checkpoint, saves one change and is SIGKILLed at each step of
 * that save in turn (in the middle of its write, before each rename and the unlink). The
 * parent then opens what the child left and must find, whole and not discarded, either
 * the checkpoint as it was or as changed, never less; and after that open nothing beside
 * checkpoint.json, and a next save that works. (The rest of the checkpoint's behaviour
 * is test-dra-claims' "checkpoint" case.) */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dra/dra-checkpoint.h"
#include "tests/common/check.h"
#include "tests/common/scratch.h"

int test_failures;

/* ---- the calls a save makes, interposed ------------------------------------------------
 * Defined here, they are the ones the static libgdp is linked against; they pass through
 * to the kernel. In the child, kill_at > 0 is the call at which it dies: before a rename
 * or an unlink is made, or half-way through a write (a torn temporary file). */
static int kill_at, calls;

static void maybe_die(int fd, const void *buf, size_t n)
{
    if (kill_at == 0 || ++calls != kill_at)
        return;
    if (buf && n > 1)
        (void)syscall(SYS_write, fd, buf, n / 2);
    (void)kill(getpid(), SIGKILL);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    maybe_die(fd, buf, n);
    return syscall(SYS_write, fd, buf, n);
}

int rename(const char *from, const char *to)
{
    maybe_die(-1, NULL, 0);
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 0);
}

int unlink(const char *path)
{
    maybe_die(-1, NULL, 0);
    return (int)syscall(SYS_unlinkat, AT_FDCWD, path, 0);
}

/* ---- helpers ---------------------------------------------------------------------------- */

static struct dra_ckpt_claim claim(const char *uid, enum dra_ckpt_state state)
{
    struct dra_ckpt_claim cl = { .uid = xstrdup(uid), .namespace_ = xstrdup("ns"),
                                 .name = xasprintf("claim-%s", uid), .state = state };
    cl.devices = xcalloc(2, sizeof(*cl.devices));
    cl.devices[cl.n_devices++] = (struct dra_ckpt_device){
        .device = xstrdup("gpu-0"), .pool = xstrdup("node"), .request = xstrdup("gpu"),
        .cdi_id = xasprintf("k8s.gpu.nvidia.com/claim=%s-gpu-0", uid),
        .config = { .kind = DRA_CONFIG_GPU },
    };
    return cl;
}

/* What open() finds in dir, as "uid:S|C,..." in the file's order; "!" when open() failed
 * or discarded the file (a torn or foreign checkpoint). */
static char *contents(const char *dir)
{
    struct dra_checkpoint c;
    struct error err = { 0 }, discarded = { 0 };
    int r = dra_checkpoint_open(&c, dir, "boot-1", &discarded, &err);
    if (r != 0) {
        fprintf(stderr, "open: %d: %s%s\n", r, err.msg, discarded.msg);
        if (r == 1)
            dra_checkpoint_clear(&c);
        return xstrdup("!");
    }
    char *s = xstrdup("");
    for (size_t i = 0; i < c.n_claims; i++) {
        char *t = xasprintf("%s%s%s:%c", s, i ? "," : "", c.claims[i].uid,
                            c.claims[i].state == DRA_CKPT_PREPARE_COMPLETED ? 'C' : 'S');
        free(s);
        s = t;
    }
    dra_checkpoint_clear(&c);
    return s;
}

/* The names in dir other than checkpoint.json, comma-separated ("" when none). */
static char *others(const char *dir)
{
    char *s = xstrdup("");
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (streq(e->d_name, ".") || streq(e->d_name, "..") || streq(e->d_name, DRA_CKPT_FILE))
            continue;
        char *t = xasprintf("%s%s%s", s, *s ? "," : "", e->d_name);
        free(s);
        s = t;
    }
    if (d)
        closedir(d);
    return s;
}

enum change { PUT_STARTED, PUT_COMPLETED, REMOVE, WIPE /* checkpoint.json removed */ };

static int apply(const char *dir, enum change what, const char *uid, int die_at)
{
    if (what == WIPE) {
        char *path = xasprintf("%s/" DRA_CKPT_FILE, dir);
        int r = unlink(path);
        free(path);
        return r;
    }
    struct dra_checkpoint c;
    struct error err = { 0 }, discarded = { 0 };
    if (dra_checkpoint_open(&c, dir, "boot-1", &discarded, &err) != 0)
        return -1;
    kill_at = die_at;
    calls = 0;
    int r;
    if (what == REMOVE) {
        r = dra_checkpoint_remove(&c, uid, &err);
    } else {
        struct dra_ckpt_claim cl =
            claim(uid, what == PUT_COMPLETED ? DRA_CKPT_PREPARE_COMPLETED : DRA_CKPT_PREPARE_STARTED);
        r = dra_checkpoint_put(&c, &cl, &err);
        dra_ckpt_claim_clear(&cl);
    }
    kill_at = 0;
    dra_checkpoint_clear(&c);
    return r;
}

/* From `before` on disk, the change `what` of uid killed at each of its calls in turn.
 * Each time: open() finds `before` or `after` (a torn or missing checkpoint fails here),
 * leaves nothing beside checkpoint.json, and the change made again gives `after`; `undo`
 * then sets up `before` again. Returns the number of kill points (the calls the change
 * makes), for the caller to check that the interposition saw them. */
static int killed_at_every_step(const char *dir, enum change what, enum change undo,
                                const char *uid, const char *before, const char *after)
{
    for (int k = 1; k < 16; k++) {
        char *now = contents(dir);
        CHECK_STR(now, before);
        free(now);
        pid_t pid = fork();
        if (pid == 0)
            _exit(apply(dir, what, uid, k) == 0 ? 0 : 2);
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        CHECK(killed || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
        now = contents(dir);
        if (!streq(now, before) && !streq(now, after)) {
            fprintf(stderr, "%s killed at call %d: \"%s\", neither \"%s\" nor \"%s\"\n", uid, k,
                    now, before, after);
            test_failures++;
        }
        char *left = others(dir);
        CHECK_STR(left, "");
        CHECK(apply(dir, what, uid, 0) == 0);
        char *then = contents(dir);
        CHECK_STR(then, after);
        free(then);
        free(left);
        free(now);
        CHECK(apply(dir, undo, uid, 0) == 0);
        if (!killed)
            return k - 1;
    }
    CHECK(!"the change was still being killed after 15 calls");
    return -1;
}

static void test_killed(void)
{
    const char *dir = scratch_dir("dra-ckpt-kill-");
    /* The first save (no checkpoint.json yet): its write, the rename of checkpoint.json
     * aside (ENOENT), the rename into place. */
    CHECK(killed_at_every_step(dir, PUT_STARTED, WIPE, "uid-a", "", "uid-a:S") == 3);
    CHECK(apply(dir, PUT_STARTED, "uid-a", 0) == 0);
    /* Replacing it: the write, both renames, the unlink of checkpoint.json.old. */
    CHECK(killed_at_every_step(dir, PUT_STARTED, REMOVE, "uid-b", "uid-a:S", "uid-a:S,uid-b:S") == 4);
    CHECK(apply(dir, PUT_STARTED, "uid-b", 0) == 0);
    CHECK(killed_at_every_step(dir, PUT_COMPLETED, PUT_STARTED, "uid-b", "uid-a:S,uid-b:S",
                               "uid-a:S,uid-b:C") == 4);
    CHECK(apply(dir, PUT_COMPLETED, "uid-b", 0) == 0);
    CHECK(killed_at_every_step(dir, REMOVE, PUT_COMPLETED, "uid-b", "uid-a:S,uid-b:C", "uid-a:S") == 4);
    scratch_remove(dir);
}

/* What a killed save leaves, made by hand, as open() must take it: checkpoint.json.old
 * alone is the checkpoint (killed between the renames); a .tmp is never read, even whole. */
static void test_leftovers(void)
{
    const char *dir = scratch_dir("dra-ckpt-left-");
    char *path = xasprintf("%s/" DRA_CKPT_FILE, dir);
    char *tmp = xasprintf("%s" DRA_CKPT_TMP_SUFFIX, path);
    char *old = xasprintf("%s" DRA_CKPT_OLD_SUFFIX, path);
    CHECK(apply(dir, PUT_COMPLETED, "uid-a", 0) == 0);
    CHECK(rename(path, old) == 0);
    char *now = contents(dir);
    CHECK_STR(now, "uid-a:C");
    free(now);
    CHECK(access(path, F_OK) == 0 && access(old, F_OK) < 0);

    /* A whole .tmp with no checkpoint.json: a first save killed before its rename. */
    CHECK(rename(path, tmp) == 0);
    now = contents(dir);
    CHECK_STR(now, "");
    free(now);
    CHECK(access(tmp, F_OK) < 0);

    /* Both beside checkpoint.json: it wins, they go. */
    CHECK(apply(dir, PUT_COMPLETED, "uid-b", 0) == 0);
    static const char other[] = "{\"version\": 1, \"nodeBootID\": \"boot-1\", \"preparedClaims\": {}}";
    for (const char *p = tmp; p; p = p == tmp ? old : NULL) {
        FILE *f = fopen(p, "w");
        CHECK(f && fputs(other, f) >= 0 && fclose(f) == 0);
    }
    now = contents(dir);
    CHECK_STR(now, "uid-b:C");
    free(now);
    char *left = others(dir);
    CHECK_STR(left, "");
    free(left);
    free(old);
    free(tmp);
    free(path);
    scratch_remove(dir);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        { "killed", test_killed },
        { "leftovers", test_leftovers },
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++)
        if (argc < 2 || streq(argv[1], cases[i].name))
            cases[i].fn();
    return test_failures ? 1 : 0;
}
