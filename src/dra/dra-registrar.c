/* The DRA driver's registration socket (dra-registrar.h). Both methods are answered at
 * once: GetInfo from the strings given at start, NotifyRegistrationStatus by recording
 * and logging the outcome. */
#include <errno.h>
#include <libgen.h>
#include <string.h>

#include "core/fs.h"
#include "core/log.h"
#include "core/macro.h"
#include "dra/dra-registrar.h"
#include "grpc/grpc.h"
#include "pluginregistration.pb-c.h"

struct dra_registrar {
    struct loop *loop;
    char *path, *driver, *endpoint;
    struct grpc_server *server;
    bool registered;
    bool failure_logged; /* one error line per failed stretch, not one per retry */
};

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
    if (st->plugin_registered) {
        if (!r->registered)
            log_info("DRA: driver %s registered with the kubelet (endpoint %s)", r->driver,
                     r->endpoint);
        r->registered = true;
        r->failure_logged = false;
    } else {
        r->registered = false;
        /* The kubelet keeps retrying GetInfo on its own; the error says what to fix. */
        if (!r->failure_logged)
            log_error("DRA: the kubelet refused driver %s: %s", r->driver,
                      st->error && *st->error ? st->error : "(no reason given)");
        else
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
