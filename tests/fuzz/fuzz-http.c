/* Fuzz target: bytes from a peer into the metrics listener's HTTP session (libhttp-parser
 * and everything of ours behind it: head and URL limits, method, version and body checks,
 * routing, pipelining, keep-alive and close, response writing with a peer that does not
 * read). The input is cut into reads at every 0xff byte, so the corpus can place read
 * boundaries inside a request line or a header. The /metrics route renders a small
 * registry whose label values come from the input. With gcc, tests/common/fuzz-main.c
 * replays files and directories: that is how the checked-in corpus runs as a test. */
#include <stdio.h>
#include <sys/socket.h>

#include "core/error.h"
#include "core/log.h"
#include "core/loop.h"
#include "http/http.h"
#include "metrics/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct metrics *registry;

static void on_metrics(void *userdata, struct http_response *r)
{
    r->body = metrics_render(registry, &r->len);
    r->content_type = METRICS_CONTENT_TYPE;
}

static void on_busy(void *userdata, struct http_response *r)
{
    r->status = 503;
    r->body = NULL;
    r->len = 0;
}

static const struct http_route routes[] = {
    { "/metrics", on_metrics },
    { "/readyz", on_busy },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct loop *loop = NULL;
    struct http_server *srv = NULL;
    struct error err = { 0 };
    int sv[2];

    log_set_level(-1);
    if (loop_new(&loop) < 0)
        abort();
    if (http_server_new(loop, "127.0.0.1:0", routes, ELEMENTSOF(routes), NULL, NULL, &srv,
                        &err) < 0) {
        fprintf(stderr, "fuzz-http: %s\n", err.msg);
        abort();
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));

    registry = metrics_new();
    static const char *const l[] = { "v", NULL };
    struct metrics_family *f = metrics_family_new(registry, METRICS_COUNTER, "f_total", "F.", l,
                                                  NULL, 0);
    char label[64];
    snprintf(label, sizeof(label), "%.*s", (int)(size < 32 ? size : 32), (const char *)data);
    metrics_inc(metrics_series(f, (const char *const[]){ label }));

    struct http_conn *c = http_server_adopt(srv, sv[0]);
    size_t start = 0;
    for (size_t i = 0; c && i <= size; i++) {
        if (i == size || data[i] == 0xff) {
            if (http_conn_feed(c, data + start, i - start) < 0)
                c = NULL; /* closed by the server: sv[0] is closed too */
            start = i + 1;
        }
    }
    http_server_free(srv); /* closes sv[0] if still open */
    close(sv[1]);
    loop_free(loop);
    metrics_free(registry);
    return 0;
}
