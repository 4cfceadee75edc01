/* DevicePlugin service: decode, decide (through the policies), encode, reply.
 * Every handler runs on the loop thread and answers before returning. */
#include <jansson.h>
#include <stdio.h>

#include "api.pb-c.h"
#include "core/log.h"
#include "core/loop.h"
#include "dp_service.h"
#include "grpc/grpc.h"
#include "metrics/metrics.h"
#include "output/allocate.h"
#include "policy/placement.h"

struct dp_stream {
    struct grpc_stream *s;
    struct dp_stream *next;
};

struct dp_plugin {
    struct loop *loop;
    struct dp_context ctx;
    char *socket_path;
    struct grpc_server *server;
    struct dp_stream *streams;
    unsigned n_streams;
    /* The last list every open stream has been sent: a health change elsewhere on the
     * node must not re-send an unchanged list (the reference sends nothing then). */
    uint8_t *last;
    size_t last_len;
};

static const char *resource_name(const struct dp_plugin *p) { return p->ctx.resource->name; }

int dp_encode_device_list(const struct dp_context *ctx, uint8_t **out, size_t *len)
{
    const struct rs_resource *r = ctx->resource;
    V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    V1beta1__Device *devs = xcalloc(r->n_devices ? r->n_devices : 1, sizeof(*devs));
    V1beta1__Device **ptrs = xcalloc(r->n_devices ? r->n_devices : 1, sizeof(*ptrs));
    V1beta1__TopologyInfo *topo = xcalloc(r->n_devices ? r->n_devices : 1, sizeof(*topo));
    V1beta1__NUMANode *nodes = xcalloc(r->n_devices ? r->n_devices : 1, sizeof(*nodes));
    V1beta1__NUMANode **node_ptrs = xcalloc(r->n_devices ? r->n_devices : 1, sizeof(*node_ptrs));

    for (size_t i = 0; i < r->n_devices; i++) {
        const struct rs_device *d = &r->devices[i];
        v1beta1__device__init(&devs[i]);
        devs[i].id = d->id;
        bool healthy = ctx->callbacks.device_healthy
                           ? ctx->callbacks.device_healthy(ctx->userdata, d, NULL)
                           : true;
        devs[i].health = healthy ? "Healthy" : "Unhealthy";
        if (d->numa_node >= 0) {
            v1beta1__topology_info__init(&topo[i]);
            v1beta1__numanode__init(&nodes[i]);
            nodes[i].id = d->numa_node;
            node_ptrs[i] = &nodes[i];
            topo[i].n_nodes = 1;
            topo[i].nodes = &node_ptrs[i];
            devs[i].topology = &topo[i];
        }
        ptrs[i] = &devs[i];
    }
    resp.n_devices = r->n_devices;
    resp.devices = ptrs;
    *len = v1beta1__list_and_watch_response__get_packed_size(&resp);
    *out = xmalloc(*len);
    v1beta1__list_and_watch_response__pack(&resp, *out);
    free(devs);
    free(ptrs);
    free(topo);
    free(nodes);
    free(node_ptrs);
    return 0;
}

static void reply_message(struct grpc_reply *reply, const ProtobufCMessage *m)
{
    reply->status = GRPC_STATUS_OK;
    reply->len = protobuf_c_message_get_packed_size(m);
    reply->data = xmalloc(reply->len ? reply->len : 1);
    protobuf_c_message_pack(m, reply->data);
}

static void reply_error(struct grpc_reply *reply, int status, const char *msg)
{
    reply->status = status;
    reply->message = xstrdup(msg);
}

static void on_get_options(void *userdata, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    opts.pre_start_required = false;
    opts.get_preferred_allocation_available = true;
    reply_message(reply, &opts.base);
}

static void on_prestart(void *userdata, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    V1beta1__PreStartContainerRequest *r = v1beta1__pre_start_container_request__unpack(NULL, len, req);
    if (!r) {
        reply_error(reply, GRPC_STATUS_INVALID_ARGUMENT, "PreStartContainer: malformed request");
        return;
    }
    v1beta1__pre_start_container_request__free_unpacked(r, NULL);
    V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
    reply_message(reply, &resp.base);
}

/* One RPC answered: counted, and timed from t0 (an error counts in both counters). */
static void count_rpc(struct metrics_series *requests, struct metrics_series *errors,
                      struct metrics_series *seconds, bool failed, uint64_t t0)
{
    metrics_inc(requests);
    if (failed)
        metrics_inc(errors);
    if (seconds)
        metrics_observe(seconds, (double)(loop_now_us() - t0) / 1e6);
}

