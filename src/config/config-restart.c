/* The settings serve reads once, when it starts, and which a reload therefore cannot
 * change: the rows of the option table marked start_only (config-options.c). They are
 * the log format (main), the metrics listener (daemon_start), everything the cluster
 * features read in cluster_new (how labels are published and where, the API client,
 * per-node configuration, Events) and the DRA settings. A reload that sets one
 * differently keeps the running value; serve names each such setting in a warning
 * (cmd_serve.c). Applying them would mean restarting those parts, which the restart the
 * warning asks for does better. The NVML library's location (--driver-root-ctr-path) is
 * the daemon's: it knows whether NVML is loaded (daemon.c). */
#include <stdio.h>

#include "config/config-internal.h"
#include "config/config-load.h"

struct config_start_values {
    char *value[_OPT_MAX]; /* start-only rows: the value as a flag would spell it */
};

struct config_start_values *config_start_values_new(const struct config *c)
{
    struct config_start_values *s = xcalloc(1, sizeof(*s));
    for (int i = 0; i < _OPT_MAX; i++)
        if (config_options[i].start_only)
            s->value[i] = config_option_text(c, i);
    return s;
}

void config_start_values_free(struct config_start_values *s)
{
    if (!s)
        return;
    for (int i = 0; i < _OPT_MAX; i++)
        free(s->value[i]);
    free(s);
}

size_t config_start_values_diff(const struct config_start_values *s, const struct config *c,
                                config_change_fn fn, void *userdata)
{
    size_t n = 0;
    for (int i = 0; i < _OPT_MAX; i++) {
        if (!config_options[i].start_only)
            continue;
        _cleanup_free_ char *now = config_option_text(c, i);
        if (streq(now, s->value[i]))
            continue;
        _cleanup_free_ char *flag = xasprintf("--%s", config_options[i].names[0]);
        fn(userdata, flag, s->value[i], now);
        n++;
    }
    return n;
}
