/* core/tool: outside programs on the event loop. The loop keeps turning while a tool runs
 * (a 20 ms ticker never waits much longer); its output, exit status, absence and stdin;
 * a tool past its timeout killed and reaped with the timeout's error; a cancelled one
 * killed and reaped without its done; a tool whose own child keeps the pipe open done
 * when it exits; output past the bound dropped without blocking the tool; the blocking
 * form. After all: no child of ours left (no zombie) and the same fds as before. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/loop.h"
#include "core/tool.h"
#include "tests/common/check.h"

int test_failures;

static struct loop *loop;

struct outcome {
    bool called;
    int r;
    char out[TOOL_OUTPUT_MAX];
    struct error err;
    uint64_t at_ms;
};

static void on_done(void *userdata, int r, const char *out, const struct error *err)
{
    struct outcome *o = userdata;
    CHECK(!o->called);
    o->called = true;
    o->r = r;
    snprintf(o->out, sizeof(o->out), "%s", out);
    o->err = *err;
    o->at_ms = loop_now_ms();
    loop_quit(loop, 0);
}

/* The ticker: how often the loop turned, the longest gap between two turns. */
static struct {
    struct loop_timer *t;
    unsigned ticks;
    uint64_t last, max_gap;
} tick;

static void on_tick(struct loop *l, struct loop_timer *t, void *userdata)
{
    uint64_t now = loop_now_ms();
    if (tick.last && now - tick.last > tick.max_gap)
        tick.max_gap = now - tick.last;
    tick.last = now;
    tick.ticks++;
    tick.t = loop_timer_add(l, 20, on_tick, NULL);
}

/* Run argv on the loop until its done; the outcome. */
static struct outcome run(char **argv, const char *input, unsigned timeout_ms)
{
    struct outcome o = { 0 };
    struct error err = { 0 };
    extern char **environ;
    struct tool_run *t = tool_start(loop, argv, environ, input, timeout_ms, on_done, &o, &err);
    CHECK(t != NULL);
    if (t)
        CHECK(loop_run(loop) == 0);
    else
        fprintf(stderr, "tool_start: %s\n", err.msg);
    CHECK(o.called);
    return o;
}

/* No child of ours is left, running or a zombie. */
static bool no_children(void)
{
    return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    int fds_before = count_fds();
    CHECK(loop_new(&loop) == 0);
    extern char **environ;

    /* Output (stdout and stderr, one line) and success. */
    struct outcome o = run((char *[]){ "sh", "-c", "echo hello; echo world >&2", NULL }, NULL, 5000);
    CHECK(o.r == 0);
    CHECK_STR(o.out, "hello world ");
    /* stdin. */
    o = run((char *[]){ "cat", NULL }, "from stdin", 5000);
    CHECK(o.r == 0);
    CHECK_STR(o.out, "from stdin");
    /* A non-zero exit and a signal. */
    o = run((char *[]){ "sh", "-c", "echo Insufficient Permissions; exit 4", NULL }, NULL, 5000);
    CHECK(o.r == -EIO);
    CHECK_STR(o.err.msg, "sh failed (exit status 4): Insufficient Permissions ");
    o = run((char *[]){ "sh", "-c", "kill -TERM $$", NULL }, NULL, 5000);
    CHECK(o.r == -EIO);
    CHECK_STR(o.err.msg, "sh failed (signal 15): ");
    /* Not there: said at once, nothing started. */
    struct error err = { 0 };
    CHECK(!tool_start(loop, (char *[]){ "no-such-tool-here", NULL }, environ, NULL, 5000, on_done,
                      NULL, &err));
    CHECK(err.code == -ENOENT);
    CHECK_STR_CONTAINS(err.msg, "running no-such-tool-here: No such file or directory (not on PATH");

    /* The loop turns while a tool runs for a second. */
    tick.t = loop_timer_add(loop, 20, on_tick, NULL);
    uint64_t t0 = loop_now_ms();
    o = run((char *[]){ "sleep", "1", NULL }, NULL, 5000);
    CHECK(o.r == 0);
    CHECK(o.at_ms - t0 >= 1000);
    fprintf(stderr, "while a tool ran 1 s: %u ticks, longest gap %llu ms\n", tick.ticks,
            (unsigned long long)tick.max_gap);
    CHECK(tick.ticks >= 25);
    CHECK(tick.max_gap < 200);

    /* Past its timeout: killed, reaped, the timeout's error; the loop turned meanwhile. */
    tick.ticks = 0;
    t0 = loop_now_ms();
    o = run((char *[]){ "sleep", "30", NULL }, NULL, 300);
    CHECK(o.r == -ETIMEDOUT);
    CHECK_STR(o.err.msg, "sleep did not finish within 300 ms");
    CHECK(o.at_ms - t0 >= 300 && o.at_ms - t0 < 2000);
    CHECK(tick.ticks >= 8);
    CHECK(no_children());
    loop_timer_cancel(loop, tick.t);
    tick.t = NULL;

    /* Its own child keeps the pipe open for 3 s: done when the tool itself exits (without
     * a pidfd, as under valgrind, when the pipe ends: tool.h). */
#ifdef SYS_pidfd_open
    int probe = (int)syscall(SYS_pidfd_open, getpid(), 0);
#else
    int probe = -1;
#endif
    t0 = loop_now_ms();
    o = run((char *[]){ "sh", "-c", "sleep 3 & echo started", NULL }, NULL, 10000);
    CHECK(o.r == 0);
    CHECK_STR(o.out, "started ");
    CHECK(probe >= 0 ? o.at_ms - t0 < 1500 : o.at_ms - t0 >= 3000);
    if (probe >= 0)
        close(probe);

    /* More than the bound: the first TOOL_OUTPUT_MAX - 1 bytes, the tool not blocked. */
    o = run((char *[]){ "sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x", NULL }, NULL, 5000);
    CHECK(o.r == 0);
    CHECK(strlen(o.out) == TOOL_OUTPUT_MAX - 1);

    /* Cancelled: killed and reaped at once, done never called. */
    struct outcome never = { 0 };
    struct tool_run *t = tool_start(loop, (char *[]){ "sleep", "30", NULL }, environ, NULL, 5000,
                                    on_done, &never, &err);
    CHECK(t != NULL);
    tool_cancel(t);
    CHECK(no_children());
    tool_cancel(NULL);
    loop_free(loop);
    CHECK(!never.called);

    /* The blocking form, on a loop of its own. */
    char out[16];
    CHECK(tool_run((char *[]){ "sh", "-c", "echo a long line cut short", NULL }, environ, NULL, 5000,
                   out, sizeof(out), &err) == 0);
    CHECK_STR(out, "a long line cut");
    CHECK(tool_run((char *[]){ "sleep", "30", NULL }, environ, NULL, 200, out, sizeof(out),
                   &err) == -ETIMEDOUT);
    CHECK_STR(err.msg, "sleep did not finish within 200 ms");
    CHECK(tool_run((char *[]){ "no-such-tool-here", NULL }, environ, NULL, 200, out, sizeof(out),
                   &err) == -ENOENT);

    CHECK(no_children());
    int fds_after = count_fds();
    if (fds_after != fds_before)
        fprintf(stderr, "fds: %d before, %d after\n", fds_before, fds_after);
    CHECK(fds_after == fds_before);
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