static void on_allocate(void *userdata, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    struct dp_plugin *p = userdata;
    const struct dp_metrics *m = &p->ctx.metrics;
    uint64_t t0 = loop_now_us();
    V1beta1__AllocateRequest *r = v1beta1__allocate_request__unpack(NULL, len, req);
    if (!r) {
        reply_error(reply, GRPC_STATUS_INVALID_ARGUMENT, "Allocate: malformed request");
        count_rpc(m->allocate, m->allocate_errors, m->allocate_seconds, true, t0);
        return;
    }
    V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
    resp.n_container_responses = r->n_container_requests;
    resp.container_responses =
        xcalloc(r->n_container_requests ? r->n_container_requests : 1, sizeof(void *));
    struct error err = { 0 };
    int rc = 0;
    size_t built = 0;
    for (size_t i = 0; i < r->n_container_requests && rc == 0; i++) {
        V1beta1__ContainerAllocateRequest *c = r->container_requests[i];
        resp.container_responses[i] = alloc_container(
            p->ctx.resource, p->ctx.config, (const char *const *)c->devices_ids, c->n_devices_ids,
            &err);
        if (resp.container_responses[i])
            built++;
        else
            rc = err.code < 0 ? err.code : -EINVAL;
    }
    if (rc < 0) {
        log_warning("Allocate for '%s' failed: %s", resource_name(p), err.msg);
        reply_error(reply, GRPC_STATUS_UNKNOWN, err.msg);
    } else {
        reply_message(reply, &resp.base);
        log_debug("Allocate for '%s': %zu containers in %llu us", resource_name(p), built,
                  (unsigned long long)(loop_now_us() - t0));
    }
    for (size_t i = 0; i < built; i++)
        alloc_response_free(resp.container_responses[i]);
    free(resp.container_responses);
    v1beta1__allocate_request__free_unpacked(r, NULL);
    count_rpc(m->allocate, m->allocate_errors, m->allocate_seconds, rc < 0, t0);
}

int dp_preferred_container(const struct dp_context *ctx,
                           const V1beta1__ContainerPreferredAllocationRequest *c,
                           const char ***ids, size_t *n_ids, struct error *err)
{
    struct placement_request pr = {
        .available = (const char *const *)c->available_deviceids,
        .n_available = c->n_available_deviceids,
        .must_include = (const char *const *)c->must_include_deviceids,
        .n_must_include = c->n_must_include_deviceids,
        .size = c->allocation_size,
    };
    return placement_preferred(ctx->resource, ctx->config, ctx->topo, &pr, ids, n_ids, err);
}

static void on_preferred(void *userdata, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    struct dp_plugin *p = userdata;
    const struct dp_metrics *m = &p->ctx.metrics;
    uint64_t t0 = loop_now_us();
    V1beta1__PreferredAllocationRequest *r = v1beta1__preferred_allocation_request__unpack(NULL, len, req);
    if (!r) {
        reply_error(reply, GRPC_STATUS_INVALID_ARGUMENT, "GetPreferredAllocation: malformed request");
        count_rpc(m->preferred, m->preferred_errors, m->preferred_seconds, true, t0);
        return;
    }
    size_t n = r->n_container_requests;
    V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    V1beta1__ContainerPreferredAllocationResponse *cr = xcalloc(n ? n : 1, sizeof(*cr));
    V1beta1__ContainerPreferredAllocationResponse **crp = xcalloc(n ? n : 1, sizeof(*crp));
    struct error err = { 0 };
    int rc = 0;
    size_t done = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        V1beta1__ContainerPreferredAllocationRequest *c = r->container_requests[i];
        v1beta1__container_preferred_allocation_response__init(&cr[i]);
        crp[i] = &cr[i];
        const char **ids = NULL;
        size_t n_ids = 0;
        rc = dp_preferred_container(&p->ctx, c, &ids, &n_ids, &err);
        if (rc == 0) {
            cr[i].deviceids = (char **)ids;
            cr[i].n_deviceids = n_ids;
            done++;
        }
    }
    if (rc < 0) {
        log_warning("GetPreferredAllocation for '%s' failed: %s", resource_name(p), err.msg);
        char *msg = xasprintf("error getting list of preferred allocation devices: %s", err.msg);
        reply_error(reply, GRPC_STATUS_UNKNOWN, msg);
        free(msg);
    } else {
        resp.n_container_responses = n;
        resp.container_responses = crp;
        reply_message(reply, &resp.base);
    }
    for (size_t i = 0; i < done; i++)
        free(cr[i].deviceids);
    free(cr);
    free(crp);
    v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
    count_rpc(m->preferred, m->preferred_errors, m->preferred_seconds, rc < 0, t0);
}

static void on_status(void *userdata, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    struct dp_plugin *p = userdata;
    const struct rs_resource *r = p->ctx.resource;
    json_t *devs = json_array();
    for (size_t i = 0; i < r->n_devices; i++) {
        const char *reason = NULL;
        bool ok = p->ctx.callbacks.device_healthy
                      ? p->ctx.callbacks.device_healthy(p->ctx.userdata, &r->devices[i], &reason)
                      : true;
        json_array_append_new(devs, json_pack("{s:s, s:s, s:s}", "id", r->devices[i].id, "health",
                                              ok ? "Healthy" : "Unhealthy", "reason",
                                              reason ? reason : ""));
    }
    json_t *root = json_pack("{s:s, s:i, s:I, s:o}", "resource", r->name, "pid", (int)getpid(),
                             "streams", (json_int_t)p->n_streams, "devices", devs);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) {
        reply_error(reply, GRPC_STATUS_INTERNAL, "encoding the status failed");
        return;
    }
    reply->status = GRPC_STATUS_OK;
    reply->len = strlen(text);
    reply->data = (uint8_t *)text;
}

