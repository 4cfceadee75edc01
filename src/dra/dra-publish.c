/* The ResourceSlice publisher (see dra-publish.h), in the house pattern of
 * cluster/cluster-publish.c: a round's writes together, a watch instead of polling, and
 * core/heal.h's pacing: capped backoff with jitter for failures (logged once per new
 * reason), a token bucket for restores and their lines rate-limited. */
#include <stdio.h>
#include <string.h>

#include "core/digest.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/mem.h"
#include "dra/dra-publish-internal.h"
#include "dra/dra-slice.h"
#include "kube/kube.h"

static void recheck(struct dra_publish *p, bool api_back);

/* ---- requests ---- */

static void on_retry(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct dra_publish *p = userdata;
    p->retry = NULL;
    dra_publish_converge(p);
}

static bool busy(const struct dra_publish *p)
{
    return p->req || p->n_writes;
}

static struct dra_write *write_find(const struct dra_publish *p, const char *name)
{
    for (size_t i = 0; i < p->n_writes; i++)
        if (p->writes[i]->name && streq(p->writes[i]->name, name))
            return p->writes[i];
    return NULL;
}

bool dra_publish_in_flight(const struct dra_publish *p, const char *name)
{
    return write_find(p, name) != NULL;
}

/* The write's answer came (or it never went): out of the set, freed. */
static void write_done(struct dra_write *w)
{
    struct dra_publish *p = w->p;
    for (size_t i = 0; i < p->n_writes; i++)
        if (p->writes[i] == w) {
            p->writes[i] = p->writes[--p->n_writes];
            break;
        }
    free(w->name);
    json_decref(w->want);
    free(w);
}

/* A request was answered: the round goes on, through the restore pacing when someone
 * else changed the server meanwhile (a peer deleting the slice right after each of our
 * writes got a write per round trip, unpaced). */
void dra_publish_answered(struct dra_publish *p)
{
    bool owed = p->restore_owed;
    p->restore_owed = false;
    if (owed && !dra_publish_steady(p))
        recheck(p, false);
    else
        dra_publish_converge(p);
}

/* A request failed with `why`: retry the whole convergence with backoff. The delay of
 * the retry (a failed GET of the Node retries that GET instead). */
uint64_t dra_publish_failed(struct dra_publish *p, const char *why)
{
    p->stats.failures++;
    p->round_gen = 0; /* the retry starts from what the server holds then */
    bool is_new;
    uint64_t delay_ms = heal_failed(&p->heal, why, &is_new);
    if (is_new)
        log_warning("Publishing ResourceSlices failed: %s; retrying with backoff (now %llums, at most %us)",
                    why, (unsigned long long)delay_ms, HEAL_RETRY_MAX_MS / 1000u);
    else
        log_debug("Publishing ResourceSlices failed again: %s; retrying in %llums", why,
                  (unsigned long long)delay_ms);
    p->again = false;
    if (!p->retry)
        p->retry = loop_timer_add(p->loop, delay_ms, on_retry, p);
    return delay_ms;
}

void dra_publish_succeeded(struct dra_publish *p)
{
    if (heal_succeeded(&p->heal))
        log_info("Publishing ResourceSlices works again");
}

const char *dra_publish_status_text(int status, json_t *body, char *buf, size_t len)
{
    const char *msg = kube_status_message(body);
    if (status < 0)
        snprintf(buf, len, "%s", strerror(-status));
    else if (msg)
        snprintf(buf, len, "HTTP %d: %s", status, msg);
    else
        snprintf(buf, len, "HTTP %d", status);
    return buf;
}

/* sent: the write whose answer slice is (NULL: none); the record takes its wanted entry's
 * content when the server holds exactly what it sent (dra_publish_record_as). */
static void store_put(struct dra_publish *p, json_t *slice, struct dra_write *sent)
{
    const char *name = dra_publish_name_of(slice);
    if (!name)
        return;
    if (!json_object_get(p->store, name) && json_object_size(p->store) >= MAX_SLICES) {
        if (!p->skipped_logged++)
            log_warning("More than %u ResourceSlices for node %s and driver %s; not keeping "
                        "track of %s and later ones, ignoring", MAX_SLICES, p->node, p->driver, name);
        return;
    }
    json_object_set_new(p->store, name, sent ? dra_publish_record_as(slice, sent->want)
                                             : dra_publish_record(slice));
}

