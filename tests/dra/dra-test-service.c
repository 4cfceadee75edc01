/* The DRA service with made-up ops, for tests/dra/test_dra_service.py, which plays the
 * kubelet on its sockets. The answers are the content of the kubelet-made vectors
 * (tests/data/dra/wire), so the replies can be compared with them byte for byte.
 *
 *   dra-test-service <registrar dir> <plugins dir> <health re-send ms, 0 = default>
 *
 * Commands on stdin, one per line; every event and answer is one line on stdout:
 *   hold 0|1       prepare/unprepare keep their calls ("held prepare <n>") or answer at once
 *   answer         answer every held call
 *   health <device> <0|1|2>   set a device's health (then "changed" to tell the service)
 *   changed        dra_service_health_changed
 *   restart        dra_service_kubelet_restarted -> "rebound <n>"
 *   status         "status registered=<0|1> streams=<n> resend_ms=<n> health_calls=<n>
 *                  prepares=<n> unprepares=<n> cancelled=<n> held=<n>"
 *   quit           free the service -> "fds <before> <after> threads <before> <after>"
 * Prints "ready <dra socket> <registration socket>" once serving. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/loop.h"
#include "core/macro.h"
#include "dra/dra-service.h"

#define UID_A "3f2a6c1e-8b4d-4e7a-9c15-2d0b7e4f6a81"
#define UID_B "b7c9d2e4-1a3f-4b6c-8d9e-0f1a2b3c4d5e"
#define CDI "k8s.gpu.nvidia.com/claim="

static struct loop *loop;
static struct dra_service *svc;
static bool hold;
static unsigned prepares, unprepares, cancelled, health_calls;
static struct held {
    struct dra_call *c;
    bool prepare;
    char **uids;
    size_t n;
} held[64];
static size_t n_held;

static struct dev_health {
    const char *device;
    int health;
    int64_t last;
} health[] = { { "gpu-0", 1, 1764172800 }, { "gpu-1", 2, 1764172863 }, { "gpu-2", 0, 0 } };

static char **strv(const char *a, const char *b)
{
    char **v = xcalloc(3, sizeof(*v));
    v[0] = xstrdup(a);
    v[1] = b ? xstrdup(b) : NULL;
    return v;
}

/* The vector's answer for a claim (dra-v1_NodePrepareResourcesResponse.bin): UID_A two
 * devices, UID_B an error, anything else one device "gpu-7". */
static void prepare_result(const char *uid, struct dra_claim_result *r)
{
    r->uid = xstrdup(uid);
    if (streq(uid, UID_B)) {
        r->error = xstrdup("GPU gpu-3 is not healthy: Xid 79");
        return;
    }
    if (!streq(uid, UID_A)) {
        r->n_devices = 1;
        r->devices = xcalloc(1, sizeof(*r->devices));
        r->devices[0] = (struct dra_prepared_device){
            .request_names = strv("gpu", NULL), .n_request_names = 1,
            .pool_name = xstrdup("node-a"), .device_name = xstrdup("gpu-7"),
            .cdi_device_ids = NULL, .n_cdi_device_ids = 0,
        };
        return;
    }
    r->n_devices = 2;
    r->devices = xcalloc(2, sizeof(*r->devices));
    r->devices[0] = (struct dra_prepared_device){
        .request_names = strv("gpus", NULL), .n_request_names = 1,
        .pool_name = xstrdup("node-a"), .device_name = xstrdup("gpu-0"),
        .cdi_device_ids = strv(CDI UID_A "-gpu-0", CDI UID_A "-shared"), .n_cdi_device_ids = 2,
    };
    r->devices[1] = (struct dra_prepared_device){
        .request_names = strv("gpus", "extra"), .n_request_names = 2,
        .pool_name = xstrdup("node-a"), .device_name = xstrdup("gpu-1"),
        .cdi_device_ids = strv(CDI UID_A "-gpu-1", NULL), .n_cdi_device_ids = 1,
    };
}

/* dra-v1_NodeUnprepareResourcesResponse.bin: UID_B fails, the rest succeed. */
static void unprepare_result(const char *uid, struct dra_claim_result *r)
{
    r->uid = xstrdup(uid);
    if (streq(uid, UID_B))
        r->error = xstrdup("failed to remove CDI spec file: permission denied");
}

static void answer(struct dra_call *c, bool prepare, char **uids, size_t n)
{
    struct dra_claim_result *r = xcalloc(n ? n : 1, sizeof(*r));
    for (size_t i = 0; i < n; i++)
        (prepare ? prepare_result : unprepare_result)(uids[i], &r[i]);
    dra_call_done(c, r, n);
    for (size_t i = 0; i < n; i++)
        dra_claim_result_clear(&r[i]);
    free(r);
}

static void on_call(struct dra_call *c, const struct dra_claim_ref *claims, size_t n, bool prepare)
{
    char **uids = xcalloc(n, sizeof(*uids));
    for (size_t i = 0; i < n; i++)
        uids[i] = xstrdup(claims[i].uid);
    dra_call_set_context(c, uids);
    if (hold && n_held < ELEMENTSOF(held)) {
        held[n_held++] = (struct held){ c, prepare, uids, n };
        printf("held %s %zu\n", prepare ? "prepare" : "unprepare", n);
        fflush(stdout);
        return;
    }
    answer(c, prepare, uids, n);
    for (size_t i = 0; i < n; i++)
        free(uids[i]);
    free(uids);
}

