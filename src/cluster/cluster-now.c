/* cluster_config_select_now() (see cluster.h): serve's per-node config selection made
 * once, for `list`, which has no watch and no daemon: one GET of the Node on a loop of its
 * own, then the same cluster_select_config() call as cluster.c's reselect(). */
#include <stdio.h>

#include "cluster/cluster-select.h"
#include "cluster/cluster.h"
#include "core/log.h"
#include "core/loop.h"
#include "kube/kube.h"

struct node_get {
    struct loop *loop;
    const char *label_key;
    bool done;
    int status;
    char *label;      /* the label's value; NULL: absent */
    char *message;    /* the Status message of an error answer; NULL: none */
};

static void on_node(struct kube *k, int status, json_t *body, void *userdata)
{
    struct node_get *g = userdata;
    g->done = true;
    g->status = status;
    if (status == 200) {
        const char *v = json_string_value(json_object_get(
            json_object_get(json_object_get(body, "metadata"), "labels"), g->label_key));
        g->label = v ? xstrdup(v) : NULL;
    } else {
        const char *m = kube_status_message(body);
        g->message = m ? xstrdup(m) : NULL;
    }
    loop_quit(g->loop, 0);
}

/* One GET of the Node through kube, run on l until its answer (or the deadline). */
static int get_node(struct loop *l, struct kube *kube, struct node_get *g, const char *node,
                    struct error *err)
{
    _cleanup_free_ char *name = kube_escape(node);
    _cleanup_free_ char *path = xasprintf("/api/v1/nodes/%s", name);
    struct kube_req *req = kube_request(kube, KUBE_GET, path, NULL, on_node, g, err);
    if (!req)
        return err->code < 0 ? err->code : -EIO;
    int r = loop_run(l);
    if (r < 0) {
        kube_request_cancel(req);
        return error_set(err, r, "running the event loop: %s", strerror(-r));
    }
    if (!g->done) /* loop_quit() comes only from on_node */
        return error_set(err, -EIO, "no answer");
    if (g->status < 0)
        return error_set(err, g->status, "%s", strerror(-g->status));
    if (g->status != 200)
        return error_set(err, g->status == 404 ? -ENOENT : -EIO, "HTTP %d%s%s", g->status,
                         g->message ? ": " : "", g->message ? g->message : "");
    return 0;
}

/* The label's value into *label (NULL: absent); 0, or -errno with err saying why the
 * Node could not be read. Bounded by the client's request deadline. */
static int read_label(const struct config_cluster *k, char **label, struct error *err)
{
    struct loop *l = NULL;
    int r = loop_new(&l);
    if (r < 0)
        return error_set(err, r, "creating an event loop: %s", strerror(-r));
    struct kube *kube = NULL;
    struct node_get g = { .loop = l, .label_key = k->config_node_label };
    r = cluster_kube_new(l, k, &kube, err);
    if (r == 0)
        r = get_node(l, kube, &g, k->node_name, err);
    if (r == 0)
        *label = TAKE_PTR(g.label);
    kube_free(kube);
    loop_free(l);
    free(g.label);
    free(g.message);
    return r;
}

int cluster_config_select_now(const struct config_cluster *k, struct cluster_selection *out,
                              struct error *err)
{
    _cleanup_free_ char *label = NULL;
    struct error why = { 0 };
    _cleanup_free_ char *unread = NULL;
    if (read_label(k, &label, &why) < 0) {
        log_warning("Node %s not read from the API server: %s; selecting the per-node config "
                    "without its label",
                    k->node_name, why.msg);
        unread = xasprintf("node label %s not read: %s", k->config_node_label, why.msg);
    }
    int r = cluster_select_config(k->config_dir, label, k->config_node_label,
                                  k->config_default && *k->config_default ? k->config_default
                                                                         : NULL,
                                  k->config_fallback_strategies, out, err);
    if (r < 0) {
        if (unread)
            error_prefix(err, "%s, and", unread);
        return r;
    }
    if (unread && !out->note)
        out->note = TAKE_PTR(unread);
    return 0;
}
