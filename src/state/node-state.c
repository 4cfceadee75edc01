/* Building the node state (node-state.h): IMEX channel selection, NVML, discovery,
 * resources and, for serve, the pair links, topology model and CDI specs. One function
 * for serve and list, so the two cannot disagree about a node. */
#include <libgen.h>
#include <stdio.h>
#include <sys/stat.h>

#include "core/log.h"
#include "policy/dra-split.h"
#include "state/node-state.h"
#include "node/discover.h"
#include "node/host.h"
#include "nvml/nvml.h"
#include "output/cdi.h"

#define DEFAULT_PLUGIN_DIR "/var/lib/kubelet/device-plugins"

/* IMEX channels (reference §5.6): a configured channel is used only if its device node
 * exists as a character device, looked up under the container's view of the driver
 * root (when it has a dev/) and then at the plain path. Missing: an error when
 * imex.required, else a warning and the channel is dropped. */
static int select_imex_channels(struct config *cfg, struct error *err)
{
    size_t kept = 0;
    for (size_t i = 0; i < cfg->n_imex_channel_ids; i++) {
        int id = cfg->imex_channel_ids[i];
        _cleanup_free_ char *plain = xasprintf("/dev/nvidia-caps-imex-channels/channel%d", id);
        _cleanup_free_ char *devdir = xasprintf("%s/dev", cfg->driver_root_ctr_path ? cfg->driver_root_ctr_path : "");
        _cleanup_free_ char *under = xasprintf("%s%s", cfg->driver_root_ctr_path ? cfg->driver_root_ctr_path : "", plain);
        struct stat st;
        bool found = false;
        if (stat(devdir, &st) == 0 && S_ISDIR(st.st_mode) && stat(under, &st) == 0)
            found = S_ISCHR(st.st_mode);
        if (!found && stat(plain, &st) == 0)
            found = S_ISCHR(st.st_mode);
        if (found) {
            cfg->imex_channel_ids[kept++] = id;
            continue;
        }
        if (cfg->imex_required)
            return error_set(err, -ENOENT, "IMEX channel %d: %s is not a character device "
                             "(imex.required is set)", id, plain);
        log_warning("IMEX channel %d: %s not found, ignoring the channel", id, plain);
    }
    cfg->n_imex_channel_ids = kept;
    return 0;
}

/* What to check when NVML cannot be opened: almost always the node or the pod's setup,
 * not the plugin (the same advice NVIDIA's plugin logs after its "Failed to initialize
 * NVML" line, in our words and with our flags). */
#define NVML_HINTS_SETUP                                                              \
    "If this is a GPU node: is the NVIDIA driver installed and loaded on the host "   \
    "(nvidia-smi works there)?",                                                       \
    "Does the container runtime give this pod the driver's libraries: the NVIDIA "    \
    "Container Toolkit installed, and the pod run by the nvidia runtime "               \
    "(runtimeClassName, or the runtime's default) or given the GPUs by CDI?",          \
    "Or is the host's driver root (--driver-root, e.g. /run/nvidia/driver with the "   \
    "GPU operator) mounted into this container at --driver-root-ctr-path, where the "  \
    "library is looked up under usr/lib64, usr/lib/<arch>-linux-gnu, lib64 and "       \
    "lib/<arch>-linux-gnu?"
static const char *const nvml_failure_hints[] = {
    NVML_HINTS_SETUP,
    "If this is not a GPU node: deploy the plugin only to GPU nodes (nodeSelector or "
    "affinity on a GPU node label), or set --fail-on-init-error=false to run without "
    "devices.",
    NULL,
};
static const char *const nvml_tolerated_hints[] = {
    NVML_HINTS_SETUP,
    "If this is not a GPU node: deploy the plugin only to GPU nodes (nodeSelector or "
    "affinity on a GPU node label).",
    NULL,
};

