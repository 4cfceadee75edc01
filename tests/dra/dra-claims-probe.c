/* The claim preparer (src/dra/dra-claims.c) on the real API client, driven by lines on
 * stdin for tests/dra/test_dra_claims.py, against the fake API server. The node is
 * "gpu-node-1" (the pool of the captured claim objects) with 8 GPUs, minors 0..7.
 *
 * usage: dra-claims-probe --kubeconfig K --cdi-root D --plugin-dir P [--boot-id-file F]
 *        [--kube-qps Q --kube-burst B] (default 1000 each) [--kube-timeout-ms T]
 *        [--kube-max-wait-ms W] (the API client's options; 0: its defaults)
 * stdin, one command per line, answers on stdout:
 *   prepare ID NS/NAME/UID...     -> "done ID <JSON results>"
 *   unprepare ID NS/NAME/UID...   -> "done ID <JSON results>"
 *   prepare-gen ID N              -> prepare of N claims ns/c<i>/u-<i>; "done ID <JSON>"
 *   prepare-gen ID N MS           -> the same with the kubelet's deadline MS ms from now
 *                                    (dra_claims_set_deadline)
 *   cancel ID NS/NAME/UID...      -> a prepare cancelled at once: "cancelled ID"
 *   cancel-later ID               -> the prepare or unprepare ID still in flight cancelled:
 *                                    "cancelled ID"
 *   count                         -> "count N" (claims in the checkpoint)
 *   fail-reset MINOR              -> that GPU's resets fail from the loop (-1: none do)
 * and, from the engine's apply_config: "applied MINOR SHARING INTERVAL" when it starts;
 * from its reset_config: "reset MINOR SHARING". Both end from the loop (a 0 ms timer),
 * like a tool: an apply on minor 7 fails at once, on minor 6 from the loop; minor 5 takes
 * 1 s ("apply-cancelled 5" when cancelled first)
 *   (end of stdin)                -> everything freed, exit 0 */
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "config/config.h"
#include "core/log.h"
#include "core/loop.h"
#include "dra/dra-claims.h"
#include "kube/kube.h"

static struct loop *loop;
static struct dra_claims *claims;
/* Calls in flight, for cancel-later: the id (the done's userdata) and the call. */
static struct { char *id; struct dra_claims_call *call; } flight[64];
static int fail_reset = -1;
static char inbuf[1 << 20];
static size_t inlen;

static void done_cb(void *userdata, const struct dra_claim_result *res, size_t n)
{
    char *id = userdata;
    for (size_t i = 0; i < ELEMENTSOF(flight); i++)
        if (flight[i].id == id)
            flight[i].id = NULL;
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *devs = json_array();
        for (size_t j = 0; j < res[i].n_devices; j++) {
            const struct dra_prepared_device *d = &res[i].devices[j];
            json_t *reqs = json_array(), *cdi = json_array();
            for (size_t k = 0; k < d->n_request_names; k++)
                json_array_append_new(reqs, json_string(d->request_names[k]));
            for (size_t k = 0; k < d->n_cdi_device_ids; k++)
                json_array_append_new(cdi, json_string(d->cdi_device_ids[k]));
            json_array_append_new(devs, json_pack("{s:o, s:s, s:s, s:o}", "requests", reqs, "pool",
                                                  d->pool_name, "device", d->device_name, "cdi", cdi));
        }
        json_t *o = json_pack("{s:s, s:o}", "uid", res[i].uid, "devices", devs);
        if (res[i].error)
            json_object_set_new(o, "error", json_string(res[i].error));
        json_array_append_new(a, o);
    }
    char *text = json_dumps(a, JSON_COMPACT);
    printf("done %s %s\n", id, text);
    fflush(stdout);
    free(text);
    json_decref(a);
    free(id);
}

/* The sharing configs the engine applies: said on stdout, ended from the loop. */
struct dra_apply_op {
    struct loop_timer *timer;
    unsigned minor;
    bool fail;
    char uuid[sizeof(((struct inv_gpu *)0)->uuid)];
    dra_apply_done_fn done;
    void *userdata;
};

static void apply_end(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct dra_apply_op *op = userdata;
    struct error err = { 0 };
    int r = op->fail ? error_set(&err, -EIO, "simulated failure later on GPU %s", op->uuid) : 0;
    op->done(op->userdata, r, &err);
    free(op);
}

