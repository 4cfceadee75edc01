/* The `config-manager` entrypoint's work, as NVIDIA's config-manager does it for the
 * plugin container beside it (NVIDIA's chart and the GPU Operator run it as an init
 * container with ONESHOT=true and as a sidecar with SEND_SIGNAL=true, in a pod that
 * shares its process namespace):
 *   - watch the own Node for the config label (field-selected, so only that object);
 *   - pick the named config from the source directory with the same rules as our own
 *     per-node configuration (cluster-select.h: label, default, fallbacks);
 *   - point the destination at it: a symlink to <srcdir>/<name>, or to /dev/null for the
 *     empty config, replaced atomically (rename), untouched when it already resolves to
 *     the same file;
 *   - then, only when it changed, send the signal to the process whose argv[0] is the
 *     one named (the plugin, "nvidia-device-plugin"), which reloads the file.
 * Differences from NVIDIA's, all deliberate (docs/compatibility.md): a label naming a
 * config that does not exist is said in one error line and treated as no label (NVIDIA's
 * exits and its container restarts until the label is fixed); a failed update in the
 * sidecar is logged and retried on the next change instead of ending the process; the
 * Node deleted keeps the last config instead of switching to the default.
 * Loop-thread only. */
#pragma once

#include <stdbool.h>

#include "config/config-cm.h"

struct loop;
struct cluster_cm;

/* Called once in oneshot mode, after the first update: rc is the process exit code. */
typedef void (*cluster_cm_done_fn)(void *userdata, int rc);

/* cfg is borrowed for the object's life. Returns 0, or -errno with err saying why (no
 * API client: bad kubeconfig, no in-cluster credentials). */
int cluster_cm_new(struct loop *l, const struct config_cm *cfg, cluster_cm_done_fn done,
                   void *userdata, struct cluster_cm **out, struct error *err);
void cluster_cm_free(struct cluster_cm *m);

/* One update for `label` (NULL or "": absent), without the API: select, link, signal.
 * Returns 0 (updated or already configured) or -errno with err saying why. */
int cluster_cm_update(const struct config_cm *cfg, const char *label, bool *changed,
                      struct error *err);
/* The pid of the first process (in /proc order) whose argv[0] is name, or -ESRCH. A
 * name with a '/' also matches an argv[0] of the same base name: NVIDIA's chart names
 * "/usr/bin/mps-control-daemon" for a container whose command is "mps-control-daemon". */
int cluster_cm_find_process(const char *proc_root, const char *name);
