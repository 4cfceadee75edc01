/* nvidia-cuda-mps-control stand-in (docs/simulator.md, "MPS"): what NVIDIA's DRA driver
 * and its control-daemon script use of the real tool, on the simulated host.
 *
 *   nvidia-cuda-mps-control -d [-M]   start the control daemon (mps-daemon.c) in the
 *                                     background for CUDA_MPS_PIPE_DIRECTORY /
 *                                     CUDA_MPS_LOG_DIRECTORY; -f: in the foreground
 *   nvidia-cuda-mps-control           commands on stdin, one a line, to that daemon; the
 *                                     answers on stdout
 *
 * Every invocation is recorded, as one block written at once, to the file MOCK_MPS_LOG
 * names: its arguments, the MPS variables of its environment, each command read and each
 * answer line, and its exit status. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "mps.h"

static char *rec;
static size_t rec_len;
static FILE *rec_f;

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(rec_f, fmt, ap);
    va_end(ap);
    fputc('\n', rec_f);
}

/* The block, in one write(2) with O_APPEND: concurrent invocations do not interleave. */
static int finish(int code)
{
    if (code >= 0)
        record("exit %d", code);
    else
        record("running");
    fclose(rec_f);
    rec_f = NULL;
    const char *path = getenv(MPS_RECORD_ENV);
    if (path && *path) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, rec, rec_len) != (ssize_t)rec_len)
            fprintf(stderr, "nvidia-cuda-mps-control (simulated): %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    free(rec);
    rec = NULL;
    return code < 0 ? 0 : code;
}

static const char *dir_of(const char *env, const char *def)
{
    const char *v = getenv(env);
    return v && *v ? v : def;
}

