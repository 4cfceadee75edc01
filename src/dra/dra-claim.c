/* Reading a ResourceClaim's allocation for this node (see dra-claim.h). */
#include <errno.h>
#include <stdio.h>

#include "core/dns-name.h"
#include "core/quantity.h"
#include "dra/dra-claim.h"

bool dra_claim_uid_valid(const char *uid)
{
    size_t n = 0;
    for (const char *p = uid; *p; p++, n++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-'))
            return false;
    return n > 0 && n <= DRA_CLAIM_UID_MAX;
}

_Static_assert(DRA_DEVICE_NAME_MAX == DNS_LABEL_MAX + 1 && DRA_CLAIM_NAME_MAX == DNS_SUBDOMAIN_MAX,
               "a device name is a DNS label, a claim's name a DNS subdomain");

bool dra_claim_dns_label(const char *s)
{
    return dns_label_valid(s);
}

/* Labels joined by single dots: ".", "..", "a..b", ".a" and "a." are none. */
bool dra_claim_object_name_valid(const char *s)
{
    return dns_subdomain_valid(s);
}

/* A string member of at most max bytes, or NULL (err set). */
static const char *get_str(json_t *obj, const char *key, const char *what, size_t max,
                           struct error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || !*json_string_value(v)) {
        error_set(err, -EINVAL, "%s: missing string '%s'", what, key);
        return NULL;
    }
    if (json_string_length(v) > max) {
        error_set(err, -E2BIG, "%s: '%s' longer than %zu bytes", what, key, max);
        return NULL;
    }
    return json_string_value(v);
}

void dra_claim_clear(struct dra_claim *c)
{
    for (size_t i = 0; i < c->n_allocs; i++) {
        free(c->allocs[i].request);
        free(c->allocs[i].base_request);
        free(c->allocs[i].device);
        free(c->allocs[i].share_id);
    }
    free(c->allocs);
    free(c->uid);
    free(c->namespace_);
    free(c->name);
    *c = (struct dra_claim){ 0 };
}

/* One decoded config of our driver, with the requests it names (borrowed from the claim). */
struct parsed_config {
    json_t *requests;   /* array of strings, possibly empty */
    struct dra_config config;
};

static bool names_request(json_t *requests, const struct dra_alloc *a)
{
    size_t i;
    json_t *v;
    /* A config may name the request, or the one subrequest that was allocated. */
    json_array_foreach(requests, i, v)
        if (streq(json_string_value(v), a->request) || streq(json_string_value(v), a->base_request))
            return true;
    return false;
}

