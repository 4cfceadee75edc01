/* The prepared-claims checkpoint (see dra-checkpoint.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/log.h"
#include "dra/dra-cdi.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-mps.h"
#include "dra/dra-shares.h"
#include "dra/dra-claim.h"

#define CKPT_VERSION 1

static const char *const state_names[] = { [DRA_CKPT_PREPARE_STARTED] = "PrepareStarted",
                                           [DRA_CKPT_PREPARE_COMPLETED] = "PrepareCompleted" };

int dra_checkpoint_boot_id(const char *path, char out[DRA_CKPT_BOOT_ID_MAX], struct error *err)
{
    if (!path)
        path = "/proc/sys/kernel/random/boot_id";
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set(err, -errno, "reading the boot id %s: %s", path, strerror(errno));
    ssize_t n = RETRY_EINTR(read(fd, out, DRA_CKPT_BOOT_ID_MAX - 1));
    if (n < 0)
        return error_set(err, -errno, "reading the boot id %s: %s", path, strerror(errno));
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        n--;
    out[n] = 0;
    if (n == 0)
        return error_set(err, -EINVAL, "reading the boot id %s: empty", path);
    return 0;
}

void dra_ckpt_claim_clear(struct dra_ckpt_claim *claim)
{
    for (size_t i = 0; i < claim->n_devices; i++) {
        struct dra_ckpt_device *d = &claim->devices[i];
        free(d->device);
        free(d->pool);
        free(d->request);
        free(d->cdi_id);
        free(d->mig.parent_uuid);
        free(d->mig.uuid);
        free(d->share_id);
    }
    free(claim->devices);
    free(claim->uid);
    free(claim->namespace_);
    free(claim->name);
    *claim = (struct dra_ckpt_claim){ 0 };
}

void dra_checkpoint_clear(struct dra_checkpoint *c)
{
    for (size_t i = 0; i < c->n_claims; i++)
        dra_ckpt_claim_clear(&c->claims[i]);
    free(c->claims);
    free(c->dir);
    free(c->path);
    free(c->spare_path);
    *c = (struct dra_checkpoint){ 0 };
}

/* ---- to and from JSON ---------------------------------------------------------------- */

static json_t *claim_to_json(const struct dra_ckpt_claim *cl)
{
    json_t *devs = json_array();
    for (size_t i = 0; i < cl->n_devices; i++) {
        const struct dra_ckpt_device *d = &cl->devices[i];
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:b, s:s}", "device", d->device, "pool",
                              d->pool, "request", d->request, "cdiDeviceID", d->cdi_id,
                              "adminAccess", d->admin_access, "configKind",
                              dra_config_kind_name(d->config.kind));
        if (d->config.sharing != DRA_SHARING_NONE)
            json_object_set_new(o, "sharing", json_string(dra_sharing_name(d->config.sharing)));
        if (d->config.sharing == DRA_SHARING_TIME_SLICING)
            json_object_set_new(o, "interval",
                                json_string(dra_ts_interval_name(d->config.interval)));
        if (d->config.sharing == DRA_SHARING_MPS && d->config.mps.id[0])
            json_object_set_new(o, "mpsId", json_string(d->config.mps.id));
        if (d->config.sharing == DRA_SHARING_MPS && d->config.mps.ns[0])
            json_object_set_new(o, "mpsNamespace", json_string(d->config.mps.ns));
        if (d->share_id)
            json_object_set_new(o, "share", json_pack("{s:s, s:I, s:I}", "id", d->share_id,
                                                      "memory", (json_int_t)d->share_memory,
                                                      "compute", (json_int_t)d->share_compute));
        if (d->mig.uuid)
            json_object_set_new(o, "mig", json_pack("{s:s, s:s, s:I, s:I}", "parentUUID",
                                                    d->mig.parent_uuid, "migUUID", d->mig.uuid,
                                                    "giId", (json_int_t)d->mig.gi_id, "ciId",
                                                    (json_int_t)d->mig.ci_id));
        json_array_append_new(devs, o);
    }
    return json_pack("{s:s, s:s, s:s, s:o}", "checkpointState", state_names[cl->state], "namespace",
                     cl->namespace_, "name", cl->name, "devices", devs);
}