static int mkdirs(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(p, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int connect_daemon(void)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    char path[4096];
    mps_pipe_path(path, sizeof(path), MPS_SOCKET);
    if (strlen(path) >= sizeof(a.sun_path))
        return -1;
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int start_daemon(bool foreground, bool multiuser, bool v3)
{
    const char *pipe = dir_of(MPS_PIPE_ENV, MPS_PIPE_DEFAULT), *log = dir_of(MPS_LOG_ENV, MPS_LOG_DEFAULT);
    int fd = connect_daemon();
    if (fd >= 0) {
        close(fd);
        fprintf(stderr, "An instance of this daemon is already running\n");
        record("stderr An instance of this daemon is already running");
        return finish(1);
    }
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    char sock[4096], pidfile[4096];
    snprintf(sock, sizeof(sock), "%s/" MPS_SOCKET, pipe);
    snprintf(pidfile, sizeof(pidfile), "%s/" MPS_PID_FILE, pipe);
    int lfd = -1;
    if (mkdirs(pipe) < 0 || mkdirs(log) < 0 || strlen(sock) >= sizeof(a.sun_path) ||
        (lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        fprintf(stderr, "nvidia-cuda-mps-control (simulated): cannot use %s or %s: %s\n", pipe, log,
                strerror(errno));
        record("stderr cannot use the pipe or log directory");
        return finish(1);
    }
    /* A socket left by a killed daemon (nobody answered above) is stale. */
    unlink(sock);
    memcpy(a.sun_path, sock, strlen(sock) + 1);
    if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(sock, 0777) < 0 || listen(lfd, 64) < 0) {
        fprintf(stderr, "nvidia-cuda-mps-control (simulated): %s: %s\n", sock, strerror(errno));
        record("stderr cannot listen on %s", sock);
        return finish(1);
    }
    /* Listening, its state file written, before the parent returns: a command sent right
     * after -d finds it, and so does a reader of the state. */
    int ready[2] = { -1, -1 };
    if (!foreground && pipe2(ready, O_CLOEXEC) < 0) {
        record("stderr pipe failed");
        return finish(1);
    }
    pid_t pid = foreground ? getpid() : fork();
    if (pid < 0) {
        record("stderr fork failed");
        return finish(1);
    }
    if (pid > 0 || foreground) {
        FILE *f = fopen(pidfile, "we");
        if (f) {
            fprintf(f, "%d\n", (int)pid);
            fclose(f);
        }
        if (!foreground) {
            close(lfd);
            close(ready[1]);
            char c;
            while (read(ready[0], &c, 1) < 0 && errno == EINTR)
                ;
            close(ready[0]);
            return finish(0);
        }
        finish(-1);
    } else {
        free(rec); /* the parent records this invocation */
        rec = NULL;
        rec_f = NULL;
        setsid();
        /* Hold nothing of the caller's: a pipe kept open would hang whoever reads it. */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int i = 0; i < 3 && null >= 0; i++)
            dup2(null, i);
        close(ready[0]);
        for (int i = 3; i < 1024; i++)
            if (i != lfd && i != ready[1])
                close(i);
        if (chdir("/") < 0)
            _exit(1);
    }
    _exit(mps_daemon_serve(lfd, ready[1], pipe, log, multiuser, v3));
}

/* Commands from stdin, each sent to the daemon; its answers printed. */
static int commands(void)
{
    char *line = NULL;
    size_t cap = 0;
    int code = 0;
    while (getline(&line, &cap, stdin) >= 0) {
        char *s = line, *e = line + strlen(line);
        while (*s == ' ' || *s == '\t')
            s++;
        while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            *--e = 0;
        if (!*s)
            continue;
        record("stdin %s", s);
        int fd = connect_daemon();
        if (fd < 0) {
            fprintf(stderr, "Cannot find MPS control daemon process\n");
            record("stderr Cannot find MPS control daemon process");
            code = 1;
            break;
        }
        char req[4200];
        int n = snprintf(req, sizeof(req), "ctl %s\n", s);
        char *reply = NULL;
        size_t rlen = 0;
        FILE *r = open_memstream(&reply, &rlen);
        char buf[4096];
        ssize_t got;
        if (n > 0 && n < (int)sizeof(req) && write(fd, req, (size_t)n) == n)
            while ((got = read(fd, buf, sizeof(buf))) > 0)
                fwrite(buf, 1, (size_t)got, r);
        close(fd);
        fclose(r);
        int status = 1;
        for (char *save = NULL, *l = strtok_r(reply, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            if (sscanf(l, "status %d", &status) == 1)
                continue;
            printf("%s\n", l);
            record("stdout %s", l);
        }
        free(reply);
        code |= status != 0;
        if (status == 0 && strncmp(s, "quit", 4) == 0 && (!s[4] || s[4] == ' '))
            break;
    }
    free(line);
    fflush(stdout);
    return finish(code);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: nvidia-cuda-mps-control [-d | -f] [-M]   start the control daemon\n"
               "       nvidia-cuda-mps-control                  commands on stdin\n"
               "       -p|--protocol 3                          MPS v3: servers, namespaces\n"
               "(simulated: protocols 2 and 3)\n");
}

int main(int argc, char **argv)
{
    rec_f = open_memstream(&rec, &rec_len);
    if (!rec_f)
        return 1;
    fputs("nvidia-cuda-mps-control", rec_f);
    for (int i = 1; i < argc; i++)
        fprintf(rec_f, " %s", argv[i]);
    fputc('\n', rec_f);
    static const char *const vars[] = { MPS_PIPE_ENV, MPS_LOG_ENV, "CUDA_VISIBLE_DEVICES", MPS_THREAD_ENV,
                                        MPS_PINNED_ENV, "CUDA_MPS_PROTOCOL_VERSION" };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]))
            record("env %s=%s", vars[i], getenv(vars[i]));
    bool daemon = false, foreground = false, multiuser = false;
    const char *proto = getenv("CUDA_MPS_PROTOCOL_VERSION"), *proto_arg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-d") == 0 || strcmp(a, "--daemon") == 0) {
            daemon = true;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--foreground") == 0) {
            foreground = true;
        } else if (strcmp(a, "-M") == 0 || strcmp(a, "-m") == 0 || strcmp(a, "--multiuser") == 0 ||
                   strcmp(a, "-multiuser-server") == 0 || strcmp(a, "--multiuser-server") == 0) {
            multiuser = true;
        } else if ((strcmp(a, "-p") == 0 || strcmp(a, "--protocol") == 0) && i + 1 < argc) {
            proto_arg = argv[++i];
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return finish(0);
        } else {
            /* -S (static partitioning), -q, -v, -a, ...: not simulated. */
            fprintf(stderr, "nvidia-cuda-mps-control (simulated): option %s is not supported\n", a);
            record("stderr option %s is not supported", a);
            usage(stderr);
            return finish(1);
        }
    }
    /* the variable wins over -p (NVIDIA's rule); commands follow the running daemon's */
    if (!(proto && *proto))
        proto = proto_arg ? proto_arg : "2";
    bool v3 = strcmp(proto, "3") == 0;
    if ((daemon && foreground) || (multiuser && !daemon && !foreground) || (!v3 && strcmp(proto, "2"))) {
        fprintf(stderr, "nvidia-cuda-mps-control (simulated): unsupported combination (protocol 2 or 3)\n");
        record("stderr unsupported combination");
        return finish(1);
    }
    if (daemon || foreground)
        return start_daemon(foreground, multiuser, v3);
    return commands();
}
