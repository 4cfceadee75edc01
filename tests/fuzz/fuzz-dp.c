/* Fuzz target for what the kubelet (or anyone on a plugin socket) can ask the
 * DevicePlugin service: a session of RPCs sent by an in-memory HTTP/2 client (nghttp2)
 * into the real service (dp_service.c, through a gRPC server connection adopted on a
 * socketpair), across the setups of dp-node.c. Every answer is decoded and checked.
 *
 * Input: [setup][resource][health mask] then up to MAX_OPS records [op][len lo][len hi]
 * [body]. Ops: the five DevicePlugin methods and the status method with the body as
 * the protobuf request (any bytes), Allocate and GetPreferredAllocation built from
 * device *positions* in the resource (so mutations reach valid IDs), a health change
 * pushed to open ListAndWatch streams, and an unknown method. With gcc the plain
 * driver (tests/common/fuzz-main.c) replays the corpus; with clang -fsanitize=fuzzer
 * (scripts/fuzz.sh) libFuzzer drives it. */
#include <jansson.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "api.pb-c.h"
#include "core/loop.h"
#include "core/macro.h"
#include "dp-node.h"
#include "grpc/grpc_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OPS 16
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MAX_REPLY (1u << 20)

enum op {
    OP_OPTIONS,
    OP_LIST_AND_WATCH,
    OP_PREFERRED,
    OP_ALLOCATE,
    OP_PRESTART,
    OP_STATUS,
    OP_HEALTH,
    OP_UNKNOWN,
    OP_ALLOCATE_PICK,
    OP_PREFERRED_PICK,
    _OP_MAX,
};

static const char *const paths[] = {
    [OP_OPTIONS] = "/v1beta1.DevicePlugin/GetDevicePluginOptions",
    [OP_LIST_AND_WATCH] = "/v1beta1.DevicePlugin/ListAndWatch",
    [OP_PREFERRED] = "/v1beta1.DevicePlugin/GetPreferredAllocation",
    [OP_ALLOCATE] = "/v1beta1.DevicePlugin/Allocate",
    [OP_PRESTART] = "/v1beta1.DevicePlugin/PreStartContainer",
    [OP_STATUS] = DP_STATUS_METHOD,
    [OP_UNKNOWN] = "/v1beta1.DevicePlugin/Nope",
    [OP_ALLOCATE_PICK] = "/v1beta1.DevicePlugin/Allocate",
    [OP_PREFERRED_PICK] = "/v1beta1.DevicePlugin/GetPreferredAllocation",
};

struct call {
    enum op op;
    uint8_t *body; /* framed request */
    size_t body_len, body_off;
    const uint8_t *req; /* the protobuf inside body */
    size_t req_len;
    int status;         /* grpc-status, -1 until seen */
    bool has_message, closed;
    uint8_t *reply;
    size_t reply_len;
};

struct session {
    struct dp_node *node;
    const struct rs_resource *r;
    struct dp_plugin *plugin;
    nghttp2_session *h2;
    struct grpc_conn *conn;
    int fd;                   /* our end of the socketpair */
    struct call calls[MAX_OPS];
    size_t n_calls;
};

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz-dp: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                           \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* ---- the HTTP/2 client ---------------------------------------------------------- */

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    struct call *c = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (!c)
        return 0;
    if (namelen == 11 && !memcmp(name, "grpc-status", 11)) {
        CHECK(valuelen > 0 && valuelen < 3);
        c->status = atoi((const char *)value);
    } else if (namelen == 12 && !memcmp(name, "grpc-message", 12)) {
        c->has_message = valuelen > 0;
    }
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *d, size_t len,
                   void *ud)
{
    struct call *c = nghttp2_session_get_stream_user_data(h2, id);
    if (!c)
        return 0;
    CHECK(c->reply_len + len <= MAX_REPLY);
    c->reply = xrealloc(c->reply, c->reply_len + len + 1);
    memcpy(c->reply + c->reply_len, d, len);
    c->reply_len += len;
    return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *ud)
{
    struct call *c = nghttp2_session_get_stream_user_data(h2, id);
    if (c)
        c->closed = true;
    return 0;
}

