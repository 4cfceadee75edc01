/* The DRA checkpoint against a killed plugin (src/dra/dra-checkpoint.c, replace()): a
 * child process opens the checkpoint, saves one change and is SIGKILLed at each step of
 * that save in turn (half-way through its write, before the truncation, before the
 * exchange, before the rename). The parent then opens what the child left and must find,
 * whole and not discarded, either the checkpoint as it was or as changed, never less, and
 * nothing beside it but the spare; and the change made again gives the changed one. The
 * same on a filesystem that cannot exchange two names. Then the spare: never read, its
 * leftover content cut off. Then what is not a regular file at either name, at a save
 * and at open: moved aside, never blocking or followed. (The rest of the checkpoint is
 * test-dra-claims' "checkpoint" case.) */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fs.h"
#include "dra/dra-checkpoint.h"
#include "tests/common/check.h"
#include "tests/common/scratch.h"
#include "tests/common/cases.h"

int test_failures;

/* ---- the calls a save makes, interposed ------------------------------------------------
 * Defined here, they are the ones the static libgdp is linked against; they pass through
 * to the kernel. In the child, kill_at > 0 is the call at which it dies: before it is
 * made, or half-way through a write (a torn file). no_exchange: renameat2 answers EINVAL,
 * as a filesystem without RENAME_EXCHANGE does. */
static int kill_at, calls;
static bool no_exchange;

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

int ftruncate(int fd, off_t len)
{
    maybe_die(-1, NULL, 0);
    return (int)syscall(SYS_ftruncate, fd, len);
}

int renameat2(int from_dir, const char *from, int to_dir, const char *to, unsigned flags)
{
    maybe_die(-1, NULL, 0);
    if (no_exchange && (flags & RENAME_EXCHANGE)) {
        errno = EINVAL;
        return -1;
    }
    return (int)syscall(SYS_renameat2, from_dir, from, to_dir, to, flags);
}

int rename(const char *from, const char *to)
{
    maybe_die(-1, NULL, 0);
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 0);
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
    int r = dra_checkpoint_open(&c, dir, "boot-1", "node", &discarded, &err);
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

/* The names in dir other than checkpoint.json and its spare, comma-separated ("" when none). */
static char *others(const char *dir)
{
    char *s = xstrdup("");
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (streq(e->d_name, ".") || streq(e->d_name, "..") || streq(e->d_name, DRA_CKPT_FILE) ||
            streq(e->d_name, DRA_CKPT_FILE DRA_CKPT_SPARE_SUFFIX))
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
    if (dra_checkpoint_open(&c, dir, "boot-1", "node", &discarded, &err) != 0)
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
 * leaves nothing beside checkpoint.json but its spare, and the change made again gives
 * `after`; `undo` then sets up `before` again. Returns the number of kill points (the
 * calls the change makes), for the caller to check that the interposition saw them. */
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
    /* The first save (no checkpoint.json yet): the write into the spare, its truncation,
     * the exchange (ENOENT), the rename. */
    CHECK(killed_at_every_step(dir, PUT_STARTED, WIPE, "uid-a", "", "uid-a:S") == 4);
    CHECK(apply(dir, PUT_STARTED, "uid-a", 0) == 0);
    /* The next ones: the write, the truncation, the exchange. */
    CHECK(killed_at_every_step(dir, PUT_STARTED, REMOVE, "uid-b", "uid-a:S", "uid-a:S,uid-b:S") == 3);
    CHECK(apply(dir, PUT_STARTED, "uid-b", 0) == 0);
    CHECK(killed_at_every_step(dir, PUT_COMPLETED, PUT_STARTED, "uid-b", "uid-a:S,uid-b:S",
                               "uid-a:S,uid-b:C") == 3);
    CHECK(apply(dir, PUT_COMPLETED, "uid-b", 0) == 0);
    CHECK(killed_at_every_step(dir, REMOVE, PUT_COMPLETED, "uid-b", "uid-a:S,uid-b:C", "uid-a:S") == 3);
    /* A filesystem that cannot exchange: the spare renamed over checkpoint.json. */
    CHECK(apply(dir, REMOVE, "uid-b", 0) == 0);
    no_exchange = true;
    CHECK(killed_at_every_step(dir, PUT_COMPLETED, REMOVE, "uid-c", "uid-a:S", "uid-a:S,uid-c:C") == 4);
    CHECK(apply(dir, WIPE, NULL, 0) == 0);
    CHECK(killed_at_every_step(dir, PUT_STARTED, WIPE, "uid-d", "", "uid-d:S") == 4);
    no_exchange = false;
    scratch_remove(dir);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0);
    if (f)
        CHECK(fclose(f) == 0);
}

