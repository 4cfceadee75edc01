/* Shared by the files of the cluster module only: cluster.c (the object, the API
 * client, per-node configuration), cluster-publish.c (label delivery),
 * cluster-events.c (Events). */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cluster/cluster-evcache.h"
#include "cluster/cluster.h"
#include "core/backoff.h"
#include "core/heal.h"
#include "core/ratelimit.h"
#include "core/tokenbucket.h"
#include "kube/kube.h"

/* Without inotify, how often the config directory is checked instead. */
#define CLUSTER_DIR_POLL_MS 10000u

struct kube;
struct kube_req;
struct kube_watch;
struct loop_timer;

struct cluster {
    struct loop *loop;
    struct kube *kube;              /* NULL: no feature needed it yet, or it could not start */
    bool kube_failed;               /* kube_new failed (logged once) */
    struct config_cluster kube_cfg; /* for cluster_kube_new(): kubeconfig (owned; NULL:
                                     * in-cluster), kube_api_qps, kube_api_burst only */
    cluster_apply_fn apply;
    void *userdata;

    char *node;                     /* NULL: no node name */
    char *ns;
    char *pod;                      /* NULL: no owner references */

    /* per-node configuration */
    bool config_on;
    char *config_dir, *label_key, *config_default;
    char **fallbacks;
    struct kube_watch *watch;
    struct loop_timer *wait_timer;
    struct loop_timer *dir_poll;    /* without inotify: the directory checked every
                                     * CLUSTER_DIR_POLL_MS instead */
    struct stat dir_st, file_st;    /* the directory and the applied file as last seen */
    int inotify_fd;
    bool label_known;               /* the watch delivered the Node once */
    bool node_gone;                 /* it was deleted since: label and config kept */
    char *label;                    /* its value; NULL: absent */
    char *annotation;               /* CLUSTER_CONFIG_ANNOTATION on the Node; NULL: none */
    char *annotation_source;        /* CLUSTER_CONFIG_SOURCE_ANNOTATION; NULL: none */
    bool applied_once;
    char *applied_path;             /* what the last successful apply got (NULL, "" or a file) */
    char *applied_content;
    size_t applied_len;
    char *refused_key;              /* the unreadable file last said (path, inode, size,
                                     * time): said once per content */
    struct kube_req *annotate_req;

    /* labels */
    enum cluster_labels_mode labels_mode;
    char *output_file;
    bool keep_output_file;
    json_t *labels_want;            /* object key -> value; NULL: nothing to deliver yet */
    json_t *labels_sent;            /* what the server / file has; NULL: unknown */
    struct kube_req *labels_req;
    int labels_step;                /* the delivery's state machine (cluster-publish.c) */
    json_t *owner_refs;             /* NodeFeature owners; NULL: none */
    bool owner_refs_done;
    bool labels_again;              /* labels changed while a delivery was running */
    struct loop_timer *labels_retry;        /* failure backoff or restore rate limit */
    /* healing: what the server holds watched, restored when someone else changed it */
    struct kube_watch *labels_watch; /* own NodeFeature; own Node unless c->watch is one */
    bool labels_present;            /* the NodeFeature watch last saw the object */
    bool labels_recheck;            /* it changed while a delivery ran: check after it */
    struct heal labels_heal;        /* retries, restores and their lines (core/heal.h);
                                     * .error: the failure last logged */

    /* events */
    bool events_on;
    struct cluster_evcache evcache;
    unsigned events_inflight;
    struct loop_timer *events_timer; /* the next retry */
};

/* Create the API client on first use; NULL (logged once) when it cannot be. */

void cluster_publish_free(struct cluster *c);
/* An event of the own Node's watch (cluster.c's, when per-node config runs one): in
 * node-patch mode, owned labels someone removed or changed are patched back. */
void cluster_labels_node_event(struct cluster *c, enum kube_watch_event ev, json_t *obj);
void cluster_events_free(struct cluster *c);
/* RFC 3339 UTC of now ("2026-11-23T16:43:05Z"). */
void cluster_now_rfc3339(char buf[32]);