static const char *str(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A UUID as NVML prints one ("GPU-<hex and dashes>"): what Unprepare hands NVML back. */
static bool uuid_valid(const char *u, const char *prefix)
{
    size_t n = strlen(u), p = strlen(prefix);
    if (n <= p || n > 80 || strncmp(u, prefix, p) != 0)
        return false;
    for (const char *c = u + p; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') || (*c >= 'A' && *c <= 'F') || *c == '-'))
            return false;
    return true;
}

static int device_from_json(json_t *o, struct dra_ckpt_device *d)
{
    const char *dev = str(o, "device"), *pool = str(o, "pool"), *req = str(o, "request"),
               *cdi = str(o, "cdiDeviceID"), *kind = str(o, "configKind"),
               *sharing = str(o, "sharing"), *interval = str(o, "interval"),
               *mps_id = str(o, "mpsId"), *mps_ns = str(o, "mpsNamespace");
    if (!dev || !pool || !req || !cdi || !kind)
        return -EINVAL;
    struct dra_config cfg = dra_config_default(streq(kind, "MigDeviceConfig") ? DRA_CONFIG_MIG
                                                                               : DRA_CONFIG_GPU);
    if (sharing && dra_sharing_from_name(sharing, &cfg.sharing) < 0)
        return -EINVAL;
    if (interval && dra_ts_interval_from_name(interval, &cfg.interval) < 0)
        return -EINVAL;
    /* its form (the claim's UID, '-', 5 hex) is checked with the record (record_fails) */
    if (mps_id && (cfg.sharing != DRA_SHARING_MPS || strlen(mps_id) >= sizeof(cfg.mps.id)))
        return -EINVAL;
    if (mps_id)
        snprintf(cfg.mps.id, sizeof(cfg.mps.id), "%s", mps_id);
    /* its name (the share's) is checked with the record too */
    if (mps_ns && (!mps_id || strlen(mps_ns) >= sizeof(cfg.mps.ns)))
        return -EINVAL;
    if (mps_ns)
        snprintf(cfg.mps.ns, sizeof(cfg.mps.ns), "%s", mps_ns);
    json_t *mig = json_object_get(o, "mig");
    const char *parent = str(mig, "parentUUID"), *mig_uuid = str(mig, "migUUID");
    json_t *gi = json_object_get(mig, "giId"), *ci = json_object_get(mig, "ciId");
    if (mig && (!parent || !mig_uuid || !json_is_integer(gi) || !json_is_integer(ci) ||
                json_integer_value(gi) < 0 || json_integer_value(gi) > 0xffff ||
                json_integer_value(ci) < 0 || json_integer_value(ci) > 0xffff ||
                !uuid_valid(parent, "GPU-") || !uuid_valid(mig_uuid, "MIG-")))
        return -EINVAL;
    json_t *share = json_object_get(o, "share");
    const char *share_id = str(share, "id");
    json_t *mem = json_object_get(share, "memory"), *comp = json_object_get(share, "compute");
    if (share && (!dra_claim_share_id_valid(share_id) || !json_is_integer(mem) ||
                  !json_is_integer(comp) || json_integer_value(mem) < 0 ||
                  json_integer_value(comp) < 0 || json_integer_value(comp) > 100))
        return -EINVAL;
    *d = (struct dra_ckpt_device){
        .device = xstrdup(dev),
        .pool = xstrdup(pool),
        .request = xstrdup(req),
        .cdi_id = xstrdup(cdi),
        .admin_access = json_is_true(json_object_get(o, "adminAccess")),
        .config = cfg,
    };
    if (share) {
        d->share_id = xstrdup(share_id);
        d->share_memory = (uint64_t)json_integer_value(mem);
        d->share_compute = (unsigned)json_integer_value(comp);
    }
    if (mig)
        d->mig = (struct dra_ckpt_mig){ .parent_uuid = xstrdup(parent), .uuid = xstrdup(mig_uuid),
                                        .gi_id = (unsigned)json_integer_value(gi),
                                        .ci_id = (unsigned)json_integer_value(ci) };
    return 0;
}

/* What a record says is answered to the kubelet as it is (a repeated Prepare) and names
 * files and devices on unprepare: it is checked as a claim from the API server and the
 * kubelet is, and as what a prepare of this node records (dra-claims.c, plan()). The
 * reason it fails (no bytes of the file in it: they could be anything), or NULL. */
static const char *record_fails(const struct dra_ckpt_claim *cl, const char *pool)
{
    if (!dra_claim_dns_label(cl->namespace_) || !dra_claim_object_name_valid(cl->name))
        return "a namespace or name that is not a Kubernetes name";
    for (size_t i = 0; i < cl->n_devices; i++) {
        const struct dra_ckpt_device *d = &cl->devices[i];
        if (!dra_claim_dns_label(d->device))
            return "a device name that is not a DNS label";
        if (!dra_claim_dns_label(d->request))
            return "a request name that is not a DNS label";
        if (!streq(d->pool, pool))
            return "a device of another node's pool";
        _cleanup_free_ char *id = dra_cdi_share_device_id(cl->uid, d->device, d->share_id);
        if (!streq(d->cdi_id, id))
            return "a CDI device ID not its own";
        /* it names a directory an unprepare removes: only what a prepare could make */
        if (d->config.mps.id[0] && !(d->share_id ? dra_shares_mps_id_valid(d->config.mps.id)
                                                  : dra_mps_id_of(d->config.mps.id, cl->uid)))
            return "an MPS control daemon id not its own";
        if (d->config.mps.ns[0]) {
            char ns[DRA_MPS_NS_MAX];
            if (d->share_id)
                dra_shares_mps_ns(cl->uid, d->share_id, ns);
            if (!d->share_id || !streq(ns, d->config.mps.ns))
                return "an MPS namespace not its share's";
        }
    }
    return NULL;
}

/* 0, or -EINVAL with *why: NULL for a record that is not ours at all, else what is wrong
 * with claim uid's. */
static int claim_from_json(const char *uid, json_t *o, const char *pool, struct dra_ckpt_claim *cl,
                           const char **why)
{
    const char *state = str(o, "checkpointState"), *ns = str(o, "namespace"), *name = str(o, "name");
    json_t *devs = json_object_get(o, "devices");
    *why = NULL;
    /* The UID names a CDI file on unprepare: only what a prepare could have recorded. */
    if (!state || !ns || !name || !json_is_array(devs) || !dra_claim_uid_valid(uid) ||
        json_array_size(devs) > DRA_CLAIM_MAX_RESULTS)
        return -EINVAL;
    *cl = (struct dra_ckpt_claim){ .uid = xstrdup(uid), .namespace_ = xstrdup(ns),
                                   .name = xstrdup(name) };
    if (streq(state, state_names[DRA_CKPT_PREPARE_COMPLETED]))
        cl->state = DRA_CKPT_PREPARE_COMPLETED;
    else if (!streq(state, state_names[DRA_CKPT_PREPARE_STARTED]))
        return -EINVAL;
    cl->devices = xcalloc(json_array_size(devs) + 1, sizeof(*cl->devices));
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d) {
        if (device_from_json(d, &cl->devices[i]) < 0)
            return -EINVAL;
        cl->n_devices++;
    }
    *why = record_fails(cl, pool);
    return *why ? -EINVAL : 0;
}

/* What the file says, or -EINVAL with what (what is wrong: "is not JSON") for anything not
 * ours or not of this node's pool. */
static int parse(struct dra_checkpoint *c, const char *text, size_t len, const char *pool,
                 char *what, size_t what_size)
{
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, 0, &jerr);
    int r = -EINVAL;
    snprintf(what, what_size, "is not JSON");
    if (!doc)
        return r;
    json_t *claims = json_object_get(doc, "preparedClaims");
    snprintf(what, what_size, "is not a version 1 checkpoint");
    if (!json_is_integer(json_object_get(doc, "version")) ||
        json_integer_value(json_object_get(doc, "version")) != CKPT_VERSION ||
        !str(doc, "nodeBootID") || !json_is_object(claims))
        goto out;
    snprintf(what, what_size, "has more than %d claims", DRA_CKPT_MAX_CLAIMS);
    if (json_object_size(claims) > DRA_CKPT_MAX_CLAIMS)
        goto out;
    c->claims = xcalloc(json_object_size(claims) + 1, sizeof(*c->claims));
    c->alloc = json_object_size(claims) + 1;
    const char *uid, *why;
    json_t *o;
    json_object_foreach(claims, uid, o) {
        struct dra_ckpt_claim *cl = &c->claims[c->n_claims];
        if (claim_from_json(uid, o, pool, cl, &why) < 0) {
            if (why) /* the UID is one, checked first */
                snprintf(what, what_size, "has claim %s with %s", uid, why);
            else
                snprintf(what, what_size, "has a malformed claim");
            dra_ckpt_claim_clear(cl);
            goto out;
        }
        c->n_claims++;
    }
    snprintf(c->boot_id, sizeof(c->boot_id), "%s", str(doc, "nodeBootID"));
    r = 0;
out:
    json_decref(doc);
    return r;
}