/* Sends the current list to a new stream s, or (s NULL) to every stream when it differs
 * from the last one sent. Invariant: every open stream has been sent p->last. */
static void send_list(struct dp_plugin *p, struct grpc_stream *s)
{
    uint8_t *buf;
    size_t len;
    dp_encode_device_list(&p->ctx, &buf, &len);
    bool changed = !p->last || len != p->last_len || memcmp(buf, p->last, len) != 0;
    if (s)
        grpc_stream_send(s, buf, len);
    if (changed) {
        for (struct dp_stream *ds = p->streams; ds; ds = ds->next)
            if (ds->s != s)
                grpc_stream_send(ds->s, buf, len);
        free(p->last);
        p->last = TAKE_PTR(buf);
        p->last_len = len;
    }
    free(buf);
}

static int on_list_and_watch(void *userdata, struct grpc_stream *s, const uint8_t *req, size_t len,
                             char **message)
{
    struct dp_plugin *p = userdata;
    struct dp_stream *ds = xcalloc(1, sizeof(*ds));
    ds->s = s;
    ds->next = p->streams;
    p->streams = ds;
    p->n_streams++;
    log_debug("ListAndWatch for '%s' opened (%u streams)", resource_name(p), p->n_streams);
    send_list(p, s);
    return GRPC_STATUS_OK;
}

static void on_list_and_watch_closed(void *userdata, struct grpc_stream *s)
{
    struct dp_plugin *p = userdata;
    for (struct dp_stream **pp = &p->streams; *pp; pp = &(*pp)->next) {
        if ((*pp)->s == s) {
            struct dp_stream *dead = *pp;
            *pp = dead->next;
            free(dead);
            p->n_streams--;
            break;
        }
    }
    log_debug("ListAndWatch for '%s' closed (%u streams)", resource_name(p), p->n_streams);
}

static const struct grpc_method dp_methods[] = {
    { .path = "/v1beta1.DevicePlugin/GetDevicePluginOptions", .unary = on_get_options },
    { .path = "/v1beta1.DevicePlugin/ListAndWatch",
      .stream_open = on_list_and_watch,
      .stream_closed = on_list_and_watch_closed },
    { .path = "/v1beta1.DevicePlugin/GetPreferredAllocation", .unary = on_preferred },
    { .path = "/v1beta1.DevicePlugin/Allocate", .unary = on_allocate },
    { .path = "/v1beta1.DevicePlugin/PreStartContainer", .unary = on_prestart },
    { .path = DP_STATUS_METHOD, .unary = on_status },
};

static int serve(struct dp_plugin *p, struct error *err)
{
    int r = grpc_server_new(p->loop, p->socket_path, dp_methods, ELEMENTSOF(dp_methods), p, NULL,
                            &p->server);
    if (r < 0)
        return error_set(err, r, "serving '%s' on %s: %s", resource_name(p), p->socket_path,
                         strerror(-r));
    return 0;
}

int dp_plugin_start(struct loop *l, const char *socket_dir, const struct dp_context *ctx,
                    struct dp_plugin **out, struct error *err)
{
    struct dp_plugin *p = xcalloc(1, sizeof(*p));
    p->loop = l;
    p->ctx = *ctx;
    p->socket_path = xasprintf("%s/%s", socket_dir, ctx->resource->socket_name);
    int r = serve(p, err);
    if (r < 0) {
        free(p->socket_path);
        free(p);
        return r;
    }
    *out = p;
    return 0;
}

void dp_plugin_stop(struct dp_plugin *p)
{
    if (!p)
        return;
    grpc_server_free(p->server); /* fires stream_closed for every stream */
    while (p->streams) {
        struct dp_stream *s = p->streams;
        p->streams = s->next;
        free(s);
    }
    free(p->last);
    free(p->socket_path);
    free(p);
}

int dp_plugin_rebind(struct dp_plugin *p, struct error *err)
{
    grpc_server_free(p->server);
    p->server = NULL;
    return serve(p, err);
}

void dp_plugin_retarget(struct dp_plugin *p, const struct dp_context *ctx, bool send)
{
    /* Same resource name and socket: the server, its connections, streams and the
     * kubelet's registration stay; only what the answers are computed from changes. */
    p->ctx = *ctx;
    if (send)
        dp_plugin_devices_changed(p);
}

void dp_plugin_devices_changed(struct dp_plugin *p)
{
    if (p->streams)
        send_list(p, NULL);
}

const char *dp_plugin_socket_path(const struct dp_plugin *p) { return p->socket_path; }
unsigned dp_plugin_streams(const struct dp_plugin *p) { return p->n_streams; }
struct grpc_server *dp_plugin_server(const struct dp_plugin *p) { return p->server; }
