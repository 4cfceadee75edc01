/* libcuda's side of the simulated MPS (mps.h): a process whose pipe directory has a
 * daemon listening is an MPS client, as with the real driver; one without is an ordinary
 * CUDA process (no limits). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "mps.h"

/* Kept open: the daemon counts its clients by their connections. */
static int client_fd = -1;

int mps_client_connect(struct mps_server *s)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    char path[4096];
    mps_pipe_path(path, sizeof(path), MPS_SOCKET);
    if (strlen(path) >= sizeof(a.sun_path))
        return -1;
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    char req[64];
    int n = snprintf(req, sizeof(req), "client %d\n", (int)getpid());
    char buf[8192];
    size_t got = 0;
    bool done = false;
    if (write(fd, req, (size_t)n) != n)
        goto fail;
    /* The daemon answers at once; 5 s is a dead daemon, not a slow one. */
    while (!done && got < sizeof(buf) - 1) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 5000) <= 0)
            goto fail;
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            goto fail;
        got += (size_t)r;
        buf[got] = 0;
        done = strstr(buf, "\nok\n") != NULL || strncmp(buf, "ok\n", 3) == 0;
    }
    if (!done)
        goto fail;
    memset(s, 0, sizeof(*s));
    s->thread = 100;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char key[MPS_KEY_LEN];
        unsigned long long bytes;
        if (strncmp(line, "server ", 7) == 0)
            snprintf(s->id, sizeof(s->id), "%s", line + 7);
        else if (strncmp(line, "namespace ", 10) == 0)
            snprintf(s->ns, sizeof(s->ns), "%s", line + 10);
        else if (strncmp(line, "thread ", 7) == 0)
            s->thread = strtod(line + 7, NULL);
        else if (sscanf(line, "pinned %95s %llu", key, &bytes) == 2 && s->n_limits < MPS_MAX_LIMITS) {
            snprintf(s->limits[s->n_limits].key, MPS_KEY_LEN, "%s", key);
            s->limits[s->n_limits++].bytes = bytes;
        }
    }
    client_fd = fd;
    return 0;
fail:
    close(fd);
    return -1;
}