/* What is not a regular file at path, moved aside at open (core/fs.h, fs_aside_irregular).
 * 1 when moved, 0 when path is a regular file or missing, -errno (err). */
static int set_aside(const char *path, const char **what, char **aside, struct error *err)
{
    int r = fs_aside_irregular(path, ".not-regular", what, aside);
    if (r < 0)
        return error_set(err, r, "checkpoint %s is %s, not a regular file, and moving it aside "
                                 "failed: %s", path, *what, strerror(-r));
    return r;
}

/* Set aside during a save: said here, the save goes on (the caller hears of it no more). */
static void aside_warn(const char *path, const char *what, const char *aside, void *userdata)
{
    log_warning("checkpoint %s is %s, not a regular file: moved to %s", path, what, aside);
}

/* Saved through core/fs.h's exchange writer: written into the spare,
 * checkpoint.json.old, which trades names with checkpoint.json. Not a new temporary file
 * renamed over it (~0.9 ms of ext4's work inside every Prepare's rename), and no fsync:
 * a killed plugin leaves the page cache to the next one; an OS crash means a reboot, whose
 * new boot id discards the checkpoint anyway (and a file torn by it is moved aside as
 * corrupt); two fsyncs per write cost about 8 ms of every Prepare on an ordinary disk.
 * 0 or -errno (err). */
