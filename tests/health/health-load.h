/* Health settings for the health tests, loaded the way the plugin loads them:
 * config_load() with the given environment and, when health_json is given, a
 * config.yaml whose `health:` section (JSON is YAML) is on line 7. */
#pragma once

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config/config-load.h"
#include "tests/common/scratch.h"

/* The documented defaults (docs/health.md), written here as the tests' oracle. */
#define HEALTH_DEFAULT_QUIET_MS (60ULL * 1000)
#define HEALTH_DEFAULT_WAIT_TIMEOUT_MS (60ULL * 60 * 1000)
#define HEALTH_DEFAULT_UNATTRIBUTED_PROBE_MS (2ULL * 1000)
#define HEALTH_DEFAULT_WAIT_ERROR_THRESHOLD 5U

static inline void test_health_free(struct health_config *hc)
{
    if (!hc)
        return;
    struct config *c = (struct config *)(void *)((char *)hc - offsetof(struct config, health));
    config_free(c);
    free(c);
}

/* NULL with err set when config_load() refuses. */
static inline struct health_config *test_health_load(const char *health_json, char **envp,
                                                     struct error *err)
{
    const char *dir = scratch_dir("gdp-health-test-");
    char path[600];
    char *argv[] = { "test", "--config-file", path, NULL };
    struct config *c = calloc(1, sizeof(*c));
    int argc = 1;
    if (!c || (size_t)snprintf(path, sizeof(path), "%s/config.yaml", dir) >= sizeof(path))
        abort();
    if (health_json) {
        FILE *f = fopen(path, "w");
        if (!f)
            abort();
        fprintf(f, "version: v1\n#\n#\n#\n#\n#\nhealth: %s\n", health_json);
        fclose(f);
        argc = 3;
    }
    int r = config_load(c, argc, argv, envp, NULL, err);
    scratch_remove(dir);
    if (r != 0) {
        config_free(c);
        free(c);
        return NULL;
    }
    return &c->health;
}