static ssize_t read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *ud)
{
    struct call *c = source->ptr;
    size_t n = MIN(length, c->body_len - c->body_off);
    memcpy(buf, c->body + c->body_off, n);
    c->body_off += n;
    if (c->body_off == c->body_len)
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static void quit_cb(struct loop *l, struct loop_timer *t, void *userdata) { loop_quit(l, 0); }

/* Run what is due now on the plugin's loop, then return. */
static void loop_turn(void)
{
    (void)loop_timer_add(dp_node_loop(), 0, quit_cb, NULL);
    (void)loop_run(dp_node_loop());
}

/* Move bytes both ways until neither side has anything more to say. The client is
 * well-formed, so the server must never drop the connection. */
static void pump(struct session *s)
{
    for (int round = 0; round < 256; round++) {
        bool progress = false;
        const uint8_t *out;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(s->h2, &out)) > 0) {
            progress = true;
            CHECK(grpc_server_conn_feed(s->conn, out, (size_t)n) == 0);
        }
        CHECK(n == 0);
        loop_turn();
        uint8_t buf[65536];
        while ((n = read(s->fd, buf, sizeof(buf))) > 0) {
            progress = true;
            CHECK(nghttp2_session_mem_recv(s->h2, buf, (size_t)n) == n);
        }
        CHECK(n < 0 && errno == EAGAIN); /* not EOF: the server kept the connection */
        if (!progress)
            return;
    }
    CHECK(!"the session never went quiet");
}

/* ---- requests ------------------------------------------------------------------- */

static void submit(struct session *s, enum op op, const uint8_t *req, size_t len)
{
    struct call *c = &s->calls[s->n_calls++];
    *c = (struct call){ .op = op, .status = -1 };
    c->body = grpc_frame_message(req, len, &c->body_len);
    c->req = c->body + GRPC_PREFIX_LEN;
    c->req_len = len;
    const char *path = paths[op];
    nghttp2_nv nva[] = {
        GRPC_NV_LIT(":method", "POST"),
        GRPC_NV_LIT(":scheme", "http"),
        GRPC_NV(":path", path, strlen(path)),
        GRPC_NV_LIT(":authority", "localhost"),
        GRPC_NV_LIT("content-type", "application/grpc"),
        GRPC_NV_LIT("te", "trailers"),
    };
    nghttp2_data_provider prd = { .source.ptr = c, .read_callback = read_body };
    CHECK(nghttp2_submit_request(s->h2, NULL, nva, ELEMENTSOF(nva), &prd, c) > 0);
}

static void submit_packed(struct session *s, enum op op, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    _cleanup_free_ uint8_t *buf = xmalloc(len ? len : 1);
    protobuf_c_message_pack(m, buf);
    submit(s, op, buf, len);
}

static char *pick(const struct session *s, uint8_t b)
{
    return s->r->devices[b % s->r->n_devices].id;
}

/* Containers of device positions, separated by 0xff. */
static void allocate_pick(struct session *s, const uint8_t *d, size_t len)
{
    V1beta1__ContainerAllocateRequest cs[MAX_OPS];
    V1beta1__ContainerAllocateRequest *cp[MAX_OPS];
    char *ids[256];
    size_t n_c = 1, n_ids = 0;
    v1beta1__container_allocate_request__init(&cs[0]);
    cs[0].devices_ids = ids;
    for (size_t i = 0; i < len && n_ids < ELEMENTSOF(ids); i++) {
        if (d[i] == 0xff && n_c < MAX_OPS) {
            v1beta1__container_allocate_request__init(&cs[n_c]);
            cs[n_c++].devices_ids = ids + n_ids;
            continue;
        }
        ids[n_ids++] = pick(s, d[i]);
        cs[n_c - 1].n_devices_ids++;
    }
    for (size_t i = 0; i < n_c; i++)
        cp[i] = &cs[i];
    V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
    req.container_requests = cp;
    req.n_container_requests = n_c;
    submit_packed(s, OP_ALLOCATE_PICK, &req.base);
}

