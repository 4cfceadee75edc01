/* The DRA driver's registration socket (dra-registrar.h). Both methods are answered at
 * once: GetInfo from the strings given at start, NotifyRegistrationStatus by recording
 * and logging the outcome. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "core/fs.h"
#include "core/log.h"
#include "core/macro.h"
#include "core/ratelimit.h"
#include "dra/dra-registrar.h"
#include "grpc/grpc.h"
#include "pluginregistration.pb-c.h"

struct dra_registrar {
    struct loop *loop;
    char *path, *driver, *endpoint;
    struct grpc_server *server;
    bool registered;
    bool failure_logged; /* one error line per failed stretch, not one per retry */
    /* Every line NotifyRegistrationStatus makes: a peer flipping it (registered, refused,
     * registered...) would otherwise get one line per call, megabytes a second. */
    struct ratelimit notify_log;
};

/* A NotifyRegistrationStatus line, if the limiter lets it through; its count of lines
 * left out goes into *more ("" when none). */
static bool notify_log_ok(struct dra_registrar *r, char *more, size_t cap)
{
    unsigned left_out = 0;
    if (!ratelimit_below(&r->notify_log, &left_out))
        return false;
    more[0] = '\0';
    if (left_out)
        snprintf(more, cap, " (%u more not logged)", left_out);
    return true;
}

static void on_get_info(void *userdata, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    struct dra_registrar *r = userdata;
    static const char *const versions[] = DRA_SUPPORTED_VERSIONS;
    Pluginregistration__InfoRequest *in = pluginregistration__info_request__unpack(NULL, len, req);
    if (!in) {
        reply->status = GRPC_STATUS_INVALID_ARGUMENT;
        reply->message = xstrdup("cannot decode InfoRequest");
        return;
    }
    pluginregistration__info_request__free_unpacked(in, NULL);

    Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    info.type = (char *)"DRAPlugin";
    info.name = r->driver;
    info.endpoint = r->endpoint;
    info.n_supported_versions = ELEMENTSOF(versions);
    info.supported_versions = (char **)versions;
    reply->len = pluginregistration__plugin_info__get_packed_size(&info);
    reply->data = xmalloc(reply->len + 1);
    pluginregistration__plugin_info__pack(&info, reply->data);
    log_debug("DRA: GetInfo from the kubelet on %s", r->path);
}

static void on_notify(void *userdata, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    struct dra_registrar *r = userdata;
    Pluginregistration__RegistrationStatus *st =
        pluginregistration__registration_status__unpack(NULL, len, req);
    if (!st) {
        reply->status = GRPC_STATUS_INVALID_ARGUMENT;
        reply->message = xstrdup("cannot decode RegistrationStatus");
        return;
    }
    char more[48];
    if (st->plugin_registered) {
        if (!r->registered && notify_log_ok(r, more, sizeof(more)))
            log_info("DRA: driver %s registered with the kubelet (endpoint %s)%s", r->driver,
                     r->endpoint, more);
        r->registered = true;
        r->failure_logged = false;
    } else {
        r->registered = false;
        /* The kubelet keeps retrying GetInfo on its own; the error says what to fix. */
        if (!r->failure_logged && notify_log_ok(r, more, sizeof(more)))
            log_error("DRA: the kubelet refused driver %s: %s%s", r->driver,
                      st->error && *st->error ? st->error : "(no reason given)", more);
        else if (r->failure_logged)
            log_debug("DRA: the kubelet refused driver %s again: %s", r->driver,
                      st->error ? st->error : "");
        r->failure_logged = true;
    }
    pluginregistration__registration_status__free_unpacked(st, NULL);
    /* RegistrationStatusResponse has no fields: 0 bytes. */
    reply->data = xmalloc(1);
    reply->len = 0;
}

static const struct grpc_method registrar_methods[] = {
    { .path = "/pluginregistration.Registration/GetInfo", .unary = on_get_info },
    { .path = "/pluginregistration.Registration/NotifyRegistrationStatus", .unary = on_notify },
};

static int serve(struct dra_registrar *r, struct error *err)
{
    _cleanup_free_ char *dir = xstrdup(r->path);
    int e = mkdir_p(dirname(dir), 0755);
    if (e < 0)
        return error_set(err, e, "creating the directory of %s: %s", r->path, strerror(-e));
    e = grpc_server_new(r->loop, r->path, registrar_methods, ELEMENTSOF(registrar_methods), r,
                        NULL, &r->server);
    if (e < 0)
        return error_set(err, e, "serving DRA registration on %s: %s", r->path, strerror(-e));
    return 0;
}

int dra_registrar_start(struct loop *l, const char *path, const char *driver, const char *endpoint,
                        struct dra_registrar **out, struct error *err)
{
    struct dra_registrar *r = xcalloc(1, sizeof(*r));
    r->loop = l;
    r->path = xstrdup(path);
    r->driver = xstrdup(driver);
    r->endpoint = xstrdup(endpoint);
    r->notify_log = RATELIMIT_INIT(DRA_REGISTRAR_LOG_INTERVAL_MS, DRA_REGISTRAR_LOG_BURST);
    int e = serve(r, err);
    if (e < 0) {
        dra_registrar_free(r);
        return e;
    }
    *out = r;
    return 0;
}

int dra_registrar_rebind(struct dra_registrar *r, struct error *err)
{
    grpc_server_free(r->server);
    r->server = NULL;
    r->registered = false;
    return serve(r, err);
}

bool dra_registrar_registered(const struct dra_registrar *r) { return r->registered; }
const char *dra_registrar_path(const struct dra_registrar *r) { return r->path; }

void dra_registrar_free(struct dra_registrar *r)
{
    if (!r)
        return;
    grpc_server_free(r->server);
    free(r->path);
    free(r->driver);
    free(r->endpoint);
    free(r);
}