/* The answer to a write that carried taints says whether the API server keeps them. */
static void learn_taints(struct dra_publish *p, json_t *body)
{
    json_t *d;
    size_t i;
    bool kept = false;
    json_array_foreach (json_object_get(json_object_get(body, "spec"), "devices"), i, d)
        kept |= json_array_size(json_object_get(d, "taints")) > 0;
    enum dra_taint_mode mode = kept ? DRA_TAINTS_KEPT : DRA_TAINTS_DROPPED;
    if (mode == p->stats.taints)
        return;
    /* The wanted slices differ only where a tainted device is withdrawn instead: the
     * first answer of a start (not known -> kept) rebuilds nothing. */
    if ((mode == DRA_TAINTS_DROPPED) != (p->stats.taints == DRA_TAINTS_DROPPED) &&
        json_object_size(p->unhealthy))
        p->wanted_changes++;
    p->stats.taints = mode;
    if (kept)
        log_info("The API server keeps device taints (DRADeviceTaints is on): unhealthy "
                 "devices are tainted NoSchedule in the ResourceSlice");
    else
        log_info("The API server drops device taints (DRADeviceTaints is off): unhealthy "
                 "devices are withdrawn from the ResourceSlice until they recover");
}

/* The answer to a write that carried counters says whether the API server keeps them
 * (1.34 drops them unless DRAPartitionableDevices is on; from 1.36 it is on by default). */
static void learn_partitions(struct dra_publish *p, json_t *body)
{
    bool kept = dra_publish_has_counters(body);
    enum dra_partition_mode mode = kept ? DRA_PARTITIONS_KEPT : DRA_PARTITIONS_DROPPED;
    if (mode == p->stats.partitions)
        return;
    /* Only dropped counters change the wanted slices (placements withdrawn): learning
     * that they are kept rebuilds nothing (it cost a second build of 208 devices at
     * every start). */
    if ((mode == DRA_PARTITIONS_DROPPED) != (p->stats.partitions == DRA_PARTITIONS_DROPPED))
        p->wanted_changes++;
    p->stats.partitions = mode;
    if (kept)
        log_info("The API server keeps shared counters (DRAPartitionableDevices is on): MIG "
                 "placements are published for DynamicMIG");
    else
        log_error("The API server drops shared counters (DRAPartitionableDevices is off): "
                  "the MIG placements of DynamicMIG are withdrawn and the GPUs offered whole; "
                  "turn the gate on in the API server and scheduler, then restart the plugin");
}

static void on_written(struct kube *k, int status, json_t *body, void *userdata)
{
    struct dra_write *w = userdata;
    struct dra_publish *p = w->p;
    char buf[512];
    _cleanup_free_ char *name = w->name ? xstrdup(w->name) : NULL;
    bool tainted = w->tainted, counted = w->counters;
    if (status == 200 || status == 201) {
        dra_publish_succeeded(p);
        if (body && streq_ptr(dra_publish_name_of(body), name))
            store_put(p, body, w);
    }
    write_done(w);
    if (status == 200 || status == 201) {
        if (tainted && body)
            learn_taints(p, body);
        if (counted && body && p->stats.partitions != DRA_PARTITIONS_DROPPED)
            learn_partitions(p, body);
    } else if (status == 404) {
        /* an update of a slice deleted meanwhile: create it (a refused write all the same) */
        p->stats.write_failures++;
        if (name)
            json_object_del(p->store, name);
        log_debug("ResourceSlice %s is gone, creating it again", name ? name : "?");
    } else {
        /* 409: someone wrote it (or created it) in between: the watch brings what they
         * wrote, the retry compares with that */
        p->stats.write_failures++;
        dra_publish_failed(p, dra_publish_status_text(status, body, buf, sizeof(buf)));
        return;
    }
    dra_publish_answered(p);
}