/* The spare (checkpoint.json.old) is never read: garbage there changes nothing, a save
 * over a longer one leaves none of it behind, and it then holds the checkpoint before. */
static void test_spare(void)
{
    const char *dir = scratch_dir("dra-ckpt-spare-");
    char *path = xasprintf("%s/" DRA_CKPT_FILE, dir);
    char *spare = xasprintf("%s" DRA_CKPT_SPARE_SUFFIX, path);
    CHECK(apply(dir, PUT_COMPLETED, "uid-a", 0) == 0);
    char *garbage = xcalloc(10001, 1);
    memset(garbage, '}', 10000);
    write_text(spare, garbage);
    char *now = contents(dir);
    CHECK_STR(now, "uid-a:C");
    free(now);
    CHECK(apply(dir, PUT_COMPLETED, "uid-b", 0) == 0);
    now = contents(dir);
    CHECK_STR(now, "uid-a:C,uid-b:C");
    free(now);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size < 1000 && (st.st_mode & 0777) == 0600);
    /* The spare is the one before: moved into place, it is read as that. */
    CHECK(rename(spare, path) == 0);
    now = contents(dir);
    CHECK_STR(now, "uid-a:C");
    free(now);
    free(garbage);
    free(spare);
    free(path);
    scratch_remove(dir);
}

