/* The simulated MPS v3 (nvidia-cuda-mps-control -p 3; docs/simulator.md, "MPS"): named
 * servers and their namespaces, as ../shared/reference/dra/mps-v3-memory-partitioning.md
 * §3.2-3.3 describes them, to the extent the plugin's runner uses them: `server create`,
 * `server list`, `server delete`, `namespace create|set|list|delete`. A namespace listens
 * on <pipe>/<server>/<ns>/control; a client connecting there gets the namespace's limits
 * (mps-daemon.c answers it). Simplified: a server is a name and its allowed devices (it
 * never ends on its own), `--force` is accepted and a delete never waits for clients. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "mps.h"

#define V3_MAX 64
#define V3_NAME 65

struct v3_server {
    char name[V3_NAME], devices[512];
};
struct v3_ns {
    char name[V3_NAME], server[V3_NAME];
    int lfd;
    double thread; /* <0: unset */
    uint64_t pinned; /* 0: unset */
};

static struct v3_server servers[V3_MAX];
static struct v3_ns spaces[V3_MAX];
static int n_servers, n_spaces;

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* "--key=value" among argv[from..]: the value, or NULL. */
static const char *opt(int argc, char **argv, int from, const char *key)
{
    size_t n = strlen(key);
    for (int i = from; i < argc; i++)
        if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=')
            return argv[i] + n + 1;
    return NULL;
}

static int find_server(const char *name)
{
    for (int i = 0; name && i < n_servers; i++)
        if (strcmp(servers[i].name, name) == 0)
            return i;
    return -1;
}

static int find_ns(const char *name, const char *server)
{
    for (int i = 0; name && server && i < n_spaces; i++)
        if (strcmp(spaces[i].name, name) == 0 && strcmp(spaces[i].server, server) == 0)
            return i;
    return -1;
}

static void ns_close(const char *pipe, int i)
{
    char path[4096];
    close(spaces[i].lfd);
    snprintf(path, sizeof(path), "%.3900s/%.64s/%.64s/" MPS_SOCKET, pipe, spaces[i].server, spaces[i].name);
    unlink(path);
    *strrchr(path, '/') = 0;
    rmdir(path);
    spaces[i] = spaces[--n_spaces];
}

static int ns_listen(const char *pipe, struct v3_ns *ns, FILE *out)
{
    char dir[4096], sock[4200];
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(dir, sizeof(dir), "%.3900s/%.64s/%.64s", pipe, ns->server, ns->name);
    snprintf(sock, sizeof(sock), "%s/" MPS_SOCKET, dir);
    int fd = -1;
    if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || strlen(sock) >= sizeof(a.sun_path) ||
        (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        fprintf(out, "namespace create: %s: %s\n", sock, strerror(errno ? errno : ENAMETOOLONG));
        return -1;
    }
    unlink(sock);
    memcpy(a.sun_path, sock, strlen(sock) + 1);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(sock, 0777) < 0 || listen(fd, 64) < 0) {
        fprintf(out, "namespace create: %s: %s\n", sock, strerror(errno));
        close(fd);
        return -1;
    }
    ns->lfd = fd;
    return 0;
}

static void print_limit(FILE *out, const struct v3_ns *ns)
{
    if (ns->pinned)
        fprintf(out, "%" PRIu64 "M,", ns->pinned >> 20);
    else
        fprintf(out, "none,");
    if (ns->thread >= 0)
        fprintf(out, "%g,", ns->thread);
    else
        fprintf(out, "none,");
}

static int server_cmd(const char *pipe, int argc, char **argv, FILE *out)
{
    const char *verb = argc > 1 ? argv[1] : "", *name = argc > 2 && argv[2][0] != '-' ? argv[2] : NULL;
    int s = find_server(name);
    if (strcmp(verb, "create") == 0) {
        if (!name || !name_ok(name) || s >= 0 || n_servers == V3_MAX) {
            fprintf(out, "server create: invalid or existing name\n");
            return 1;
        }
        char dir[4096];
        snprintf(dir, sizeof(dir), "%.3900s/%.64s", pipe, name);
        mkdir(dir, 0755);
        struct v3_server *v = &servers[n_servers++];
        snprintf(v->name, sizeof(v->name), "%s", name);
        const char *devs = opt(argc, argv, 3, "--allowed-devices");
        snprintf(v->devices, sizeof(v->devices), "%s", devs ? devs : "");
    } else if (strcmp(verb, "list") == 0) {
        for (int i = 0; i < n_servers; i++)
            if (!name || i == s)
                fprintf(out, "%s,0,%d,ACTIVE,%s/%s,%s,\n", servers[i].name, (int)getpid(), pipe,
                        servers[i].name, servers[i].devices);
    } else if (strcmp(verb, "delete") == 0) {
        if (s < 0) {
            fprintf(out, "server delete: no server %s\n", name ? name : "");
            return 1;
        }
        for (int i = n_spaces - 1; i >= 0; i--)
            if (strcmp(spaces[i].server, name) == 0)
                ns_close(pipe, i);
        char dir[4096];
        snprintf(dir, sizeof(dir), "%.3900s/%.64s", pipe, name);
        rmdir(dir);
        servers[s] = servers[--n_servers];
    } else {
        fprintf(out, "server %s: not supported by the simulated control daemon\n", verb);
        return 1;
    }
    return 0;
}