static void on_deleted(struct kube *k, int status, json_t *body, void *userdata)
{
    struct dra_write *w = userdata;
    struct dra_publish *p = w->p;
    char buf[512];
    _cleanup_free_ char *name = w->name ? xstrdup(w->name) : NULL;
    write_done(w);
    if (status != 200 && status != 202 && status != 404) {
        p->stats.write_failures++;
        dra_publish_failed(p, dra_publish_status_text(status, body, buf, sizeof(buf)));
        return;
    }
    dra_publish_succeeded(p);
    if (name)
        json_object_del(p->store, name);
    dra_publish_answered(p);
}

static bool any_taint(json_t *slice)
{
    json_t *d;
    size_t i;
    json_array_foreach (json_object_get(json_object_get(slice, "spec"), "devices"), i, d)
        if (json_array_size(json_object_get(d, "taints")))
            return true;
    return false;
}

/* Send one write the plan chose; false when it could not be sent (the failure is
 * retried with backoff) or is not to be sent (our own bug). */
static bool send_write(struct dra_publish *p, enum dra_publish_action act, json_t *slice, char *name,
                       json_t *want)
{
    char *msg = NULL;
    if (slice && dra_slice_validate(slice, name, &msg) < 0) {
        /* our own bug: the API server would refuse it the same way; do not hammer it */
        if (!p->invalid_logged)
            log_error("Not publishing ResourceSlice %s: %s", name, msg);
        p->invalid_logged = true;
        p->round_gen = 0;
        free(msg);
        free(name);
        json_decref(slice);
        return false;
    }
    p->invalid_logged = false;
    struct dra_write *w = xcalloc(1, sizeof(*w));
    w->p = p;
    w->name = name;
    w->tainted = slice && any_taint(slice);
    w->del = act == ACT_DELETE;
    w->counters = slice && dra_publish_has_counters(slice);
    w->want = json_incref(want);
    p->writes[p->n_writes++] = w;
    struct error err = { 0 };
    _cleanup_free_ char *path = act == ACT_CREATE ? NULL : xasprintf(SLICES_PATH "/%s", name);
    if (act == ACT_CREATE) {
        p->stats.creates++;
        w->req = kube_request(p->kube, KUBE_POST, SLICES_PATH, slice, on_written, w, &err);
    } else if (act == ACT_UPDATE) {
        p->stats.updates++;
        w->req = kube_request(p->kube, KUBE_PUT, path, slice, on_written, w, &err);
    } else {
        p->stats.deletes++;
        w->req = kube_request(p->kube, KUBE_DELETE, path, NULL, on_deleted, w, &err);
    }
    json_decref(slice);
    if (!w->req) {
        p->stats.write_failures++;
        write_done(w);
        dra_publish_failed(p, err.msg);
        return false;
    }
    return true;
}

/* Steps towards what is wanted: the round's writes go out together (up to WRITES_MAX),
 * each answer sends what is left; the round ends when nothing differs. */
void dra_publish_converge(struct dra_publish *p)
{
    if (p->req) {
        p->again = true;
        return;
    }
    p->again = false;
    if (p->retry || !p->devices_set)
        return; /* a retry is pending, or nothing to publish yet */
    if (p->counters && !p->version_known) {
        /* asked while the watches list, not after */
        if (!p->n_writes)
            dra_publish_get_version(p);
        return;
    }
    if (!p->synced)
        return;
    if (!p->node_uid) {
        if (!p->node_watch && !p->n_writes)
            dra_publish_get_node(p); /* its watch was refused while a request was out */
        return;
    }
    if (p->refresh_node && !dra_publish_steady(p)) {
        if (!p->n_writes)
            dra_publish_get_node(p);
        return;
    }
    enum dra_publish_action act = ACT_WAIT;
    while (p->n_writes < WRITES_MAX && !p->retry) {
        json_t *slice = NULL, *want = NULL;
        char *name = NULL;
        act = dra_publish_plan(p, &slice, &name, &want);
        if (act == ACT_NONE || act == ACT_WAIT)
            break;
        p->stats.converged = false;
        if (!send_write(p, act, slice, name, want))
            return;
    }
    if (act != ACT_NONE)
        return;
    if (!p->stats.converged)
        log_info("ResourceSlices of node %s are up to date (%zu devices, pool generation %lld)",
                 p->node, p->want_devices, p->last_gen);
    dra_publish_wanted_release(p);
    if (!p->stats.converged) {
        /* A round's bodies, answers and compared copies are freed now, below what
         * stays; at the start the TLS handshake and the watch's list are too. */
        mem_release_free();
    }
    p->stats.converged = true;
}