static int replace(const struct dra_checkpoint *c, const char *text, size_t len, struct error *err)
{
    const struct fs_exchange x = { .path = c->path, .spare = c->spare_path, .noun = "checkpoint",
                                   .aside_suffix = ".not-regular", .mode = 0600,
                                   .on_aside = aside_warn };
    return fs_write_exchange(&x, text, len, err);
}

static int save(struct dra_checkpoint *c, struct error *err)
{
    if (c->n_claims > DRA_CKPT_MAX_CLAIMS)
        return error_set(err, -ENOSPC, "checkpoint %s: more than %d prepared claims", c->path,
                         DRA_CKPT_MAX_CLAIMS);
    json_t *claims = json_object();
    for (size_t i = 0; i < c->n_claims; i++)
        json_object_set_new(claims, c->claims[i].uid, claim_to_json(&c->claims[i]));
    json_t *doc = json_pack("{s:i, s:s, s:o}", "version", CKPT_VERSION, "nodeBootID", c->boot_id,
                            "preparedClaims", claims);
    _cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (!text)
        oom();
    size_t len = strlen(text);
    if (len > DRA_CKPT_MAX_BYTES)
        return error_set(err, -EFBIG, "checkpoint %s: would grow to %zu bytes, past its bound of %u",
                         c->path, len, DRA_CKPT_MAX_BYTES);
    return replace(c, text, len, err);
}