/* [size][must count m][m must positions][available positions]; size 0xff is
 * INT32_MAX and 0xfe is -1 (what a hostile peer may send). */
static void preferred_pick(struct session *s, const uint8_t *d, size_t len)
{
    char *ids[256];
    size_t n = 0;
    for (size_t i = 2; i < len && n < ELEMENTSOF(ids); i++)
        ids[n++] = pick(s, d[i]);
    size_t must = len > 1 ? MIN((size_t)d[1], n) : 0;
    V1beta1__ContainerPreferredAllocationRequest c =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    c.must_include_deviceids = ids;
    c.n_must_include_deviceids = must;
    c.available_deviceids = ids + must;
    c.n_available_deviceids = n - must;
    c.allocation_size = len == 0 ? 1 : d[0] == 0xff ? INT32_MAX : d[0] == 0xfe ? -1 : d[0];
    V1beta1__ContainerPreferredAllocationRequest *cp = &c;
    V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    req.container_requests = &cp;
    req.n_container_requests = 1;
    submit_packed(s, OP_PREFERRED_PICK, &req.base);
}

/* ---- checks --------------------------------------------------------------------- */

/* The only message of a unary reply, or the last one of a stream. */
static const uint8_t *last_message(const struct call *c, size_t *len, size_t *count)
{
    const uint8_t *last = NULL;
    size_t off = 0, k = 0;
    while (off < c->reply_len) {
        CHECK(c->reply_len - off >= GRPC_PREFIX_LEN && c->reply[off] == 0);
        const uint8_t *p = c->reply + off + 1;
        size_t n = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
        CHECK(c->reply_len - off - GRPC_PREFIX_LEN >= n);
        last = c->reply + off + GRPC_PREFIX_LEN;
        *len = n;
        off += GRPC_PREFIX_LEN + n;
        k++;
    }
    if (count)
        *count = k;
    return last;
}

static bool listed(char **ids, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (streq(ids[i], id))
            return true;
    return false;
}

static void check_allocate(const struct session *s, const struct call *c, const uint8_t *m,
                           size_t len)
{
    V1beta1__AllocateRequest *req = v1beta1__allocate_request__unpack(NULL, c->req_len, c->req);
    if (!req) {
        CHECK(c->status == GRPC_STATUS_INVALID_ARGUMENT);
        return;
    }
    /* positions always name real devices: only the shared > 1 rule may refuse them */
    if (c->op == OP_ALLOCATE_PICK && s->r->sharing == SHARING_NONE)
        CHECK(c->status == GRPC_STATUS_OK);
    if (c->status == GRPC_STATUS_OK) {
        V1beta1__AllocateResponse *resp = v1beta1__allocate_response__unpack(NULL, len, m);
        CHECK(resp && resp->n_container_responses == req->n_container_requests);
        v1beta1__allocate_response__free_unpacked(resp, NULL);
    } else {
        CHECK(c->status == GRPC_STATUS_UNKNOWN);
    }
    v1beta1__allocate_request__free_unpacked(req, NULL);
}