static bool is_type(const char *path, mode_t type)
{
    struct stat st;
    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

/* What is not a regular file where the checkpoint or its spare goes (issue 30, rows 4, 5
 * and 12): a FIFO (with a reader or without: never opened blocking), a symlink (never
 * followed: what it points to is neither read nor written), a directory. A save moves it
 * to <name>.not-regular and succeeds, checkpoint.json then whole; at open, a
 * checkpoint.json that is one is moved so, with the start going on empty. */
static void test_not_regular(void)
{
    const char *dir = scratch_dir("dra-ckpt-type-");
    char *path = xasprintf("%s/" DRA_CKPT_FILE, dir);
    char *spare = xasprintf("%s" DRA_CKPT_SPARE_SUFFIX, path);
    char *path_aside = xasprintf("%s.not-regular", path);
    char *spare_aside = xasprintf("%s.not-regular", spare);
    char *elsewhere = xasprintf("%s/elsewhere", dir);
    static const char *const uids[] = { "uid-a", "uid-b", "uid-c", "uid-d", "uid-e" };
    CHECK(apply(dir, PUT_COMPLETED, "uid-z", 0) == 0); /* a checkpoint.json, no spare */
    write_text(elsewhere, "not a checkpoint");

    for (int k = 0; k < 4; k++) {
        /* At the spare: a FIFO without a reader, one with, a symlink, a directory. */
        const char *at = spare;
        int reader = -1;
        (void)unlink(spare);
        if (k == 0 || k == 1)
            CHECK(mkfifo(at, 0600) == 0);
        if (k == 1)
            CHECK((reader = open(at, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) >= 0);
        if (k == 2)
            CHECK(symlink(elsewhere, at) == 0);
        if (k == 3)
            CHECK(mkdir(at, 0700) == 0);
        mode_t type = k < 2 ? S_IFIFO : k == 3 ? S_IFDIR : S_IFLNK;
        char *want = xasprintf("uid-z:C,%s:C", uids[k]);
        CHECK(apply(dir, PUT_COMPLETED, uids[k], 0) == 0);
        char *now = contents(dir);
        CHECK_STR(now, want);
        CHECK(is_type(spare_aside, type));
        CHECK(is_type(path, S_IFREG) && is_type(spare, S_IFREG));
        if (reader >= 0) {
            char buf[8];
            CHECK(read(reader, buf, sizeof(buf)) == 0); /* nothing written into it */
            close(reader);
        }
        CHECK(apply(dir, REMOVE, uids[k], 0) == 0);
        CHECK(unlink(spare_aside) == 0 || rmdir(spare_aside) == 0);
        free(now);
        free(want);
    }
    /* checkpoint.json made a symlink while the plugin runs: the next save sets it aside
     * under its own name, not the exchange into the spare's. */
    struct dra_checkpoint c;
    struct error err = { 0 }, discarded = { 0 };
    CHECK(dra_checkpoint_open(&c, dir, "boot-1", "node", &discarded, &err) == 0);
    CHECK(unlink(path) == 0 && symlink(elsewhere, path) == 0);
    struct dra_ckpt_claim cl = claim("uid-e", DRA_CKPT_PREPARE_COMPLETED);
    CHECK(dra_checkpoint_put(&c, &cl, &err) == 0 && !cl.uid);
    dra_checkpoint_clear(&c);
    char *now = contents(dir);
    CHECK_STR(now, "uid-z:C,uid-e:C");
    free(now);
    CHECK(is_type(path_aside, S_IFLNK) && is_type(path, S_IFREG) && unlink(path_aside) == 0);
    char *text = NULL;
    size_t len;
    CHECK(read_file_bounded(elsewhere, 100, &text, &len, NULL) == 0 && streq(text, "not a checkpoint"));
    free(text);

    /* At open: checkpoint.json a symlink to a checkpoint (not read through), a FIFO (with a
     * writer: it opens), a directory; each moved aside, the start empty. The third finds
     * the FIFO before it at the first name, and takes the next. */
    CHECK(rename(path, elsewhere) == 0);
    char *next = xasprintf("%s.1", path_aside);
    for (int k = 0; k < 3; k++) {
        int writer = -1;
        if (k == 0)
            CHECK(symlink(elsewhere, path) == 0);
        if (k == 1) {
            CHECK(mkfifo(path, 0600) == 0);
            int rd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
            CHECK(rd >= 0 && (writer = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) >= 0);
            close(rd);
        }
        if (k == 2) /* the FIFO before it still at the first name: a directory cannot replace it */
            CHECK(mkdir(path, 0700) == 0);
        discarded = (struct error){ 0 };
        CHECK(dra_checkpoint_open(&c, dir, "boot-1", "node", &discarded, &err) == 1 && c.n_claims == 0);
        static const char *const types[] = { "a symbolic link", "a FIFO", "a directory" };
        char *msg = xasprintf("checkpoint %s is %s, not a regular file: moved to %s, starting with "
                              "no prepared claims", path, types[k], k < 2 ? path_aside : next);
        CHECK_STR(discarded.msg, msg);
        free(msg);
        CHECK(access(path, F_OK) < 0 && errno == ENOENT);
        CHECK(is_type(k < 2 ? path_aside : next, k == 0 ? S_IFLNK : k == 1 ? S_IFIFO : S_IFDIR));
        dra_checkpoint_clear(&c);
        if (writer >= 0)
            close(writer);
    }
    now = contents(dir);
    CHECK_STR(now, ""); /* nothing there now: a new start is empty, not discarded */
    free(now);
    CHECK(read_file_bounded(elsewhere, 4096, &text, &len, NULL) == 0 && strstr(text, "uid-e"));
    free(text);
    free(next);
    free(elsewhere);
    free(spare_aside);
    free(path_aside);
    free(spare);
    free(path);
    scratch_remove(dir);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        { "killed", test_killed },
        { "spare", test_spare },
        { "not-regular", test_not_regular },
    };
    return test_cases_run(argc, argv, cases, ELEMENTSOF(cases));
}