/* ---- healing ---- */

static void on_restore_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct dra_publish *p = userdata;
    p->retry = NULL;
    dra_publish_converge(p);
}

/* The server changed under us: converge again, at most as often as the bucket allows.
 * api_back: the watch relisted after failing, so a failure's pending retry is not waited
 * for. */
static void recheck(struct dra_publish *p, bool api_back)
{
    if (busy(p)) {
        p->again = true;
        return;
    }
    if (!p->devices_set || !p->synced || !p->node_uid || dra_publish_steady(p))
        return;
    if (p->retry) {
        if (!api_back)
            return;
        loop_timer_cancel(p->loop, p->retry);
        p->retry = NULL;
    }
    p->stats.restores++;
    bool warn;
    char more[HEAL_MORE_MAX];
    uint64_t wait_ms = heal_restore(&p->heal, &warn, more);
    if (wait_ms) {
        if (warn)
            log_warning("ResourceSlices of node %s keep being deleted or changed by someone else; "
                        "restoring them at most once every %us%s",
                        p->node, HEAL_RESTORE_PERIOD_MS / 1000u, more);
        p->retry = loop_timer_add(p->loop, wait_ms, on_restore_timer, p);
        return;
    }
    dra_publish_converge(p);
}

static void say_restore(struct dra_publish *p, const char *name, const char *how)
{
    char more[HEAL_MORE_MAX];
    if (heal_say(&p->heal, more))
        log_info("ResourceSlice %s %s by someone else; restoring it%s", name, how, more);
}

/* An event while a request is in flight. About the slice being written: the server has it
 * as of the event (its answer is older, or the echo of our write), so the answer, on
 * another stream, must not put back what the event says (a slice deleted after our write
 * would be counted as there and never restored). Unless it is that echo (deleted: our
 * write is a DELETE), someone else changed the server meanwhile: the answer goes on
 * through the restore pacing. */
static void superseded(struct dra_publish *p, const char *name, bool deleted)
{
    if (!busy(p))
        return;
    struct dra_write *w = write_find(p, name);
    if (p->synced && !(w && deleted == w->del))
        p->restore_owed = true;
    if (w) {
        free(w->name);
        w->name = NULL;
    }
}

static void on_event(struct kube_watch *w, enum kube_watch_event ev, json_t *obj, void *userdata)
{
    struct dra_publish *p = userdata;
    if (ev == KUBE_WATCH_SYNCED) {
        bool first = !p->synced;
        p->synced = true;
        if (first)
            dra_publish_converge(p);
        else
            recheck(p, true);
        return;
    }
    const char *name = dra_publish_name_of(obj);
    if (!name)
        return;
    json_t *spec = json_object_get(obj, "spec");
    /* a DELETED after a relist carries only metadata: known by name */
    if (ev != KUBE_WATCH_DELETED &&
        (!streq_ptr(json_string_value(json_object_get(spec, "nodeName")), p->node) ||
         !streq_ptr(json_string_value(json_object_get(spec, "driver")), p->driver)))
        return; /* not this node's, whatever the server's selector let through */
    if (ev == KUBE_WATCH_DELETED) {
        if (!json_object_get(p->store, name))
            return;
        superseded(p, name, true);
        json_object_del(p->store, name);
        /* the garbage collector deletes them when the Node went and came back with a
         * new UID: read it again before restoring, or they would go again (the Node's
         * watch, where allowed, tells the new UID by itself) */
        p->refresh_node = !p->node_watch;
        if (p->synced && p->devices_set)
            say_restore(p, name, "deleted");
        recheck(p, false);
        return;
    }
    json_t *had = json_object_get(p->store, name);
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (had && streq_ptr(rv, dra_publish_record_version(had)))
        return; /* the echo of our own write, already stored from its answer */
    superseded(p, name, false);
    store_put(p, obj, NULL);
    if (!p->synced)
        return;
    bool before = p->stats.converged;
    recheck(p, false);
    if (before && !p->stats.converged && p->devices_set)
        say_restore(p, name, "changed");
}