static int start(const struct inv_gpu *gpu, bool fail, dra_apply_done_fn done, void *done_userdata,
                 struct dra_apply_op **opp)
{
    struct dra_apply_op *op = xcalloc(1, sizeof(*op));
    *op = (struct dra_apply_op){ .minor = gpu->minor, .fail = fail, .done = done,
                                 .userdata = done_userdata };
    snprintf(op->uuid, sizeof(op->uuid), "%s", gpu->uuid);
    op->timer = loop_timer_add(loop, gpu->minor == 5 ? 1000 : 0, apply_end, op);
    *opp = op;
    return 1;
}

static int apply_config(void *userdata, const struct inv_gpu *gpu, const struct inv_mig *mig,
                        const struct dra_config *cfg, dra_apply_done_fn done, void *done_userdata,
                        struct dra_apply_op **opp, struct error *err)
{
    if (gpu->minor == 7)
        return error_set(err, -EIO, "simulated failure on GPU %s", gpu->uuid);
    printf("applied %u %s %s\n", gpu->minor, dra_sharing_name(cfg->sharing),
           dra_ts_interval_name(cfg->interval));
    fflush(stdout);
    return start(gpu, gpu->minor == 6, done, done_userdata, opp);
}

static int reset_config(void *userdata, const struct inv_gpu *gpu, const struct inv_mig *mig,
                        const struct dra_config *cfg, dra_apply_done_fn done, void *done_userdata,
                        struct dra_apply_op **opp, struct error *err)
{
    printf("reset %u %s\n", gpu->minor, dra_sharing_name(cfg->sharing));
    fflush(stdout);
    return start(gpu, (int)gpu->minor == fail_reset, done, done_userdata, opp);
}

static void apply_cancel(void *userdata, struct dra_apply_op *op)
{
    printf("apply-cancelled %u\n", op->minor);
    fflush(stdout);
    loop_timer_cancel(loop, op->timer);
    free(op);
}

/* "ns/name/uid" words into refs (pointing into the words). */
static size_t parse_refs(char **words, size_t n, struct dra_claim_ref *refs)
{
    for (size_t i = 0; i < n; i++) {
        char *ns = words[i], *name = strchr(ns, '/'), *uid = name ? strchr(name + 1, '/') : NULL;
        if (!uid)
            return i;
        *name++ = 0;
        *uid++ = 0;
        refs[i] = (struct dra_claim_ref){ .namespace_ = ns, .name = name, .uid = uid };
    }
    return n;
}