/* Forgets what parse() may have loaded and starts this boot's checkpoint empty. */
static void forget(struct dra_checkpoint *c, const char *boot_id)
{
    for (size_t i = 0; i < c->n_claims; i++)
        dra_ckpt_claim_clear(&c->claims[i]);
    c->n_claims = 0;
    snprintf(c->boot_id, sizeof(c->boot_id), "%s", boot_id);
}

int dra_checkpoint_open(struct dra_checkpoint *c, const char *dir, const char *boot_id,
                        const char *pool, struct error *discarded, struct error *err)
{
    *c = (struct dra_checkpoint){ 0 };
    int r = mkdir_p(dir, 0750);
    if (r < 0)
        return error_set(err, r, "creating %s: %s", dir, strerror(-r));
    c->dir = xstrdup(dir);
    c->path = xasprintf("%s/" DRA_CKPT_FILE, dir);
    c->spare_path = xasprintf("%s/" DRA_CKPT_FILE DRA_CKPT_SPARE_SUFFIX, dir);
    snprintf(c->boot_id, sizeof(c->boot_id), "%s", boot_id);

    /* Not through a symlink (O_NOFOLLOW); a FIFO or a directory fails the type check
     * after a non-blocking open. Either is set aside, and the start goes on. */
    _cleanup_free_ char *text = NULL, *aside = NULL;
    size_t len;
    r = read_file_bounded_flags(c->path, O_NOFOLLOW, DRA_CKPT_MAX_BYTES, &text, &len, NULL);
    if (r == -ENOENT)
        return 0;
    char what[DRA_CLAIM_UID_MAX + 96];
    if (r < 0 && r != -EFBIG) {
        const char *type;
        int moved = set_aside(c->path, &type, &aside, err);
        if (moved <= 0) {
            if (moved == 0) /* a regular file that cannot be read */
                moved = error_set(err, r, "reading checkpoint %s: %s", c->path, strerror(-r));
            dra_checkpoint_clear(c);
            return moved;
        }
        error_set(discarded, -EINVAL, "checkpoint %s is %s, not a regular file: moved to %s, "
                  "starting with no prepared claims", c->path, type, aside);
        return 1;
    }
    if (r == -EFBIG)
        snprintf(what, sizeof(what), "is larger than its bound");
    else if (parse(c, text, len, pool, what, sizeof(what)) == 0) {
        if (streq(c->boot_id, boot_id))
            return 0;
        error_set(discarded, -ESTALE,
                  "checkpoint %s is of another boot (%s, now %s): its %zu claims are forgotten",
                  c->path, c->boot_id, boot_id, c->n_claims);
        forget(c, boot_id);
        return 1;
    }
    forget(c, boot_id);
    /* Kept for a person to look at; the previous one of that name is replaced. */
    if ((r = fs_move_aside(c->path, ".corrupt", &aside)) < 0) {
        r = error_set(err, r, "checkpoint %s %s, and moving it aside failed: %s", c->path, what,
                      strerror(-r));
        dra_checkpoint_clear(c);
        return r;
    }
    error_set(discarded, -EINVAL, "checkpoint %s %s: moved to %s, starting with no prepared claims",
              c->path, what, aside);
    return 1;
}

static size_t find_index(const struct dra_checkpoint *c, const char *uid)
{
    for (size_t i = 0; i < c->n_claims; i++)
        if (streq(c->claims[i].uid, uid))
            return i;
    return SIZE_MAX;
}

const struct dra_ckpt_claim *dra_checkpoint_find(const struct dra_checkpoint *c, const char *uid)
{
    size_t i = find_index(c, uid);
    return i == SIZE_MAX ? NULL : &c->claims[i];
}

int dra_checkpoint_put(struct dra_checkpoint *c, struct dra_ckpt_claim *claim, struct error *err)
{
    size_t i = find_index(c, claim->uid);
    struct dra_ckpt_claim old = { 0 };
    if (i == SIZE_MAX) {
        c->claims = grow_array(c->claims, &c->alloc, c->n_claims + 1, sizeof(*c->claims));
        i = c->n_claims++;
    } else {
        old = c->claims[i];
    }
    c->claims[i] = *claim;
    int r = save(c, err);
    if (r < 0) {
        if (old.uid)
            c->claims[i] = old;
        else
            c->n_claims--;
        return r;
    }
    dra_ckpt_claim_clear(&old);
    *claim = (struct dra_ckpt_claim){ 0 };
    return 0;
}