static void warn_dra_unmatched(void *userdata, const char *entry)
{
    log_warning("--dra-device-plugin-gpus: no GPU \"%s\" on this node (an index or a UUID); "
                "DRA serves every GPU the list does not name", entry);
}

static void read_host_facts(struct node_state *s, const struct node_state_options *opt)
{
    if (!opt->host_facts)
        return;
    struct host_options hopt = {
        .sysfs_root = s->cfg->sysfs_root,
        .machine_type_file = s->cfg->machine_type_file,
    };
    host_discover(&hopt, &s->inv.host);
}

static bool has_entry(char *const *v, const char *name)
{
    for (; v && *v; v++)
        if (streq(*v, name))
            return true;
    return false;
}

/* The driver's files every CDI spec carries, looked for once per node state, under the
 * driver root as this process sees it (--driver-root-ctr-path, or --driver-root itself
 * when that is not mounted here: the plugin run on the host). */
static void find_driver_files(const struct config *cfg, struct inventory *inv)
{
    const char *root = cfg->driver_root_ctr_path;
    struct stat st;
    if (!root || !*root || stat(root, &st) < 0 || !S_ISDIR(st.st_mode))
        root = cfg->driver_root;
    struct driver_find_options o = {
        .root = root,
        .version = inv->driver_version,
        .sysfs_root = cfg->sysfs_root,
        .no_ipc = has_entry(cfg->cdi_feature_flags, "disable-ipc-discoverer"),
        .hook_path = has_entry(cfg->cdi_disable_hooks, "all") ? NULL
                     : cfg->nvidia_cdi_hook_path && *cfg->nvidia_cdi_hook_path
                           ? cfg->nvidia_cdi_hook_path : "/usr/bin/nvidia-ctk",
    };
    driver_files_find(&o, &inv->driver);
    for (char **w = inv->driver.warnings; w && *w; w++)
        log_warning("%s", *w);
    /* NVIDIA's flags we act on, or have no use for (we never load nvsandboxutils); any
     * other is said once per build instead of silently doing nothing. */
    static const char *const known[] = {
        "disable-ipc-discoverer", "no-additional-gids-for-device-nodes", "disable-nvsandboxutils",
    };
    for (char **f = cfg->cdi_feature_flags; f && *f; f++) {
        bool ok = false;
        for (size_t i = 0; i < ELEMENTSOF(known) && !ok; i++)
            ok = streq(*f, known[i]);
        if (!ok)
            log_warning("--cdi-feature-flags: %s is not implemented (docs/allocate.md), ignoring", *f);
    }
    if (inv->driver.libcuda_dir)
        log_info("driver %s: %zu files under %s for the CDI specs (libraries in %s)",
                 inv->driver.version, inv->driver.n_mounts, *root ? root : "/",
                 inv->driver.libcuda_dir);
}

/* A GPU the split gives the device plugin while a DRA claim holds it stays with DRA (the
 * scheduler would hand it out twice otherwise): kept in s->dra_kept, and the device
 * plugin's resources built from the split without it. Said once per build. */
static int build_resources(struct node_state *s, const struct node_state_options *opt,
                           struct error *err)
{
    const struct config *cfg = s->cfg;
    size_t n_kept = 0;
    for (size_t g = 0; opt->dra_holds && g < s->inv.n_gpus; g++) {
        const struct inv_gpu *gpu = &s->inv.gpus[g];
        if (dra_split_serves(cfg, gpu) || !opt->dra_holds(opt->dra_holds_userdata, gpu))
            continue;
        if (!s->dra_kept)
            s->dra_kept = xcalloc(s->inv.n_gpus, sizeof(bool));
        s->dra_kept[g] = true;
        n_kept++;
        log_info("GPU %u (%s) stays with DRA: a prepared DRA claim holds it, so the device "
                 "plugin does not serve it although --dra-device-plugin-gpus names it; it "
                 "moves once its last claim is unprepared", gpu->index, gpu->uuid);
    }
    if (n_kept == 0)
        return resources_build(&s->inv, cfg, &s->rs, err);
    /* The same config with the split narrowed: cfg itself stays as given (a reload
     * compares it, and the start-only settings are checked against it). */
    struct config narrowed = *cfg;
    _cleanup_free_ char **without = dra_split_without(cfg, &s->inv, s->dra_kept);
    narrowed.dra.device_plugin_gpus = without;
    return resources_build(&s->inv, &narrowed, &s->rs, err);
}