static int decode_configs(json_t *configs, const char *driver, const char *source,
                          struct parsed_config *out, size_t *n_out, struct error *err)
{
    size_t i;
    json_t *c;
    json_array_foreach(configs, i, c) {
        json_t *src = json_object_get(c, "source");
        if (!json_is_string(src) || !streq(json_string_value(src), source))
            continue;
        json_t *opaque = json_object_get(c, "opaque");
        if (!json_is_object(opaque))
            continue; /* not an opaque config: nothing for a driver */
        json_t *drv = json_object_get(opaque, "driver");
        if (!json_is_string(drv) || !streq(json_string_value(drv), driver))
            continue;
        json_t *requests = json_object_get(c, "requests");
        if (requests && !json_is_array(requests))
            return error_set(err, -EINVAL, "config[%zu]: 'requests' is not an array", i);
        size_t j;
        json_t *rq;
        json_array_foreach(requests, j, rq)
            if (!json_is_string(rq))
                return error_set(err, -EINVAL, "config[%zu]: requests[%zu] is not a string", i, j);
        struct parsed_config *p = &out[(*n_out)++];
        p->requests = requests;
        int r = dra_config_decode(json_object_get(opaque, "parameters"), &p->config, err);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Applies the configs to every result: the last one that matches wins. */
static int apply_configs(struct dra_claim *claim, const struct parsed_config *cfgs, size_t n,
                         struct error *err)
{
    for (size_t i = 0; i < claim->n_allocs; i++) {
        struct dra_alloc *a = &claim->allocs[i];
        enum dra_config_kind want = a->type == DRA_DEVICE_MIG ? DRA_CONFIG_MIG : DRA_CONFIG_GPU;
        a->config = dra_config_default(want);
        for (size_t k = 0; k < n; k++) {
            const struct parsed_config *p = &cfgs[k];
            if (json_array_size(p->requests) == 0) {
                if (p->config.kind == want)
                    a->config = p->config;
                continue;
            }
            if (!names_request(p->requests, a))
                continue;
            if (p->config.kind != want)
                return error_set(err, -EINVAL, "cannot apply %s to %s device %s (request %s)",
                                 dra_config_kind_name(p->config.kind),
                                 want == DRA_CONFIG_MIG ? "MIG" : "GPU", a->device, a->request);
            a->config = p->config;
        }
    }
    return 0;
}

bool dra_claim_share_id_valid(const char *s)
{
    return s && *s && strlen(s) <= DRA_SHARE_ID_MAX &&
           strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(s);
}

static int parse_result(json_t *res, size_t i, struct dra_alloc *a, struct error *err)
{
    char what[48];
    snprintf(what, sizeof(what), "allocation result %zu", i);
    const char *request = get_str(res, "request", what, DRA_CLAIM_REQUEST_MAX, err);
    const char *device = request ? get_str(res, "device", what, DRA_DEVICE_NAME_MAX - 1, err) : NULL;
    if (!device)
        return err->code;
    if (!dra_claim_dns_label(device))
        return error_set(err, -EINVAL, "%s: device name \"%s\" is not a DNS label", what, device);
    /* a share: its ID names a CDI device (so [a-z0-9-] only) and what was accounted for it */
    json_t *sid = json_object_get(res, "shareID"), *cc = json_object_get(res, "consumedCapacity");
    const char *share = json_is_string(sid) ? json_string_value(sid) : NULL;
    if ((sid && !share) || (share && !dra_claim_share_id_valid(share)))
        return error_set(err, -EINVAL, "%s: shareID is not a UID", what);
    if (cc && !json_is_object(cc))
        return error_set(err, -EINVAL, "%s: consumedCapacity is not an object", what);
    int64_t amount[2] = { -1, -1 };
    static const char *const names[2] = { "memory", DRA_SHARE_COMPUTE };
    for (int k = 0; k < 2; k++) {
        json_t *q = json_object_get(cc, names[k]);
        if (q && (!json_is_string(q) || quantity_parse(json_string_value(q), &amount[k]) < 0 ||
                  amount[k] < 0))
            return error_set(err, -EINVAL, "%s: consumedCapacity.%s is not a quantity", what, names[k]);
    }
    const char *slash = strchr(request, '/');
    *a = (struct dra_alloc){
        .request = xstrdup(request),
        .base_request = slash ? xstrndup(request, (size_t)(slash - request)) : xstrdup(request),
        .device = xstrdup(device),
        .type = strstr(device, "-mig-") ? DRA_DEVICE_MIG : DRA_DEVICE_GPU,
        .admin_access = json_is_true(json_object_get(res, "adminAccess")),
        .share_id = share ? xstrdup(share) : NULL,
        .memory = amount[0],
        .compute = amount[1],
    };
    return 0;
}

int dra_claim_parse(json_t *claim, const char *driver, const char *pool, struct dra_claim *out,
                    struct error *err)
{
    struct dra_claim c = { 0 };
    struct parsed_config *cfgs = NULL;
    int r;

    *out = (struct dra_claim){ 0 };
    json_t *meta = json_object_get(claim, "metadata");
    const char *ns = get_str(meta, "namespace", "claim metadata", DRA_CLAIM_NAME_MAX, err);
    const char *name = ns ? get_str(meta, "name", "claim metadata", DRA_CLAIM_NAME_MAX, err) : NULL;
    const char *uid = name ? get_str(meta, "uid", "claim metadata", DRA_CLAIM_UID_MAX, err) : NULL;
    if (!uid)
        return err->code;
    c.namespace_ = xstrdup(ns);
    c.name = xstrdup(name);
    c.uid = xstrdup(uid);

    json_t *devices = json_object_get(json_object_get(json_object_get(claim, "status"), "allocation"),
                                      "devices");
    if (!json_is_object(devices)) {
        r = error_set(err, -ENOENT, "claim %s/%s is not allocated", ns, name);
        goto fail;
    }
    json_t *results = json_object_get(devices, "results");
    json_t *configs = json_object_get(devices, "config");
    if ((results && !json_is_array(results)) || (configs && !json_is_array(configs))) {
        r = error_set(err, -EINVAL, "claim %s/%s: malformed status.allocation.devices", ns, name);
        goto fail;
    }
    if (json_array_size(results) > DRA_CLAIM_MAX_RESULTS ||
        json_array_size(configs) > DRA_CLAIM_MAX_CONFIGS) {
        r = error_set(err, -E2BIG, "claim %s/%s: more than %d allocation results or configs", ns,
                      name, DRA_CLAIM_MAX_RESULTS);
        goto fail;
    }

    c.allocs = xcalloc(json_array_size(results) + 1, sizeof(*c.allocs));
    size_t i;
    json_t *res;
    json_array_foreach(results, i, res) {
        json_t *drv = json_object_get(res, "driver"), *pl = json_object_get(res, "pool");
        if (!json_is_string(drv) || !streq(json_string_value(drv), driver) || !json_is_string(pl) ||
            !streq(json_string_value(pl), pool))
            continue; /* another driver's or another node's device */
        if ((r = parse_result(res, i, &c.allocs[c.n_allocs], err)) < 0)
            goto fail_named;
        c.n_allocs++;
    }

    /* Class configs before claim configs, each in order (NVIDIA's precedence). */
    size_t n_cfgs = 0;
    cfgs = xcalloc(json_array_size(configs) + 1, sizeof(*cfgs));
    if ((r = decode_configs(configs, driver, "FromClass", cfgs, &n_cfgs, err)) < 0 ||
        (r = decode_configs(configs, driver, "FromClaim", cfgs, &n_cfgs, err)) < 0 ||
        (r = apply_configs(&c, cfgs, n_cfgs, err)) < 0)
        goto fail_named;
    free(cfgs);
    *out = c;
    return 0;

fail_named:
    error_prefix(err, "claim %s/%s", ns, name);
fail:
    free(cfgs);
    dra_claim_clear(&c);
    return r;
}
