/* What the publisher's two halves share (see dra-publish.h): dra-publish.c talks to the
 * API server, dra-publish-plan.c decides what to ask it (pure: the desired slices, the
 * comparison with what the server holds, the next step). */
#pragma once
#include <jansson.h>

#include "core/heal.h"
#include "dra/dra-publish.h"

#define SLICES_PATH "/apis/resource.k8s.io/v1/resourceslices"
/* Slices of this node and driver kept from the watch: 64 x 128 devices is far beyond a
 * node; more is someone else's flood, not kept. */
#define MAX_SLICES 64u

#define TAINT_XID "gpu.nvidia.com/xid"
#define TAINT_LOST "gpu.nvidia.com/gpu-lost"

enum dra_publish_action { ACT_NONE, ACT_CREATE, ACT_UPDATE, ACT_DELETE, ACT_WAIT };

/* Writes in flight at once: a round's slices go out together (a pool of 8 carved GPUs is
 * 9 slices; one at a time, each waited for the server's answer to the one before). */
#define WRITES_MAX 16u

struct dra_publish;

/* A slice write in flight. */
struct dra_write {
    struct dra_publish *p;
    struct kube_req *req;
    char *name;                     /* the slice; NULL once an event superseded it */
    bool tainted;                   /* it carried taints: its answer tells the mode */
    bool counters;                  /* it carried counters: its answer tells the mode */
    bool del;                       /* a DELETE */
    json_t *want;                   /* the wanted entry written (want_cache's; its "slice"
                                     * is what was sent, its generation aside) */
};

struct dra_publish {
    struct loop *loop;
    struct kube *kube;
    char *node, *driver;
    char *node_uid;                 /* NULL until the Node was read */
    struct kube_watch *watch;
    struct kube_watch *node_watch;  /* the Node's metadata (its UID); NULL: GET instead */
    bool synced;                    /* the watch's first list is in */
    /* What is kept is text, not jansson trees: a tree takes ~9x the bytes of its compact
     * JSON (an object and hashtable per attribute), ~40 KiB per copy of 8 GPUs' devices;
     * each is parsed or built again only for a comparison, which is rare (a change, a
     * restore, not the steady state). */
    json_t *store;                  /* name -> dra_publish_record() of the slice as the
                                     * server holds it */
    bool devices_set;               /* a set came */
    char *devices;                  /* SHA-256 (hex) of what the caller gave, as compact
                                     * JSON with sorted keys, taken when its tree is let go
                                     * of (while held, the tree is compared) */
    json_t *devices_tree;           /* the caller's devices, held from a set until the
                                     * round that writes them ends (for good without a
                                     * source); then asked for again from the source */
    dra_publish_source_fn source;
    void *source_userdata;
    bool in_source;                 /* inside source: a set does not converge */
    size_t want_devices;            /* devices in the wanted slices */
    json_t *unhealthy;              /* device name -> its taint */
    char *counters;                 /* DynamicMIG's counter sets as compact JSON; NULL: none */
    /* The wanted slices (at generation 0; the one written is set on a shallow copy) and
     * their compared content, built once per change of what is wanted, not once per
     * request: rebuilt per step, 9 slices of 208 devices (8 carved H100s) cost 10-14 ms a
     * write and grew with the square of the slices. wanted_changes counts the changes of
     * the inputs (devices, counters, health, Node UID, counter modes, layout). Each entry:
     * {"name", "content" (what is compared, a SHA-256, taken when first compared or when
     * the round ends: a start's creates need none before), "owners" (text, or absent), "slice"
     * (the tree, sharing the caller's devices, only until the round that writes it ends:
     * a pool of carved GPUs is ~250 KiB as text and ~9x that as trees, and both were
     * kept for the process's life; a later write builds them again)}. */
    json_t *want_cache;
    unsigned wanted_changes, want_cache_at;
    bool version_known;             /* the layout is chosen (GET /version answered) */
    bool combined;                  /* the API server is older than 1.35 */
    long long round_gen;            /* pool generation being written; 0 between rounds */
    long long last_gen;
    struct kube_req *req;           /* reading the Node or the version */
    struct dra_write *writes[WRITES_MAX];
    size_t n_writes;
    bool again;                     /* converge once the request is answered */
    bool restore_owed;              /* someone else changed the server while a request
                                     * was in flight: its answer goes on through the
                                     * restore pacing (recheck), not past it */
    bool invalid_logged;
    bool refresh_node;              /* read the Node's UID again before the next write */
    struct loop_timer *retry;
    struct heal heal;               /* retries, restores and their lines; .error: why
                                     * the last request failed, while it is retried */
    unsigned skipped_logged;
    struct dra_publish_stats stats;
};