bool node_state_dra_serves(const struct node_state *s, size_t g)
{
    return dra_split_serves(s->cfg, &s->inv.gpus[g]) || (s->dra_kept && s->dra_kept[g]);
}

int node_state_build(struct node_state *s, const struct node_state_options *opt,
                     struct error *err)
{
    const struct config *cfg = s->cfg;
    int r;
    s->health_cfg = &cfg->health; /* parsed and checked by config_load() */
    if ((r = select_imex_channels(s->cfg, err)) < 0)
        return r;

    r = nvml_open(cfg->driver_root_ctr_path, err);
    if (r < 0) {
        err->hints = opt->tolerate_nvml_failure ? nvml_tolerated_hints : nvml_failure_hints;
        if (!opt->tolerate_nvml_failure)
            return error_prefix(err, "failed to initialize NVML");
        log_warning("Failed to initialize NVML: %s; --fail-on-init-error=false, continuing "
                    "without resources", err->msg);
        log_hints(err->hints);
        memset(err, 0, sizeof(*err));
        read_host_facts(s, opt);
        return 0;
    }
    s->nvml_open = true;

    struct discover_options dopt = {
        .sysfs_root = cfg->sysfs_root,
        .proc_root = cfg->proc_root,
        /* DRA offers a MIG-enabled GPU's MIG devices whatever the strategy, as NVIDIA's
         * DRA driver does; the device plugin's resources still follow the strategy. */
        .with_mig = cfg->mig_strategy != MIG_STRATEGY_NONE || cfg->dra.enabled,
        .with_mig_profiles = cfg->dra.enabled && cfg->dra.dynamic_mig,
        .with_links = opt->serve,
        .previous = opt->previous,
    };
    if ((r = discover_node(&dopt, &s->inv, err)) < 0)
        return error_prefix(err, "discovering GPUs");
    read_host_facts(s, opt);
    if (opt->labels_only)
        return 0;
    dra_split_unmatched(cfg, &s->inv, warn_dra_unmatched, NULL);
    if ((r = build_resources(s, opt, err)) < 0)
        return r;
    if (!opt->serve)
        return 0;
    if ((r = topo_model_build(&s->inv, &s->topo)) < 0)
        return error_set(err, r, "building the topology model: %s", strerror(-r));
    bool cdi = cfg->device_list_strategy & (DEVICE_LIST_CDI_ANNOTATIONS | DEVICE_LIST_CDI_CRI);
    if (cdi || cfg->dra.enabled)
        find_driver_files(cfg, &s->inv);
    if (cdi) {
        if ((r = cdi_write_specs(&s->rs, &s->inv, cfg, err)) < 0)
            return error_prefix(err, "writing CDI specs");
    }
    return 0;
}

void node_state_clear(struct node_state *s)
{
    topo_model_clear(&s->topo);
    resources_clear(&s->rs);
    free(s->dra_kept);
    inventory_clear(&s->inv);
    if (s->nvml_open)
        nvml_close();
    if (s->cfg) {
        config_free(s->cfg);
        free(s->cfg);
    }
    memset(s, 0, sizeof(*s));
}

char *node_state_socket_dir(const struct config *cfg)
{
    bool registering = cfg->kubelet_socket && *cfg->kubelet_socket;
    _cleanup_free_ char *copy = xstrdup(registering ? cfg->kubelet_socket
                                                    : DEFAULT_PLUGIN_DIR "/kubelet.sock");
    return xstrdup(dirname(copy));
}
