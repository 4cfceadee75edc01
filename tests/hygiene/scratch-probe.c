/* The C side of the scratch contract (tests/common/scratch.h), driven by test_tmpdir.py:
 *
 *   scratch-probe exit|wait|abort|fork
 *
 * makes a scratch directory holding a file, a FIFO, nested directories and a directory
 * without permissions, prints "dir <path>", then
 *   exit   returns from main (atexit removes it),
 *   wait   prints "ready" and waits for a signal (the handler removes it, and the signal
 *          still ends the process: the driver checks the exit status),
 *   abort  calls abort() (a failed assert, a sanitizer report),
 *   fork   forks a child that exits at once, then prints "kept" if the child's exit left
 *          the parent's directory alone (it must) and returns. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/common/scratch.h"

static void put(const char *dir, const char *name, int is_dir)
{
    char p[1024];
    if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, name) >= sizeof(p))
        abort();
    FILE *f = is_dir ? NULL : fopen(p, "we");
    if (is_dir ? mkdir(p, 0755) < 0 : !f || fclose(f) != 0)
        abort();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *dir = scratch_dir("gdp-probe-");
    char p[1024];
    put(dir, "file", 0);
    put(dir, "a", 1);
    put(dir, "a/b", 1);
    put(dir, "a/b/c", 1);
    put(dir, "a/b/c/file", 0);
    put(dir, "closed", 1);
    put(dir, "closed/file", 0);
    snprintf(p, sizeof(p), "%s/fifo", dir);
    if (mkfifo(p, 0600) < 0)
        abort();
    snprintf(p, sizeof(p), "%s/closed", dir);
    if (chmod(p, 0) < 0)
        abort();
    printf("dir %s\n", dir);
    fflush(stdout);

    if (strcmp(mode, "exit") == 0)
        return 0;
    if (strcmp(mode, "wait") == 0) {
        printf("ready\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    if (strcmp(mode, "abort") == 0)
        abort();
    if (strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid < 0)
            return 2;
        if (pid == 0)
            exit(0); /* runs the atexit handlers: they must leave the parent's alone */
        int st;
        if (waitpid(pid, &st, 0) < 0)
            return 2;
        if (access(dir, F_OK) == 0)
            printf("kept\n");
        return 0;
    }
    fprintf(stderr, "usage: %s exit|wait|abort|fork\n", argv[0]);
    return 2;
}