/* Compact JSON with sorted keys: equal text for equal values, whatever order the server
 * or the caller put the keys in. */
char *dra_publish_text(json_t *v);
/* The taint of an unhealthy device (NVIDIA's keys, effect NoSchedule). New reference. */
json_t *dra_publish_taint(const struct dra_unhealthy_device *h);
/* The device entries that go out, from the caller's devices, the unhealthy ones and the
 * taint mode. New reference; p->devices must be set. */
json_t *dra_publish_want(const struct dra_publish *p);
/* What the store keeps of a slice: its resourceVersion and pool generation, and what is
 * compared of it (the content and the owner, as text). New reference. */
json_t *dra_publish_record(json_t *slice);
/* The record of the server's answer to a write of sent, whose content is given: taken as
 * is where the server holds what was sent (the compared fields equal), else computed. */
json_t *dra_publish_record_as(json_t *slice, json_t *want);
const char *dra_publish_record_version(json_t *record);
const char *dra_publish_name_of(json_t *o);
/* The server holds exactly the wanted slices, all of one generation. */
bool dra_publish_steady(struct dra_publish *p);
/* The wanted slices as want_cache describes them (borrowed, valid until the next change). */
json_t *dra_publish_wanted(struct dra_publish *p);
void dra_publish_wanted_clear(struct dra_publish *p);
/* The SHA-256 of devices as compact JSON with sorted keys. */
void dra_publish_digest(json_t *devices, char out[65]);
/* The round ended: the trees go (the names, contents and owners stay). */
void dra_publish_wanted_release(struct dra_publish *p);

/* Whether an API server of this gitVersion ("v1.34.9", "v1.35.0-rc.1") wants the
 * combined layout: below 1.35.0 in semver order, a pre-release counting below. */
bool dra_publish_combined_layout(const char *git_version);
/* Whether a slice carries counters (sharedCounters, or a device's consumesCounters). */
bool dra_publish_has_counters(json_t *slice);

/* The next request of the round (a new pool generation, started when something
 * differs): create or update a wanted slice (*slice_out, with the resourceVersion
 * compared against), then delete the extras (*name_out); ACT_NONE ends the round. */
/* Whether a write of that slice is in flight (dra-publish.c). */
bool dra_publish_in_flight(const struct dra_publish *p, const char *name);

/* *want_out: the want_cache entry of a write (borrowed), NULL for a delete. */
enum dra_publish_action dra_publish_plan(struct dra_publish *p, json_t **slice_out, char **name_out,
                                         json_t **want_out);

/* dra-publish.c, for dra-publish-server.c: one step towards what is wanted; a request
 * answered (the round goes on), succeeded, failed (retried with backoff: the delay). */
void dra_publish_converge(struct dra_publish *p);
void dra_publish_answered(struct dra_publish *p);
void dra_publish_succeeded(struct dra_publish *p);
uint64_t dra_publish_failed(struct dra_publish *p, const char *why);
const char *dra_publish_status_text(int status, json_t *body, char *buf, size_t len);

/* dra-publish-server.c: the Node's UID (its watch, or a GET where that is not allowed);
 * the API server's version. */
void dra_publish_watch_node(struct dra_publish *p);
void dra_publish_get_node(struct dra_publish *p);
void dra_publish_get_version(struct dra_publish *p);
