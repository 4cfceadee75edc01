/* Drives the real API client (src/kube/) on our loop for the Python tests: options on the
 * command line, then commands on stdin, one per line, results on stdout:
 *
 *   req ID METHOD PATH [JSON-BODY]   -> "done ID STATUS BODY-JSON|-"
 *   watch PATH [FIELD-SELECTOR]      -> "event ADDED|MODIFIED|DELETED NS/NAME RV", "event SYNCED"
 *   watchx PATH SELECTOR meta|full [stream [forbidden]]
 *                                    -> the same events, metadata only or whole objects, each
 *                                       followed by "shape kind=K spec=yes|no status=yes|no
 *                                       bytes=N" (N: the object as compact JSON); stream:
 *                                       listed through the watch (kube.h stream_list);
 *                                       forbidden: a 403 ends it ("event FORBIDDEN")
 *   stopwatch                        -> "stopped"
 *   hold MS                          -> "held" after MS ms away from the loop (as a start
 *                                       loading NVML is), calling kube_send_now every ms
 *   quit (or end of stdin)
 *
 *   kube-probe [--kubeconfig F] [--sa-dir D] [--timeout-ms N] [--max-bytes N]
 *              [--qps Q] [--burst B] [--max-wait-ms N] [--watch-silence-ms N] [options]
 * `options` prints the effective options (the defaults when none are given) and exits. */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "kube/kube-internal.h"

static struct loop *loop;
static struct kube *kube;
static struct kube_watch *watch;
static bool show_shape;
static char inbuf[65536];
static size_t inlen;

static void out(const char *fmt, ...) _printf_(1, 2);
static void out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void req_done(struct kube *k, int status, json_t *body, void *userdata)
{
    char *id = userdata;
    _cleanup_free_ char *s = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    out("done %s %d %s\n", id, status, s ? s : "-");
    free(id);
}