int dra_checkpoint_complete(struct dra_checkpoint *c, const char *uid, struct error *err)
{
    size_t i = find_index(c, uid);
    if (i == SIZE_MAX)
        return error_set(err, -ENOENT, "claim %s has no record in checkpoint %s", uid, c->path);
    enum dra_ckpt_state was = c->claims[i].state;
    c->claims[i].state = DRA_CKPT_PREPARE_COMPLETED;
    int r = save(c, err);
    if (r < 0)
        c->claims[i].state = was;
    return r;
}

int dra_checkpoint_set_mig(struct dra_checkpoint *c, const char *uid, const char *device,
                           const struct dra_ckpt_mig *mig, struct error *err)
{
    size_t i = find_index(c, uid);
    bool found = false;
    for (size_t j = 0; i != SIZE_MAX && j < c->claims[i].n_devices; j++) {
        struct dra_ckpt_device *d = &c->claims[i].devices[j];
        if (!streq(d->device, device))
            continue;
        free(d->mig.parent_uuid);
        free(d->mig.uuid);
        d->mig = mig ? (struct dra_ckpt_mig){ .parent_uuid = xstrdup(mig->parent_uuid),
                                              .uuid = xstrdup(mig->uuid), .gi_id = mig->gi_id,
                                              .ci_id = mig->ci_id }
                     : (struct dra_ckpt_mig){ 0 };
        found = true;
    }
    return found ? 0 : error_set(err, -ENOENT, "claim %s has no device %s in checkpoint %s", uid,
                                 device, c->path);
}

int dra_checkpoint_set_config(struct dra_checkpoint *c, const char *uid, size_t k,
                              const struct dra_config *cfg, struct error *err)
{
    size_t i = find_index(c, uid);
    if (i == SIZE_MAX || k >= c->claims[i].n_devices)
        return error_set(err, -ENOENT, "claim %s has no device %zu in checkpoint %s", uid, k, c->path);
    c->claims[i].devices[k].config = *cfg;
    return 0;
}

int dra_checkpoint_remove(struct dra_checkpoint *c, const char *uid, struct error *err)
{
    size_t i = find_index(c, uid);
    if (i == SIZE_MAX)
        return 0;
    struct dra_ckpt_claim old = c->claims[i];
    memmove(&c->claims[i], &c->claims[i + 1], (c->n_claims - i - 1) * sizeof(*c->claims));
    c->n_claims--;
    int r = save(c, err);
    if (r < 0) {
        memmove(&c->claims[i + 1], &c->claims[i], (c->n_claims - i) * sizeof(*c->claims));
        c->claims[i] = old;
        c->n_claims++;
        return r;
    }
    dra_ckpt_claim_clear(&old);
    return 0;
}

static char **strv1(const char *s)
{
    char **v = xcalloc(2, sizeof(char *));
    v[0] = xstrdup(s);
    return v;
}

void dra_ckpt_claim_result(const struct dra_ckpt_claim *rec, struct dra_claim_result *res)
{
    res->devices = xcalloc(rec->n_devices + 1, sizeof(*res->devices));
    res->n_devices = rec->n_devices;
    for (size_t i = 0; i < rec->n_devices; i++)
        res->devices[i] = (struct dra_prepared_device){
            .request_names = strv1(rec->devices[i].request),
            .n_request_names = 1,
            .pool_name = xstrdup(rec->devices[i].pool),
            .device_name = xstrdup(rec->devices[i].device),
            .cdi_device_ids = strv1(rec->devices[i].cdi_id),
            .n_cdi_device_ids = 1,
            .share_id = rec->devices[i].share_id ? xstrdup(rec->devices[i].share_id) : NULL,
        };
}
