/* cdi-apply: the hooks, run as runc runs them (cdi-apply.c calls them before and after
 * chroot), and the bundle's config.json they read. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cdi-apply.h"

#define HOOK_CAP_S 120 /* a hook without a timeout of its own */

/* One hook as runc runs it; cwd: the bundle before chroot, / after it. */
static void run_hook(const struct hook *h, size_t i, const char *state, const char *cwd)
{
    /* The state goes into the pipe before the hook starts (it is far smaller than a pipe
     * holds): a hook that never reads it cannot block us. */
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        die_sys(errno, "hook %zu: pipe", i);
    size_t len = strlen(state);
    if (write(p[1], state, len) != (ssize_t)len)
        die_sys(errno, "hook %zu: writing the state", i);
    close(p[1]);
    /* its name for the error line: nvidia-cdi-hook NAME, nvidia-ctk hook NAME */
    const char *what = h->args[0] && h->args[1] ? h->args[1] : "";
    if (strcmp(what, "hook") == 0 && h->args[2])
        what = h->args[2];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0)
        die_sys(errno, "hook %zu (%s): fork", i, what);
    if (pid == 0) {
        /* stdout to our stderr: the command's stdout stays the command's alone */
        if (dup2(p[0], 0) < 0 || dup2(2, 1) < 0 || chdir(cwd) < 0)
            _exit(127);
        char *only[] = { h->path, NULL };
        execve(h->path, h->args[0] ? h->args : only, h->env);
        fprintf(stderr, "cdi-apply: hook %zu: execve %s: %s\n", i, h->path, strerror(errno));
        _exit(127);
    }
    close(p[0]);
    long long limit = (h->timeout > 0 ? h->timeout : HOOK_CAP_S) * 1000;
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            die_sys(errno, "hook %zu (%s): waitpid", i, what);
        if (ms_since(&t0) > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            die(EXIT_FAIL, "hook %zu (%s %s): killed after %lld s", i, h->path, what,
                limit / 1000);
        }
        nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die(EXIT_FAIL, "hook %zu (%s %s): %s %d", i, h->path, what,
            WIFEXITED(status) ? "exit status" : "killed by signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    note("hook %zu: %s %s: exit status 0, %lld ms", i, h->path, what, ms_since(&t0));
}

void run_hooks(const struct edits *e, enum hook_kind from, enum hook_kind to,
                      const char *bundle, const char *cwd)
{
    json_t *st = json_pack("{s:s,s:s,s:s,s:I,s:s,s:{}}", "ociVersion", "1.0.2", "id",
                           "cdi-apply", "status", "creating", "pid", (json_int_t)getpid(),
                           "bundle", bundle, "annotations");
    _cleanup_free_ char *state = st ? json_dumps(st, JSON_COMPACT) : NULL;
    json_decref(st);
    if (!state)
        die(EXIT_FAIL, "the OCI state: out of memory");
    for (enum hook_kind k = from; k <= to; k++)
        for (size_t i = 0; i < e->n_hooks; i++)
            if (e->hooks[i].kind == k)
                run_hook(&e->hooks[i], i, state, cwd);
}

/* <bundle>/config.json as NVIDIA's hooks read it: root.path (absolute), and the process. */
void write_config(const char *bundle, const char *rootfs, const struct edits *e,
                         char **argv)
{
    json_t *args = json_array(), *env = json_array();
    for (char **a = argv; *a; a++)
        json_array_append_new(args, json_string(*a));
    for (size_t i = 0; i < e->n_env; i++)
        json_array_append_new(env, json_string(e->env[i]));
    json_t *c = json_pack("{s:s,s:{s:s},s:{s:o,s:o}}", "ociVersion", "1.0.2", "root", "path",
                          rootfs, "process", "args", args, "env", env);
    _cleanup_free_ char *path = strf("%s/config.json", bundle);
    if (!c || json_dump_file(c, path, JSON_INDENT(2)) < 0)
        die(EXIT_FAIL, "%s: cannot write it", path);
    json_decref(c);
}
