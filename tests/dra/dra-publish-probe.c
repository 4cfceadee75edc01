/* Drives the ResourceSlice publisher (src/dra/dra-publish.c) through the real API client
 * for tests/dra/test_dra_publish.py: options on the command line, commands on stdin,
 * one per line, answers on stdout:
 *
 *   set N [DEVICE=xid:XID | DEVICE=lost ...]  N devices gpu-0..gpu-<N-1>, some unhealthy
 *                                             -> "set N"
 *   stats   -> "stats creates=C updates=U deletes=D failures=F restores=R
 *               taints=unknown|kept|dropped converged=0|1"
 *   quit (or end of stdin)
 *
 *   dra-publish-probe --kubeconfig F --node NAME */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "dra/dra-publish.h"
#include "dra/dra-types.h"
#include "kube/kube.h"

static struct loop *loop;
static struct dra_publish *pub;
static char inbuf[65536];
static size_t inlen;

static json_t *device(unsigned i)
{
    char name[32], uuid[48];
    snprintf(name, sizeof(name), "gpu-%u", i);
    snprintf(uuid, sizeof(uuid), "GPU-%08u-0000-0000-0000-000000000000", i);
    return json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}}, s:{s:{s:s}}}", "name", name,
                     "attributes", "type", "string", "gpu", "uuid", "string", uuid,
                     "driverVersion", "version", "550.163.1", "capacity", "memory", "value",
                     "80Gi");
}

static void command(char *line)
{
    char *save = NULL, *cmd = strtok_r(line, " ", &save);
    if (!cmd)
        return;
    if (streq(cmd, "quit")) {
        loop_quit(loop, 0);
    } else if (streq(cmd, "set")) {
        char *n = strtok_r(NULL, " ", &save);
        unsigned count = n ? (unsigned)strtoul(n, NULL, 10) : 0;
        json_t *devices = json_array();
        for (unsigned i = 0; i < count; i++)
            json_array_append_new(devices, device(i));
        struct dra_unhealthy_device bad[16];
        size_t nbad = 0;
        for (char *t; nbad < ELEMENTSOF(bad) && (t = strtok_r(NULL, " ", &save));) {
            char *eq = strchr(t, '=');
            if (!eq)
                continue;
            *eq = 0;
            bad[nbad] = (struct dra_unhealthy_device){ .device = t, .lost = streq(eq + 1, "lost") };
            if (!strncmp(eq + 1, "xid:", 4))
                bad[nbad].xid = (unsigned)strtoul(eq + 5, NULL, 10);
            nbad++;
        }
        dra_publish_set(pub, devices, bad, nbad);
        json_decref(devices);
        printf("set %u\n", count);
    } else if (streq(cmd, "stats")) {
        static const char *const modes[] = { "unknown", "kept", "dropped" };
        struct dra_publish_stats st;
        dra_publish_get_stats(pub, &st);
        printf("stats creates=%u updates=%u deletes=%u failures=%u restores=%u taints=%s converged=%d\n",
               st.creates, st.updates, st.deletes, st.failures, st.restores, modes[st.taints],
               st.converged);
    } else {
        printf("error unknown command %s\n", cmd);
    }
    fflush(stdout);
}

static void stdin_cb(struct loop *l, int fd, uint32_t events, void *userdata)
{
    ssize_t n = read(fd, inbuf + inlen, sizeof(inbuf) - 1 - inlen);
    if (n <= 0) {
        loop_quit(l, 0);
        return;
    }
    inlen += (size_t)n;
    char *nl;
    while ((nl = memchr(inbuf, '\n', inlen))) {
        *nl = '\0';
        command(inbuf);
        size_t used = (size_t)(nl - inbuf) + 1;
        memmove(inbuf, inbuf + used, inlen - used);
        inlen -= used;
    }
    if (inlen == sizeof(inbuf) - 1)
        loop_quit(l, 2);
}

int main(int argc, char **argv)
{
    struct kube_options o = { .qps = 1000, .burst = 1000 };
    const char *node = NULL;
    static const struct option opts[] = {
        { "kubeconfig", required_argument, NULL, 'k' },
        { "node", required_argument, NULL, 'n' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k': o.kubeconfig = optarg; break;
        case 'n': node = optarg; break;
        default: return 2;
        }
    }
    if (!node)
        return 2;
    log_set_level(LOG_DEBUG);
    struct kube *kube = NULL;
    struct error err = { 0 };
    if (loop_new(&loop) < 0 || kube_new(loop, &o, &kube, &err) < 0) {
        printf("error %s\n", err.msg);
        return 1;
    }
    pub = dra_publish_new(loop, kube, node, DRA_DRIVER_NAME, &err);
    if (!pub) {
        printf("error %s\n", err.msg);
        return 1;
    }
    (void)fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    if (loop_add_io(loop, 0, EPOLLIN, stdin_cb, NULL) < 0)
        return 1;
    printf("ready\n");
    fflush(stdout);
    int r = loop_run(loop);
    (void)loop_del_io(loop, 0);
    dra_publish_free(pub);
    kube_free(kube);
    loop_free(loop);
    return r < 0 ? 1 : r;
}
