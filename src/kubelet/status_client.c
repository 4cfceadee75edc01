/* The client side of the plugin's status RPC (DP_STATUS_METHOD, served by
 * dp_service.c): `list` asks a running plugin for the live health of its devices over
 * its socket, on a private loop, and gets the JSON answer back. */
#include <stdio.h>
#include <sys/stat.h>

#include "core/loop.h"
#include "dp_service.h"
#include "grpc/grpc.h"
#include "status_client.h"

struct query {
    struct loop *loop;
    int status;
    char *message;
    char *body;
};

static void on_done(void *userdata, int status, const char *message, const uint8_t *resp,
                    size_t len)
{
    struct query *q = userdata;
    q->status = status;
    q->message = xstrdup(message ? message : "");
    if (status == GRPC_STATUS_OK)
        q->body = xstrndup((const char *)resp, len);
    loop_quit(q->loop, 0);
}

int status_query(const char *socket_path, unsigned timeout_ms, json_t **out, struct error *err)
{
    struct stat st;
    if (stat(socket_path, &st) < 0 || !S_ISSOCK(st.st_mode))
        return error_set(err, -ENOENT, "%s: no plugin socket", socket_path);
    struct query q = { .status = GRPC_STATUS_UNKNOWN };
    int r = loop_new(&q.loop);
    if (r < 0)
        return error_set(err, r, "creating a loop: %s", strerror(-r));
    static const uint8_t empty[1];
    r = grpc_call_unary(q.loop, socket_path, "localhost", DP_STATUS_METHOD, empty, 0, timeout_ms,
                        on_done, &q, NULL);
    if (r == 0)
        r = loop_run(q.loop);
    loop_free(q.loop);
    if (r < 0) {
        free(q.message);
        free(q.body);
        return error_set(err, r, "%s: %s", socket_path, strerror(-r));
    }
    if (q.status != GRPC_STATUS_OK) {
        r = error_set(err, -EIO, "%s: status %d: %s", socket_path, q.status, q.message);
        free(q.message);
        free(q.body);
        return r;
    }
    json_error_t jerr;
    *out = json_loads(q.body, 0, &jerr);
    free(q.message);
    free(q.body);
    if (!*out)
        return error_set(err, -EBADMSG, "%s: malformed status: %s", socket_path, jerr.text);
    return 0;
}
