/* Outside programs with a bounded time and output, on the event loop (tool.h). */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/loop.h"
#include "core/tool.h"

struct tool_run {
    struct loop *loop;
    char *name;               /* argv[0], for the messages */
    unsigned timeout_ms;
    pid_t pid;                /* 0 once reaped */
    int pidfd;                /* -1: pidfd_open unavailable (tool.h) */
    int outfd;                /* the read end of its stdout and stderr; -1 after its end */
    struct loop_timer *deadline, *poll;
    tool_done_fn done;
    void *userdata;
    size_t len;
    char out[TOOL_OUTPUT_MAX];
};

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0); /* close-on-exec by the kernel */
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* Read what the pipe holds now (non-blocking); past the buffer it is read and dropped, so
 * a talkative tool never blocks on a full pipe. At its end the pipe is closed. */
static void drain(struct tool_run *t)
{
    while (t->outfd >= 0) {
        char buf[512];
        ssize_t n = read(t->outfd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            (void)loop_del_io(t->loop, t->outfd);
            close(t->outfd);
            t->outfd = -1;
            return;
        }
        size_t room = sizeof(t->out) - 1 - t->len;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(t->out + t->len, buf, take);
        t->len += take;
    }
}

/* Everything but the struct: fds unwatched and closed, timers cancelled, the process
 * killed (when still running) and reaped. */
static void release(struct tool_run *t)
{
    if (t->pid > 0) {
        (void)kill(t->pid, SIGKILL);
        /* SIGKILL ends it at once (short of a wait inside the kernel, which no wait of
         * ours could shorten): reaping it here leaves no zombie behind a cancel. */
        while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        t->pid = 0;
    }
    if (t->outfd >= 0) {
        (void)loop_del_io(t->loop, t->outfd);
        close(t->outfd);
        t->outfd = -1;
    }
    if (t->pidfd >= 0) {
        (void)loop_del_io(t->loop, t->pidfd);
        close(t->pidfd);
        t->pidfd = -1;
    }
    loop_timer_cancel(t->loop, t->deadline);
    loop_timer_cancel(t->loop, t->poll);
    t->deadline = t->poll = NULL;
}

static void run_free(struct tool_run *t)
{
    release(t);
    free(t->name);
    free(t);
}

/* The run's end: status is waitpid's, or -1 when it was killed at its deadline. */
static void finish(struct tool_run *t, int status)
{
    drain(t); /* what it wrote before it exited */
    release(t);
    t->out[t->len] = '\0';
    for (char *c = t->out; *c; c++) /* one line for the log */
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    struct error err = { 0 };
    int r = 0;
    if (status < 0)
        r = error_set(&err, -ETIMEDOUT, "%s did not finish within %u ms", t->name, t->timeout_ms);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        r = error_set(&err, -EIO, "%s failed (%s %d): %s", t->name,
                      WIFEXITED(status) ? "exit status" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), t->out);
    t->done(t->userdata, r, t->out, &err);
    run_free(t);
}

/* Reaped now, or (fallback) looked for again shortly; 1 when it finished the run. */
static int try_reap(struct tool_run *t, int flags)
{
    int status;
    pid_t p;
    while ((p = waitpid(t->pid, &status, flags)) < 0 && errno == EINTR)
        ;
    if (p != t->pid)
        return 0;
    t->pid = 0;
    finish(t, status);
    return 1;
}

static void on_poll(struct loop *l, struct loop_timer *timer, void *userdata);

static void look_again(struct tool_run *t)
{
    if (!t->poll)
        t->poll = loop_timer_add(t->loop, TOOL_REAP_POLL_MS, on_poll, t);
}

static void on_poll(struct loop *l, struct loop_timer *timer, void *userdata)
{
    struct tool_run *t = userdata;
    t->poll = NULL;
    if (!try_reap(t, WNOHANG))
        look_again(t);
}

static void on_output(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct tool_run *t = userdata;
    drain(t);
    /* Without a pidfd the pipe's end is the sign that it is exiting. */
    if (t->outfd < 0 && t->pidfd < 0 && !try_reap(t, WNOHANG))
        look_again(t);
}

/* The pidfd is readable once the process has exited: it is reaped without waiting, and
 * a child of its own still holding the pipe does not keep the run open. */