static void command(char *line)
{
    char *words[512];
    size_t n = 0;
    for (char *save = NULL, *w = strtok_r(line, " ", &save); w && n < ELEMENTSOF(words);
         w = strtok_r(NULL, " ", &save))
        words[n++] = w;
    if (n == 0)
        return;
    struct dra_claim_ref refs[512];
    if (streq(words[0], "count")) {
        printf("count %zu\n", dra_claims_prepared_count(claims));
    } else if (n >= 2 && (streq(words[0], "prepare") || streq(words[0], "unprepare") ||
                          streq(words[0], "cancel"))) {
        size_t k = parse_refs(words + 2, n - 2, refs);
        char *id = xstrdup(words[1]);
        if (streq(words[0], "prepare") || streq(words[0], "unprepare")) {
            struct dra_claims_call *call = streq(words[0], "prepare")
                ? dra_claims_prepare(claims, refs, k, done_cb, id)
                : dra_claims_unprepare(claims, refs, k, done_cb, id);
            for (size_t i = 0; i < ELEMENTSOF(flight); i++)
                if (!flight[i].id) {
                    flight[i].id = id;
                    flight[i].call = call;
                    break;
                }
        } else {
            dra_claims_cancel(dra_claims_prepare(claims, refs, k, done_cb, id));
            printf("cancelled %s\n", id);
            free(id);
        }
    } else if (n == 2 && streq(words[0], "cancel-later")) {
        for (size_t i = 0; i < ELEMENTSOF(flight); i++)
            if (flight[i].id && streq(flight[i].id, words[1])) {
                dra_claims_cancel(flight[i].call);
                free(flight[i].id);
                flight[i].id = NULL;
                printf("cancelled %s\n", words[1]);
            }
    } else if (n == 2 && streq(words[0], "fail-reset")) {
        fail_reset = atoi(words[1]);
        printf("ok fail-reset\n");
    } else if ((n == 3 || n == 4) && streq(words[0], "prepare-gen")) {
        size_t count = strtoul(words[2], NULL, 10);
        struct dra_claim_ref *many = xcalloc(count + 1, sizeof(*many));
        char **strs = xcalloc(2 * count + 1, sizeof(char *));
        for (size_t i = 0; i < count; i++) {
            strs[2 * i] = xasprintf("c%zu", i);
            strs[2 * i + 1] = xasprintf("u-%zu", i);
            many[i] = (struct dra_claim_ref){ .namespace_ = "ns", .name = strs[2 * i],
                                              .uid = strs[2 * i + 1] };
        }
        struct dra_claims_call *call = dra_claims_prepare(claims, many, count, done_cb,
                                                          xstrdup(words[1]));
        if (n == 4)
            dra_claims_set_deadline(call, loop_now_ms() + strtoull(words[3], NULL, 10));
        for (size_t i = 0; i < 2 * count; i++)
            free(strs[i]);
        free(strs);
        free(many);
    } else {
        printf("error unknown command %s\n", words[0]);
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
    struct kube_options ko = { .qps = 1000, .burst = 1000 };
    struct dra_claims_options o = { .node_name = "gpu-node-1", .apply_config = apply_config,
                                    .reset_config = reset_config, .apply_cancel = apply_cancel };
    static const struct option opts[] = {
        { "kubeconfig", required_argument, NULL, 'k' }, { "cdi-root", required_argument, NULL, 'c' },
        { "plugin-dir", required_argument, NULL, 'p' }, { "boot-id-file", required_argument, NULL, 'b' },
        { "kube-qps", required_argument, NULL, 'q' },
        { "kube-burst", required_argument, NULL, 'B' },
        { "kube-timeout-ms", required_argument, NULL, 't' },
        { "kube-max-wait-ms", required_argument, NULL, 'w' },
        { NULL, 0, NULL, 0 },
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'k': ko.kubeconfig = optarg; break;
        case 'c': o.cdi_root = optarg; break;
        case 'p': o.plugin_dir = optarg; break;
        case 'b': o.boot_id_path = optarg; break;
        case 'q': ko.qps = strtod(optarg, NULL); break;
        case 'B': ko.burst = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 't': ko.request_timeout_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'w': ko.max_wait_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
        default: return 2;
        }
    }
    log_set_level(LOG_DEBUG);
    struct config cfg;
    config_init_defaults(&cfg);
    o.cfg = &cfg;

    struct inv_gpu gpus[8];
    memset(gpus, 0, sizeof(gpus));
    for (unsigned i = 0; i < 8; i++) {
        gpus[i].index = i;
        gpus[i].minor = i;
        snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "GPU-%08u-0000-0000-0000-000000000000", i);
        snprintf(gpus[i].name, sizeof(gpus[i].name), "NVIDIA H100 80GB HBM3");
        gpus[i].memory_bytes = 80ull << 30;
        gpus[i].numa_node = -1;
    }
    struct inventory inv = { .gpus = gpus, .n_gpus = 8 };
    struct dra_device_set set = { 0 };
    struct error err = { 0 };
    struct kube *kube = NULL;
    if (loop_new(&loop) < 0 || dra_devices_build(&inv, NULL, &set, &err) < 0 ||
        kube_new(loop, &ko, &kube, &err) < 0 || dra_claims_new(loop, kube, &o, &claims, &err) < 0) {
        printf("error %s\n", err.msg);
        return 1;
    }
    dra_claims_set_devices(claims, &cfg, &inv, &set);
    (void)fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    if (loop_add_io(loop, 0, EPOLLIN, stdin_cb, NULL) < 0)
        return 1;
    printf("ready\n");
    fflush(stdout);
    int r = loop_run(loop);
    (void)loop_del_io(loop, 0);
    dra_claims_free(claims);
    kube_free(kube);
    loop_free(loop);
    dra_device_set_clear(&set);
    config_free(&cfg);
    return r;
}