static const char *meta(json_t *o, const char *key)
{
    json_t *v = json_object_get(json_object_get(o, "metadata"), key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static void watch_cb(struct kube_watch *w, enum kube_watch_event ev, json_t *o, void *userdata)
{
    static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "SYNCED", "FORBIDDEN" };
    if (ev == KUBE_WATCH_SYNCED || ev == KUBE_WATCH_FORBIDDEN)
        out("event %s\n", names[ev]);
    else
        out("event %s %s/%s %s\n", names[ev], meta(o, "namespace"), meta(o, "name"),
            meta(o, "resourceVersion"));
    if (show_shape && o) {
        _cleanup_free_ char *s = json_dumps(o, JSON_COMPACT);
        json_t *kind = json_object_get(o, "kind");
        out("shape kind=%s spec=%s status=%s bytes=%zu\n",
            json_is_string(kind) ? json_string_value(kind) : "-",
            json_object_get(o, "spec") ? "yes" : "no", json_object_get(o, "status") ? "yes" : "no",
            s ? strlen(s) : 0);
    }
    if (ev == KUBE_WATCH_DELETED)
        /* what of the object reaches a DELETED callback (kube.h: after a relist, only
         * kind and metadata without managedFields) */
        out("deleted-object %s status=%s managedFields=%s\n", meta(o, "name"),
            json_object_get(o, "status") ? "yes" : "no",
            json_object_get(json_object_get(o, "metadata"), "managedFields") ? "yes" : "no");
}

static const struct {
    const char *name;
    enum kube_method m;
} methods[] = {
    { "GET", KUBE_GET },       { "POST", KUBE_POST },
    { "PUT", KUBE_PUT },       { "DELETE", KUBE_DELETE },
    { "MERGE", KUBE_PATCH_MERGE }, { "STRATEGIC", KUBE_PATCH_STRATEGIC },
    { "JSONPATCH", KUBE_PATCH_JSON },
};

static void command(char *line)
{
    char *save, *cmd = strtok_r(line, " ", &save);
    if (!cmd)
        return;
    struct error err = { 0 };
    if (streq(cmd, "quit")) {
        loop_quit(loop, 0);
    } else if (streq(cmd, "req")) {
        char *id = strtok_r(NULL, " ", &save), *m = strtok_r(NULL, " ", &save);
        char *path = strtok_r(NULL, " ", &save), *body = strtok_r(NULL, "", &save);
        int mi = -1;
        for (size_t i = 0; m && i < ELEMENTSOF(methods); i++)
            if (streq(methods[i].name, m))
                mi = (int)i;
        if (!id || mi < 0 || !path) {
            out("error bad req\n");
            return;
        }
        json_t *j = body ? json_loads(body, 0, NULL) : NULL;
        if (body && !j) {
            out("error bad body\n");
            return;
        }
        char *idc = xstrdup(id);
        if (!kube_request(kube, methods[mi].m, path, j, req_done, idc, &err)) {
            out("done %s error %s\n", id, err.msg);
            free(idc);
        }
        json_decref(j);
    } else if (streq(cmd, "watch")) {
        char *path = strtok_r(NULL, " ", &save), *sel = strtok_r(NULL, " ", &save);
        watch = kube_watch_start(kube, path, sel, watch_cb, NULL, &err);
        if (!watch)
            out("error %s\n", err.msg);
    } else if (streq(cmd, "watchx")) {
        char *path = strtok_r(NULL, " ", &save), *sel = strtok_r(NULL, " ", &save);
        char *mode = strtok_r(NULL, " ", &save), *stream = strtok_r(NULL, " ", &save);
        char *forbidden = strtok_r(NULL, " ", &save);
        struct kube_watch_options o = { .field_selector = sel,
                                        .metadata_only = mode && streq(mode, "meta"),
                                        .stream_list = stream && streq(stream, "stream"),
                                        .forbidden_ends = forbidden && streq(forbidden, "forbidden") };
        show_shape = true;
        watch = kube_watch_start_opt(kube, path, &o, watch_cb, NULL, &err);
        if (!watch)
            out("error %s\n", err.msg);
    } else if (streq(cmd, "hold")) {
        char *ms = strtok_r(NULL, " ", &save);
        uint64_t until = loop_now_ms() + (ms ? strtoull(ms, NULL, 10) : 0);
        while (loop_now_ms() < until) {
            kube_send_now(kube);
            (void)usleep(1000);
        }
        out("held\n");
    } else if (streq(cmd, "stopwatch")) {
        kube_watch_stop(watch);
        watch = NULL;
        out("stopped\n");
    } else {
        out("error unknown command %s\n", cmd);
    }
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
    struct kube_options o = { 0 };
    static const struct option opts[] = {
        { "kubeconfig", required_argument, NULL, 'k' }, { "sa-dir", required_argument, NULL, 's' },
        { "timeout-ms", required_argument, NULL, 't' }, { "max-bytes", required_argument, NULL, 'm' },
        { "qps", required_argument, NULL, 'q' },        { "burst", required_argument, NULL, 'b' },
        { "watch-silence-ms", required_argument, NULL, 'w' },
        { "max-wait-ms", required_argument, NULL, 'W' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k': o.kubeconfig = optarg; break;
        case 's': kube_sa_dir = optarg; break;
        case 't': o.request_timeout_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'm': o.max_response_bytes = strtoul(optarg, NULL, 10); break;
        case 'q': o.qps = strtod(optarg, NULL); break;
        case 'b': o.burst = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'W': o.max_wait_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'w': kube_watch_silence_ms = (unsigned)strtoul(optarg, NULL, 10); break;
        default: return 2;
        }
    }
    log_set_level(LOG_DEBUG);
    if (loop_new(&loop) < 0)
        return 1;
    struct error err = { 0 };
    if (kube_new(loop, &o, &kube, &err) < 0) {
        out("error %s\n", err.msg);
        return 1;
    }
    if (optind < argc && streq(argv[optind], "options")) {
        out("request_timeout_ms %u\nmax_response_bytes %zu\nqps %g\nburst %u\nmax_wait_ms %u\n"
            "watch_timeout_s %u-%u\n",
            kube->timeout_ms, kube->max_response, kube->qps, kube->burst, kube->wait_ms,
            KUBE_WATCH_TIMEOUT_MIN_S, 2 * KUBE_WATCH_TIMEOUT_MIN_S - 1);
        if (kube_watch_silence_ms)
            out("watch_silence_ms %u\n", kube_watch_silence_ms);
        else
            out("watch_silence_ms timeout+%u\n", KUBE_WATCH_SILENCE_MARGIN_MS);
        kube_free(kube);
        loop_free(loop);
        return 0;
    }
    (void)fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    if (loop_add_io(loop, 0, EPOLLIN, stdin_cb, NULL) < 0)
        return 1;
    out("ready\n");
    int r = loop_run(loop);
    (void)loop_del_io(loop, 0);
    kube_watch_stop(watch);
    kube_free(kube);
    loop_free(loop);
    return r < 0 ? 1 : r;
}
