/* Outside programs with a bounded time and output (tool.h). */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "core/loop.h"
#include "core/tool.h"

int tool_run(char *const argv[], char *const envp[], const char *input, unsigned timeout_ms,
             char *out, size_t out_size, struct error *err)
{
    int in[2] = { -1, -1 }, outp[2] = { -1, -1 };
    posix_spawn_file_actions_t fa;
    pid_t pid;
    out[0] = '\0';
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0) {
        int e = errno;
        close(in[0]);
        close(in[1]);
        return error_set(err, -e, "running %s: pipe: %s", argv[0], strerror(e));
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 2);
    int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(outp[1]);
    if (r != 0) {
        close(in[1]);
        close(outp[0]);
        return error_set(err, -r, "running %s: %s%s", argv[0], strerror(r),
                         r == ENOENT && !strchr(argv[0], '/')
                             ? " (not on PATH: NVIDIA's tools come with the driver, "
                               "put in the container by the NVIDIA container runtime)"
                             : "");
    }
    if (input)
        (void)!write(in[1], input, strlen(input)); /* small: fits the pipe */
    close(in[1]);
    size_t len = 0;
    uint64_t deadline = loop_now_ms() + timeout_ms;
    bool timed_out = false;
    for (;;) {
        uint64_t now = loop_now_ms();
        if (now >= deadline) {
            timed_out = true;
            kill(pid, SIGKILL);
            break;
        }
        struct pollfd p = { .fd = outp[0], .events = POLLIN };
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            continue;
        char buf[512];
        ssize_t n = read(outp[0], buf, sizeof(buf));
        if (n <= 0)
            break;
        size_t room = out_size - 1 - len;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(out + len, buf, take);
        len += take;
    }
    out[len] = '\0';
    close(outp[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    for (char *c = out; *c; c++) /* one line for the log */
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    if (timed_out)
        return error_set(err, -ETIMEDOUT, "%s did not finish within %u ms", argv[0], timeout_ms);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return error_set(err, -EIO, "%s failed (%s %d): %s", argv[0],
                         WIFEXITED(status) ? "exit status" : "signal",
                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out);
    return 0;
}