static int namespace_cmd(const char *pipe, int argc, char **argv, FILE *out)
{
    const char *verb = argc > 1 ? argv[1] : "", *name = argc > 2 && argv[2][0] != '-' ? argv[2] : NULL;
    const char *server = opt(argc, argv, 2, "--server");
    int n = find_ns(name, server);
    if (strcmp(verb, "list") == 0) {
        for (int i = 0; i < n_spaces; i++)
            if ((!name || strcmp(spaces[i].name, name) == 0) && (!server || strcmp(spaces[i].server, server) == 0)) {
                fprintf(out, "%s,%s,ACTIVE,", spaces[i].name, spaces[i].server);
                print_limit(out, &spaces[i]);
                fprintf(out, "0,%s/%s/%s\n", pipe, spaces[i].server, spaces[i].name);
            }
        return 0;
    }
    if (!name || !server || find_server(server) < 0) {
        fprintf(out, "namespace %s: a name and an existing --server are needed\n", verb);
        return 1;
    }
    if (strcmp(verb, "create") == 0) {
        if (!name_ok(name) || strcmp(name, "default") == 0 || n >= 0 || n_spaces == V3_MAX) {
            fprintf(out, "namespace create: invalid or existing name %s\n", name);
            return 1;
        }
        struct v3_ns ns = { .thread = -1 };
        snprintf(ns.name, sizeof(ns.name), "%s", name);
        snprintf(ns.server, sizeof(ns.server), "%s", server);
        if (ns_listen(pipe, &ns, out) < 0)
            return 1;
        spaces[n_spaces++] = ns;
        return 0;
    }
    if (n < 0) {
        fprintf(out, "namespace %s: no namespace %s in server %s\n", verb, name, server);
        return 1;
    }
    if (strcmp(verb, "set") == 0) {
        const char *mem = opt(argc, argv, 3, "--pinned-memory-limit"),
                   *pct = opt(argc, argv, 3, "--active-thread-percentage");
        uint64_t bytes = 0;
        double p = -1;
        if ((mem && mps_parse_size(mem, false, &bytes) < 0) || (pct && (mps_parse_percent(pct, &p) < 0 || p < 1))) {
            fprintf(out, "namespace set: invalid value\n");
            return 1;
        }
        if (mem)
            spaces[n].pinned = bytes;
        if (pct)
            spaces[n].thread = p;
    } else if (strcmp(verb, "delete") == 0) {
        ns_close(pipe, n);
    } else {
        fprintf(out, "namespace %s: not supported by the simulated control daemon\n", verb);
        return 1;
    }
    return 0;
}

int mps_v3_command(const char *pipe, int argc, char **argv, FILE *out)
{
    if (strcmp(argv[0], "server") == 0)
        return server_cmd(pipe, argc, argv, out);
    if (strcmp(argv[0], "namespace") == 0)
        return namespace_cmd(pipe, argc, argv, out);
    return -1;
}

int mps_v3_listen_fds(int *fds, int max)
{
    int n = 0;
    for (int i = 0; i < n_spaces && n < max; i++)
        fds[n++] = spaces[i].lfd;
    return n;
}

bool mps_v3_client(int lfd, FILE *out)
{
    for (int i = 0; i < n_spaces; i++)
        if (spaces[i].lfd == lfd) {
            /* a namespace without a limit has the whole GPU (not the server's) */
            fprintf(out, "namespace %s\nthread %.1f\n", spaces[i].name,
                    spaces[i].thread >= 0 ? spaces[i].thread : 100.0);
            if (spaces[i].pinned)
                fprintf(out, "pinned * %" PRIu64 "\n", spaces[i].pinned);
            return true;
        }
    return false;
}

void mps_v3_state(FILE *f)
{
    for (int i = 0; i < n_servers; i++)
        fprintf(f, "v3_server %s devices %s\n", servers[i].name, servers[i].devices);
    for (int i = 0; i < n_spaces; i++)
        fprintf(f, "v3_namespace %s server %s pinned %" PRIu64 " thread %.1f\n", spaces[i].name,
                spaces[i].server, spaces[i].pinned, spaces[i].thread);
}

void mps_v3_end(const char *pipe)
{
    while (n_spaces)
        ns_close(pipe, n_spaces - 1);
    for (int i = 0; i < n_servers; i++) {
        char dir[4096];
        snprintf(dir, sizeof(dir), "%.3900s/%.64s", pipe, servers[i].name);
        rmdir(dir);
    }
    n_servers = 0;
}
