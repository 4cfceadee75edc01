/* The simulated MPS control daemon (nvidia-cuda-mps-control -d / -f): one process per
 * pipe directory, serving its control socket (mps.h's protocol). It keeps what NVIDIA's
 * MPS v2 daemon keeps: default active thread percentage and default pinned-memory limits
 * per device, applied to a server when it starts (the first client connects), not to a
 * server already running; a server ends when its last client goes. No real server
 * process exists: server ids are numbers only. State is mirrored into
 * <pipe>/nvidia-sim-mps.state after every change, events into <log>/control.log. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "mps.h"

#define MAX_CLIENTS 64

struct server {
    bool up;
    unsigned long id;
    double thread;
    struct mps_limit pinned[MPS_MAX_LIMITS];
    int n_pinned, clients;
};

static struct {
    const char *pipe, *log;
    bool multiuser, v3;
    double thread; /* default active thread percentage */
    struct mps_limit pinned[MPS_MAX_LIMITS];
    int n_pinned;
    struct server srv;
    unsigned long next_id;
    struct pollfd fds[1 + MAX_CLIENTS];
    int nfds;
} D;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void clog_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void clog_line(const char *fmt, ...)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/" MPS_CONTROL_LOG, D.log);
    FILE *f = fopen(path, "ae");
    if (!f)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(f, "[%s.%03d Control %5d] ", when, (int)(tv.tv_usec / 1000), (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static void write_state(void)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/" MPS_STATE_FILE, D.pipe);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return;
    fprintf(f, "pid %d\nmultiuser %d\ndefault_active_thread_percentage %.1f\n", (int)getpid(), D.multiuser,
            D.thread);
    for (int i = 0; i < D.n_pinned; i++)
        fprintf(f, "default_device_pinned_mem_limit %s %" PRIu64 "\n", D.pinned[i].key, D.pinned[i].bytes);
    mps_v3_state(f);
    if (D.srv.up) {
        fprintf(f, "server %lu clients %d active_thread_percentage %.1f\n", D.srv.id, D.srv.clients, D.srv.thread);
        for (int i = 0; i < D.srv.n_pinned; i++)
            fprintf(f, "server_device_pinned_mem_limit %s %" PRIu64 "\n", D.srv.pinned[i].key,
                    D.srv.pinned[i].bytes);
    }
    if (fclose(f) == 0)
        rename(tmp, path);
}

/* Replace (or add) the limit of `key` in a list: the newest is last (last set wins). */
static int put_limit(struct mps_limit *l, int *n, const char *key, uint64_t bytes)
{
    int k = 0;
    for (int i = 0; i < *n; i++)
        if (strcmp(l[i].key, key) != 0)
            l[k++] = l[i];
    if (k == MPS_MAX_LIMITS || strlen(key) >= MPS_KEY_LEN)
        return -1;
    snprintf(l[k].key, MPS_KEY_LEN, "%s", key);
    l[k].bytes = bytes;
    *n = k + 1;
    return 0;
}

static const struct mps_limit *get_limit(const struct mps_limit *l, int n, const char *key)
{
    for (int i = n - 1; i >= 0; i--)
        if (strcmp(l[i].key, key) == 0)
            return &l[i];
    return NULL;
}

static void print_size(FILE *out, const struct mps_limit *l)
{
    if (!l)
        fprintf(out, "none\n");
    else if (l->bytes % (1ULL << 20) == 0)
        fprintf(out, "%" PRIu64 "M\n", l->bytes >> 20);
    else
        fprintf(out, "%" PRIu64 "\n", l->bytes);
}

static void start_server(unsigned uid)
{
    D.srv = (struct server){ .up = true, .id = (unsigned long)getpid() + ++D.next_id, .thread = D.thread,
                             .n_pinned = D.n_pinned };
    memcpy(D.srv.pinned, D.pinned, sizeof(D.pinned));
    clog_line("Starting new server %lu for user %u", D.srv.id, uid);
}

/* A server named by id on the command line: the running one. */
static bool is_server(const char *id)
{
    return D.srv.up && id && strtoul(id, NULL, 10) == D.srv.id;
}

/* One control command: output lines to `out`; 0, 1 (refused) or 2 (quit). */
static int command(char *line, FILE *out)
{
    char *argv[8];
    int argc = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t", &save); t && argc < 8; t = strtok_r(NULL, " \t", &save))
        argv[argc++] = t;
    if (argc == 0)
        return 0;
    const char *c = argv[0];
    int v3 = D.v3 ? mps_v3_command(D.pipe, argc, argv, out) : -1;
    if (v3 >= 0)
        return v3;
    double pct;
    uint64_t bytes;
#define ARGS(n)                                                                       \
    do {                                                                              \
        if (argc != (n) + 1) {                                                        \
            fprintf(out, "%s: wrong number of arguments\n", c);                       \
            return 1;                                                                 \
        }                                                                             \
    } while (0)
    if (strcmp(c, "set_default_active_thread_percentage") == 0) {
        ARGS(1);
        if (mps_parse_percent(argv[1], &pct) < 0)
            goto bad_value;
        D.thread = pct;
    } else if (strcmp(c, "get_default_active_thread_percentage") == 0) {
        ARGS(0);
        fprintf(out, "%.1f\n", D.thread);
    } else if (strcmp(c, "set_active_thread_percentage") == 0) {
        ARGS(2);
        if (!is_server(argv[1]))
            goto no_server;
        if (mps_parse_percent(argv[2], &pct) < 0)
            goto bad_value;
        D.srv.thread = pct;
    } else if (strcmp(c, "get_active_thread_percentage") == 0) {
        ARGS(1);
        if (!is_server(argv[1]))
            goto no_server;
        fprintf(out, "%.1f\n", D.srv.thread);
    } else if (strcmp(c, "set_default_device_pinned_mem_limit") == 0) {
        ARGS(2);
        if (mps_parse_size(argv[2], false, &bytes) < 0 || put_limit(D.pinned, &D.n_pinned, argv[1], bytes) < 0)
            goto bad_value;
    } else if (strcmp(c, "get_default_device_pinned_mem_limit") == 0) {
        ARGS(1);
        print_size(out, get_limit(D.pinned, D.n_pinned, argv[1]));
    } else if (strcmp(c, "set_device_pinned_mem_limit") == 0) {
        ARGS(3);
        if (!is_server(argv[1]))
            goto no_server;
        if (mps_parse_size(argv[3], false, &bytes) < 0 ||
            put_limit(D.srv.pinned, &D.srv.n_pinned, argv[2], bytes) < 0)
            goto bad_value;
    } else if (strcmp(c, "get_device_pinned_mem_limit") == 0) {
        ARGS(2);
        if (!is_server(argv[1]))
            goto no_server;
        print_size(out, get_limit(D.srv.pinned, D.srv.n_pinned, argv[2]));
    } else if (strcmp(c, "get_server_list") == 0) {
        ARGS(0);
        if (D.srv.up)
            fprintf(out, "%lu\n", D.srv.id);
    } else if (strcmp(c, "start_server") == 0) {
        if (argc != 3 || strcmp(argv[1], "-uid") != 0) {
            fprintf(out, "usage: start_server -uid <uid>\n");
            return 1;
        }
        if (!D.srv.up)
            start_server((unsigned)strtoul(argv[2], NULL, 10));
    } else if (strcmp(c, "quit") == 0) {
        return 2;
    } else {
        fprintf(out, "%s: command not supported by the simulated control daemon\n", c);
        return 1;
    }
    return 0;
bad_value:
    fprintf(out, "%s: invalid value\n", c);
    return 1;
no_server:
    fprintf(out, "%s: no server %s\n", c, argv[1]);
    return 1;
#undef ARGS
}

static unsigned peer_uid(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 ? (unsigned)cr.uid : 0;
}

static void client_gone(int slot)
{
    close(D.fds[slot].fd);
    D.fds[slot] = D.fds[--D.nfds];
    if (D.srv.up && --D.srv.clients <= 0) {
        clog_line("Server %lu exited with status 0", D.srv.id);
        D.srv.up = false;
    }
    write_state();
}

/* A new connection (accepted on lfd): its one request line. 1 when the daemon must quit. */
static int serve(int fd, int lfd)
{
    char req[4096];
    size_t got = 0;
    while (got < sizeof(req) - 1 && !memchr(req, '\n', got)) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t r = poll(&p, 1, 2000) == 1 ? read(fd, req + got, sizeof(req) - 1 - got) : -1;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    req[got] = 0;
    char *nl = strchr(req, '\n');
    if (!nl) {
        close(fd);
        return 0;
    }
    *nl = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    int quit = 0;
    if (strncmp(req, "client ", 7) == 0 && D.nfds < 1 + MAX_CLIENTS) {
        unsigned uid = peer_uid(fd);
        clog_line("NEW CLIENT %s from user %u", req + 7, uid);
        if (!D.srv.up)
            start_server(uid);
        D.srv.clients++;
        fprintf(out, "server %lu\n", D.srv.id);
        if (!mps_v3_client(lfd, out)) {
            fprintf(out, "thread %.1f\n", D.srv.thread);
            for (int i = 0; i < D.srv.n_pinned; i++)
                fprintf(out, "pinned %s %" PRIu64 "\n", D.srv.pinned[i].key, D.srv.pinned[i].bytes);
        }
        fprintf(out, "ok\n");
        D.fds[D.nfds++] = (struct pollfd){ .fd = fd, .events = POLLIN };
        fd = -1;
    } else if (strncmp(req, "ctl ", 4) == 0) {
        clog_line("Cmd:%s", req + 4);
        int r = command(req + 4, out);
        quit = r == 2;
        fprintf(out, "status %d\n", r == 1);
    }
    fclose(out);
    int target = fd >= 0 ? fd : D.fds[D.nfds - 1].fd;
    if (write(target, text, len) < 0)
        clog_line("write: %s", strerror(errno));
    free(text);
    if (fd >= 0)
        close(fd);
    write_state();
    return quit;
}

int mps_daemon_serve(int lfd, int ready_fd, const char *pipe_dir, const char *log_dir, bool multiuser,
                     bool v3)
{
    D.v3 = v3;
    D.pipe = pipe_dir;
    D.log = log_dir;
    D.multiuser = multiuser;
    D.thread = 100;
    /* Defaults from the daemon's own environment, as NVIDIA documents. */
    double pct;
    const char *t = getenv(MPS_THREAD_ENV), *p = getenv(MPS_PINNED_ENV);
    if (t && mps_parse_percent(t, &pct) == 0)
        D.thread = pct;
    if (p && *p) {
        int n = mps_parse_limits(p, D.pinned, MPS_MAX_LIMITS);
        D.n_pinned = n > 0 ? n : 0;
        /* A bare size is for every device: "*" in the state and to clients. */
        for (int i = 0; i < D.n_pinned; i++)
            if (!D.pinned[i].key[0])
                snprintf(D.pinned[i].key, MPS_KEY_LEN, "*");
    }
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    clog_line("Starting control daemon using socket %s/" MPS_SOCKET, pipe_dir);
    clog_line("To connect CUDA applications to this daemon, set env " MPS_PIPE_ENV "=%s", pipe_dir);
    D.fds[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
    D.nfds = 1;
    write_state();
    if (ready_fd >= 0)
        close(ready_fd);
    bool quit = false;
    while (!quit && !stop) {
        /* the namespaces' sockets after the daemon's own and its clients' */
        struct pollfd all[1 + MAX_CLIENTS + 64];
        int ns[64], n_ns = mps_v3_listen_fds(ns, 64);
        memcpy(all, D.fds, (size_t)D.nfds * sizeof(*all));
        for (int i = 0; i < n_ns; i++)
            all[D.nfds + i] = (struct pollfd){ .fd = ns[i], .events = POLLIN };
        int nfds = D.nfds;
        if (poll(all, (nfds_t)(nfds + n_ns), -1) < 0)
            continue; /* EINTR: a signal, checked above */
        for (int i = nfds - 1; i >= 1; i--)
            if (all[i].revents & (POLLIN | POLLHUP | POLLERR))
                client_gone(i); /* clients send nothing more: readable means closed */
        for (int i = 0; i < 1 + n_ns && !quit; i++) {
            int l = i ? ns[i - 1] : lfd;
            if (!((i ? all[nfds + i - 1] : all[0]).revents & POLLIN))
                continue;
            int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                quit = serve(fd, l) == 1;
        }
    }
    mps_v3_end(pipe_dir);
    char path[4096];
    /* The socket last: once it is gone, so is the rest. */
    const char *files[] = { MPS_STATE_FILE, MPS_PID_FILE, MPS_SOCKET };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", pipe_dir, files[i]);
        unlink(path);
    }
    for (int i = 1; i < D.nfds; i++)
        close(D.fds[i].fd);
    close(lfd);
    clog_line("Exit");
    return 0;
}