static void op_prepare(void *ud, struct dra_call *c, const struct dra_claim_ref *cl, size_t n)
{
    prepares++;
    on_call(c, cl, n, true);
}

static void op_unprepare(void *ud, struct dra_call *c, const struct dra_claim_ref *cl, size_t n)
{
    unprepares++;
    on_call(c, cl, n, false);
}

static void drop_held(size_t i)
{
    for (size_t k = 0; k < held[i].n; k++)
        free(held[i].uids[k]);
    free(held[i].uids);
    held[i] = held[--n_held];
}

static void op_cancelled(void *ud, struct dra_call *c)
{
    bool found = false;
    cancelled++;
    for (size_t i = 0; i < n_held; i++)
        found |= held[i].c == c && dra_call_context(c) == held[i].uids;
    if (!found)
        printf("cancelled a call that was not held, or lost its context\n");
    for (size_t i = 0; i < n_held; i++)
        if (held[i].c == c) {
            drop_held(i);
            break;
        }
    printf("cancelled\n");
    fflush(stdout);
}

static size_t op_health(void *ud, struct dra_health_entry **out)
{
    health_calls++;
    *out = xcalloc(ELEMENTSOF(health), sizeof(**out));
    for (size_t i = 0; i < ELEMENTSOF(health); i++)
        (*out)[i] = (struct dra_health_entry){ .pool = "node-a", .device = health[i].device,
                                                .health = health[i].health,
                                                .last_updated = health[i].last };
    return ELEMENTSOF(health);
}

static const struct dra_service_ops ops = {
    .prepare = op_prepare,
    .unprepare = op_unprepare,
    .call_cancelled = op_cancelled,
    .health = op_health,
};

static unsigned count_dir(const char *path)
{
    unsigned n = 0;
    DIR *d = opendir(path);
    struct dirent *de;
    if (!d)
        return 0;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n - (streq(path, "/proc/self/fd") ? 1 : 0); /* opendir's own fd */
}

static void command(char *line)
{
    char dev[64];
    int h;
    if (streq(line, "hold 1") || streq(line, "hold 0")) {
        hold = line[5] == '1';
        printf("ok\n");
    } else if (streq(line, "answer")) {
        size_t n = n_held;
        while (n_held) {
            answer(held[0].c, held[0].prepare, held[0].uids, held[0].n);
            drop_held(0);
        }
        printf("answered %zu\n", n);
    } else if (sscanf(line, "health %63s %d", dev, &h) == 2) {
        for (size_t i = 0; i < ELEMENTSOF(health); i++)
            if (streq(health[i].device, dev))
                health[i].health = h;
        printf("ok\n");
    } else if (streq(line, "changed")) {
        dra_service_health_changed(svc);
        printf("ok\n");
    } else if (streq(line, "restart")) {
        struct error err = { 0 };
        int r = dra_service_kubelet_restarted(svc, &err);
        if (r < 0)
            printf("error %s\n", err.msg);
        else
            printf("rebound %d\n", r);
    } else if (streq(line, "status")) {
        printf("status registered=%d streams=%u resend_ms=%u health_calls=%u prepares=%u "
               "unprepares=%u cancelled=%u held=%zu\n",
               dra_service_registered(svc), dra_service_health_streams(svc),
               dra_service_health_resend_ms(svc), health_calls, prepares, unprepares,
               cancelled, n_held);
    } else if (streq(line, "quit")) {
        loop_quit(loop, 0);
        return;
    } else {
        printf("unknown command %s\n", line);
    }
    fflush(stdout);
}

static char inbuf[4096];
static size_t inlen;

static void on_stdin(struct loop *l, int fd, uint32_t events, void *userdata)
{
    ssize_t n = read(fd, inbuf + inlen, sizeof(inbuf) - 1 - inlen);
    if (n <= 0) {
        loop_quit(l, 0); /* the test went away */
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
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s <registrar dir> <plugins dir> <resend ms>\n", argv[0]);
        return 2;
    }
    if (loop_new(&loop) < 0)
        return 1;
    unsigned fds_before = count_dir("/proc/self/fd");
    unsigned threads_before = count_dir("/proc/self/task");
    struct dra_service_options opts = {
        .driver_name = DRA_DRIVER_NAME,
        .registrar_dir = argv[1],
        .plugins_dir = argv[2],
        .health_resend_ms = (unsigned)strtoul(argv[3], NULL, 10),
    };
    struct error err = { 0 };
    if (dra_service_start(loop, &opts, &ops, NULL, &svc, &err) < 0) {
        fprintf(stderr, "dra_service_start: %s\n", err.msg);
        return 1;
    }
    if (loop_add_io(loop, 0, EPOLLIN, on_stdin, NULL) < 0)
        return 1;
    printf("ready %s %s\n", dra_service_socket_path(svc), dra_service_registrar_path(svc));
    fflush(stdout);
    int r = loop_run(loop);
    (void)loop_del_io(loop, 0);
    dra_service_free(svc); /* held calls get call_cancelled */
    printf("fds %u %u threads %u %u\n", fds_before, count_dir("/proc/self/fd"), threads_before,
           count_dir("/proc/self/task"));
    fflush(stdout);
    loop_free(loop);
    return r < 0 ? 1 : 0;
}