static void check_preferred(const struct call *c, const uint8_t *m, size_t len)
{
    V1beta1__PreferredAllocationRequest *req =
        v1beta1__preferred_allocation_request__unpack(NULL, c->req_len, c->req);
    if (!req) {
        CHECK(c->status == GRPC_STATUS_INVALID_ARGUMENT);
        return;
    }
    if (c->status == GRPC_STATUS_OK) {
        V1beta1__PreferredAllocationResponse *resp =
            v1beta1__preferred_allocation_response__unpack(NULL, len, m);
        CHECK(resp && resp->n_container_responses == req->n_container_requests);
        for (size_t i = 0; i < resp->n_container_responses; i++) {
            const V1beta1__ContainerPreferredAllocationRequest *q = req->container_requests[i];
            const V1beta1__ContainerPreferredAllocationResponse *a = resp->container_responses[i];
            /* empty (the reference's "no preference"), or the size asked for, every ID
             * from the request; the reference's replica policy answers the must-include
             * IDs first and then what is still needed, so more must-include IDs than the
             * size (the kubelet never sends that) come back whole */
            int64_t want = MAX((int64_t)q->allocation_size, (int64_t)q->n_must_include_deviceids);
            CHECK(a->n_deviceids == 0 || (int64_t)a->n_deviceids == want ||
                  (int64_t)a->n_deviceids == q->allocation_size);
            for (size_t k = 0; k < a->n_deviceids; k++)
                CHECK(listed(q->available_deviceids, q->n_available_deviceids, a->deviceids[k]) ||
                      listed(q->must_include_deviceids, q->n_must_include_deviceids,
                             a->deviceids[k]));
        }
        v1beta1__preferred_allocation_response__free_unpacked(resp, NULL);
    } else {
        CHECK(c->status == GRPC_STATUS_UNKNOWN);
    }
    v1beta1__preferred_allocation_request__free_unpacked(req, NULL);
}

static void check_status(const struct session *s, const uint8_t *m, size_t len)
{
    json_t *root = json_loadb((const char *)m, len, 0, NULL);
    CHECK(root);
    json_t *devs = json_object_get(root, "devices");
    CHECK(json_is_array(devs) && json_array_size(devs) == s->r->n_devices);
    CHECK(streq(json_string_value(json_object_get(root, "resource")), s->r->name));
    for (size_t i = 0; i < s->r->n_devices; i++) {
        const char *h = json_string_value(json_object_get(json_array_get(devs, i), "health"));
        CHECK(h && streq(h, dp_node_device_healthy(s->node, i) ? "Healthy" : "Unhealthy"));
    }
    json_decref(root);
}

/* The newest list on a ListAndWatch stream is the whole resource with today's health. */
static void check_list(const struct session *s, const struct call *c)
{
    size_t len = 0, count = 0;
    const uint8_t *m = last_message(c, &len, &count);
    CHECK(!c->closed && count >= 1);
    V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, len, m);
    CHECK(l && l->n_devices == s->r->n_devices);
    for (size_t i = 0; i < l->n_devices; i++) {
        CHECK(streq(l->devices[i]->id, s->r->devices[i].id));
        CHECK(streq(l->devices[i]->health,
                    dp_node_device_healthy(s->node, i) ? "Healthy" : "Unhealthy"));
    }
    v1beta1__list_and_watch_response__free_unpacked(l, NULL);
}

static void check_unary(const struct session *s, const struct call *c)
{
    CHECK(c->closed && c->status >= 0);
    CHECK(c->status == GRPC_STATUS_OK || c->has_message);
    size_t len = 0, count = 0;
    const uint8_t *m = last_message(c, &len, &count);
    CHECK(count == (c->status == GRPC_STATUS_OK ? 1u : 0u));
    switch (c->op) {
    case OP_OPTIONS: {
        V1beta1__DevicePluginOptions *o = v1beta1__device_plugin_options__unpack(NULL, len, m);
        CHECK(o && o->get_preferred_allocation_available && !o->pre_start_required);
        v1beta1__device_plugin_options__free_unpacked(o, NULL);
        break;
    }
    case OP_ALLOCATE:
    case OP_ALLOCATE_PICK:
        check_allocate(s, c, m, len);
        break;
    case OP_PREFERRED:
    case OP_PREFERRED_PICK:
        check_preferred(c, m, len);
        break;
    case OP_PRESTART: {
        V1beta1__PreStartContainerRequest *r =
            v1beta1__pre_start_container_request__unpack(NULL, c->req_len, c->req);
        CHECK(c->status == (r ? GRPC_STATUS_OK : GRPC_STATUS_INVALID_ARGUMENT));
        if (r)
            v1beta1__pre_start_container_request__free_unpacked(r, NULL);
        break;
    }
    case OP_STATUS:
        CHECK(c->status == GRPC_STATUS_OK);
        check_status(s, m, len);
        break;
    case OP_UNKNOWN:
        CHECK(c->status == GRPC_STATUS_UNIMPLEMENTED);
        break;
    default:
        CHECK(!"not a unary op");
    }
}