/* ---- public ---- */

struct dra_publish *dra_publish_new(struct loop *l, struct kube *k, const char *node,
                                    const char *driver, struct error *err)
{
    struct dra_publish *p = xcalloc(1, sizeof(*p));
    p->loop = l;
    p->kube = k;
    p->node = xstrdup(node);
    p->driver = xstrdup(driver);
    p->store = json_object();
    p->unhealthy = json_object();
    heal_init(&p->heal);
    /* Both lists come through their watches (kube.h: stream_list), so that a start costs
     * the rate limit only GET /version and the writes: 9 slices of 8 carved GPUs within
     * client-go's default burst of 10, where a list, a GET of the Node and the version
     * left the last writes waiting 200 ms each for a token. */
    _cleanup_free_ char *sel = xasprintf("spec.nodeName=%s,spec.driver=%s", node, driver);
    struct kube_watch_options o = { .field_selector = sel, .stream_list = true };
    p->watch = kube_watch_start_opt(k, SLICES_PATH, &o, on_event, p, err);
    if (!p->watch) {
        error_prefix(err, "watching the ResourceSlices of node %s", node);
        dra_publish_free(p);
        return NULL;
    }
    dra_publish_watch_node(p);
    return p;
}

void dra_publish_free(struct dra_publish *p)
{
    if (!p)
        return;
    kube_request_cancel(p->req);
    while (p->n_writes) {
        kube_request_cancel(p->writes[0]->req);
        write_done(p->writes[0]);
    }
    kube_watch_stop(p->watch);
    kube_watch_stop(p->node_watch);
    loop_timer_cancel(p->loop, p->retry);
    json_decref(p->store);
    free(p->devices);
    json_decref(p->devices_tree);
    free(p->counters);
    dra_publish_wanted_clear(p);
    json_decref(p->unhealthy);
    heal_clear(&p->heal);
    free(p->node_uid);
    free(p->node);
    free(p->driver);
    free(p);
}

void dra_publish_set(struct dra_publish *p, json_t *devices, const struct dra_unhealthy_device *unhealthy,
                     size_t n)
{
    dra_publish_set_pool(p, devices, NULL, unhealthy, n);
}

void dra_publish_set_pool(struct dra_publish *p, json_t *devices, json_t *counter_sets,
                          const struct dra_unhealthy_device *unhealthy, size_t n)
{
    json_t *bad = json_object();
    for (size_t i = 0; i < n; i++)
        if (unhealthy[i].device)
            json_object_set_new(bad, unhealthy[i].device, dra_publish_taint(&unhealthy[i]));
    char *counters = json_array_size(counter_sets) ? dra_publish_text(counter_sets) : NULL;
    bool same = p->devices_set && streq_ptr(p->counters, counters) && json_equal(p->unhealthy, bad);
    if (same && p->devices_tree) {
        same = json_equal(p->devices_tree, devices);
    } else if (same) {
        char digest[65];
        dra_publish_digest(devices, digest);
        same = streq_ptr(p->devices, digest);
    }
    if (!same || p->in_source || !p->source) {
        json_decref(p->devices_tree);
        p->devices_tree = json_incref(devices);
    }
    if (same) {
        free(counters);
        json_decref(bad);
        return;
    }
    free(p->devices);
    p->devices = NULL; /* taken when the tree is let go of */
    p->devices_set = true;
    free(p->counters);
    p->counters = counters;
    p->wanted_changes++;
    json_decref(p->unhealthy);
    p->unhealthy = bad;
    if (!p->in_source)
        dra_publish_converge(p);
}

void dra_publish_set_source(struct dra_publish *p, dra_publish_source_fn fn, void *userdata)
{
    p->source = fn;
    p->source_userdata = userdata;
}

void dra_publish_send_now(struct dra_publish *p)
{
    if (p)
        kube_send_now(p->kube);
}

bool dra_publish_converged(const struct dra_publish *p)
{
    return p->stats.converged && !p->retry && !busy(p);
}

void dra_publish_get_stats(const struct dra_publish *p, struct dra_publish_stats *out)
{
    *out = p->stats;
    out->error = p->heal.error;
}