static void on_exited(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct tool_run *t = userdata;
    if (!try_reap(t, 0)) {
        /* Not ours to reap any more (someone waited for every child): end it as a
         * failure rather than watch a pidfd that stays readable. */
        t->pid = 0;
        finish(t, W_EXITCODE(255, 0));
    }
}

static void on_deadline(struct loop *l, struct loop_timer *timer, void *userdata)
{
    struct tool_run *t = userdata;
    t->deadline = NULL;
    finish(t, -1); /* release kills and reaps it */
}

struct tool_run *tool_start(struct loop *l, char *const argv[], char *const envp[],
                            const char *input, unsigned timeout_ms, tool_done_fn done,
                            void *userdata, struct error *err)
{
    int in[2] = { -1, -1 }, outp[2] = { -1, -1 };
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0) {
        int e = errno;
        if (in[0] >= 0) {
            close(in[0]);
            close(in[1]);
        }
        error_set(err, -e, "running %s: pipe: %s", argv[0], strerror(e));
        return NULL;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none;
    pid_t pid;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 2);
    /* The loop's caller blocks the signals its signalfd reads (core/signals.h); the tool
     * gets none blocked, as from a shell. */
    sigemptyset(&none);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    int r = posix_spawnp(&pid, argv[0], &fa, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(outp[1]);
    if (r != 0) {
        close(in[1]);
        close(outp[0]);
        error_set(err, -r, "running %s: %s%s", argv[0], strerror(r),
                  r == ENOENT && !strchr(argv[0], '/')
                      ? " (not on PATH: NVIDIA's tools come with the driver, "
                        "put in the container by the NVIDIA container runtime)"
                      : "");
        return NULL;
    }
    if (input)
        (void)!write(in[1], input, strlen(input)); /* small: fits the pipe */
    close(in[1]);

    struct tool_run *t = xcalloc(1, sizeof(*t));
    *t = (struct tool_run){ .loop = l, .name = xstrdup(argv[0]), .timeout_ms = timeout_ms,
                            .pid = pid, .pidfd = pidfd_open_(pid), .outfd = outp[0],
                            .done = done, .userdata = userdata };
    (void)fcntl(t->outfd, F_SETFL, fcntl(t->outfd, F_GETFL) | O_NONBLOCK);
    if ((r = loop_add_io(l, t->outfd, EPOLLIN, on_output, t)) < 0 ||
        (t->pidfd >= 0 && (r = loop_add_io(l, t->pidfd, EPOLLIN, on_exited, t)) < 0)) {
        error_set(err, r, "running %s: watching it: %s", argv[0], strerror(-r));
        run_free(t); /* killed and reaped */
        return NULL;
    }
    t->deadline = loop_timer_add(l, timeout_ms, on_deadline, t);
    return t;
}

void tool_cancel(struct tool_run *t)
{
    if (t)
        run_free(t);
}

/* ---- the blocking form ---- */

struct waited {
    struct loop *loop;
    int r;
    char *out;
    size_t out_size;
    struct error *err;
};

static void waited_done(void *userdata, int r, const char *out, const struct error *err)
{
    struct waited *w = userdata;
    w->r = r;
    snprintf(w->out, w->out_size, "%s", out);
    if (r < 0 && w->err)
        *w->err = *err;
    loop_quit(w->loop, 0);
}

int tool_run(char *const argv[], char *const envp[], const char *input, unsigned timeout_ms,
             char *out, size_t out_size, struct error *err)
{
    struct waited w = { .out = out, .out_size = out_size, .err = err };
    struct error started = { 0 };
    out[0] = '\0';
    int r = loop_new(&w.loop);
    if (r < 0)
        return error_set(err, r, "running %s: %s", argv[0], strerror(-r));
    struct tool_run *t = tool_start(w.loop, argv, envp, input, timeout_ms, waited_done, &w,
                                    &started);
    if (!t) {
        w.r = started.code;
        if (err)
            *err = started;
    } else if ((r = loop_run(w.loop)) < 0) {
        tool_cancel(t); /* done was not called: it is still running */
        w.r = error_set(err, r, "running %s: waiting for it: %s", argv[0], strerror(-r));
    }
    loop_free(w.loop);
    return w.r;
}