/* ---- the session ---------------------------------------------------------------- */

static void session_open(struct session *s)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        oom();
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
    CHECK(nghttp2_session_client_new(&s->h2, cbs, s) == 0);
    nghttp2_session_callbacks_del(cbs);
    CHECK(nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, NULL, 0) == 0);

    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    s->conn = grpc_server_adopt(dp_plugin_server(s->plugin), sv[0]);
    CHECK(s->conn);
    s->fd = sv[1];
}

/* The peer hangs up: the server frees the connection and the service every stream. */
static void session_close(struct session *s)
{
    nghttp2_session_del(s->h2);
    close(s->fd);
    loop_turn();
    CHECK(grpc_server_connections(dp_plugin_server(s->plugin)) == 0);
    CHECK(dp_plugin_streams(s->plugin) == 0);
    for (size_t i = 0; i < s->n_calls; i++) {
        free(s->calls[i].body);
        free(s->calls[i].reply);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    struct session s = { .node = dp_node_get(data[0]) };
    size_t which = data[1] % s.node->rs.n_resources;
    s.r = &s.node->rs.resources[which];
    s.plugin = s.node->plugins[which];
    s.node->health_mask = data[2];
    session_open(&s);

    size_t off = 3;
    while (s.n_calls < MAX_OPS && size - off >= 3) {
        enum op op = data[off] % _OP_MAX;
        size_t len = MIN((size_t)(data[off + 1] | data[off + 2] << 8), size - off - 3);
        const uint8_t *body = data + off + 3;
        off += 3 + len;
        if (op == OP_HEALTH) {
            s.node->health_mask = len ? body[0] : ~s.node->health_mask;
            dp_plugin_devices_changed(s.plugin);
        } else if (op == OP_ALLOCATE_PICK) {
            allocate_pick(&s, body, len);
        } else if (op == OP_PREFERRED_PICK) {
            preferred_pick(&s, body, len);
        } else {
            submit(&s, op, body, len);
        }
        pump(&s);
        for (size_t i = 0; i < s.n_calls; i++) {
            const struct call *c = &s.calls[i];
            if (c->op == OP_LIST_AND_WATCH)
                check_list(&s, c);
            else if (i == s.n_calls - 1 && op != OP_HEALTH)
                check_unary(&s, c);
        }
    }
    session_close(&s);
    return 0;
}

/* No request may turn a peer-chosen number into a huge allocation (a GetPreferredAllocation
 * size of 2^31-1 once became an 8 GiB calloc): cap what the process may allocate, so one
 * fails here instead of passing on a machine with memory to spare. libFuzzer runs have
 * -malloc_limit_mb (scripts/fuzz.sh); ASan builds reserve address space, so they get the
 * sanitizer's own limit instead of RLIMIT_AS. */
#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#define FUZZ_MAX_ALLOC_MB 1024

#ifdef FUZZ_ASAN
__attribute__((visibility("default"), used)) const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "max_allocation_size_mb=1024"; }
#else
static void __attribute__((constructor)) cap_memory(void)
{
    struct rlimit rl = { .rlim_cur = (rlim_t)FUZZ_MAX_ALLOC_MB << 20 << 1,
                         .rlim_max = RLIM_INFINITY };
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
}
#endif

#ifndef GDP_LIBFUZZER
/* The replay driver calls this before exiting, so valgrind and ASan see no leaks. */
static void __attribute__((destructor)) fuzz_dp_done(void) { dp_node_free_all(); }
#endif
