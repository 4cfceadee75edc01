/* The simulator's YAML reader: typed accessors over a parsed libyaml document that
 * report every problem as one "<file>:<line>: <what>" line (the first one wins). Private
 * to the profile parser (sim-profile.c, sim-profile-topo.c). The simulator stands in for
 * the driver library, so it does not share the plugin's config reader. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "core/macro.h"
#include "sim-model.h"

struct yp_ctx {
    yaml_document_t doc;
    const char *name;
    char *err;
    size_t errlen;
    bool failed;
};

#define SIM_MAX_DEVICES 64

static inline yaml_node_t *yp_node(struct yp_ctx *c, int id) { return yaml_document_get_node(&c->doc, id); }
static inline bool yp_is_map(const yaml_node_t *n) { return n && n->type == YAML_MAPPING_NODE; }

/* Control bytes in a message become '?': the report stays one printable line. */
void yp_one_line(char *s);
_printf_(3, 4) int yp_fail(struct yp_ctx *c, const yaml_node_t *n, const char *fmt, ...);
const char *yp_scalar(struct yp_ctx *c, yaml_node_t *n, const char *what);
yaml_node_t *yp_map_get(struct yp_ctx *c, yaml_node_t *map, const char *key, size_t keylen);
yaml_node_t *yp_path_get(struct yp_ctx *c, yaml_node_t *map, const char *path);
yaml_node_t *yp_dget(struct yp_ctx *c, yaml_node_t *dev, yaml_node_t *defaults, const char *path);
int yp_str(struct yp_ctx *c, yaml_node_t *n, const char *what, char *buf, size_t size);
int yp_u64(struct yp_ctx *c, yaml_node_t *n, const char *what, uint64_t max, uint64_t *v);
int yp_uint(struct yp_ctx *c, yaml_node_t *n, const char *what, unsigned max, unsigned *v);
int yp_int(struct yp_ctx *c, yaml_node_t *n, const char *what, int min, int max, int *v);
int yp_bool(struct yp_ctx *c, yaml_node_t *n, const char *what, bool *v);
bool yp_bdf_eq(const struct sim_bdf *a, const struct sim_bdf *b);
int yp_bdf(struct yp_ctx *c, yaml_node_t *n, const char *what, struct sim_bdf *bdf);

/* Optional typed fields: absent leaves *v untouched. */
#define YP_OPT(getter, c, n, what, ...) ((n) ? getter(c, n, what, __VA_ARGS__) : 0)

/* Profile sections parsed in sim-profile-topo.c. */
int sim_profile_parse_nvlink(struct yp_ctx *c, yaml_node_t *root, yaml_node_t *devs, struct sim_node *nd);
int sim_profile_parse_pcie(struct yp_ctx *c, yaml_node_t *root, struct sim_node *nd);
