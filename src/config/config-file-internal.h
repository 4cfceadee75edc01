/* Shared by the two files of the config-file reader only: config-file.c (the YAML
 * typer, the fields that mirror flags, the health and top-level sections, loading) and
 * config-file-sections.c (the `resources` and `sharing` sections, the ones with their
 * own structure). */
#pragma once

#include <stdbool.h>
#include <yaml.h>

#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/error.h"

struct fctx {
    const char *name;
    yaml_document_t *doc;
    struct config *c;
    const bool *set;
    struct config_marks *marks;
    size_t visits;
    struct error *err;
};

enum stype { S_NULL, S_BOOL, S_INT, S_FLOAT, S_STRING };

yaml_node_t *cf_node_at(struct fctx *x, int idx);
int cf_line_of(const yaml_node_t *n);
int cf_col_of(const yaml_node_t *n);
const char *cf_sval(const yaml_node_t *n);
_printf_(4, 5) int cf_ferr(struct fctx *x, const yaml_node_t *n, const char *path, const char *fmt, ...);
void cf_warn_unknown(struct fctx *x, const yaml_node_t *key, const char *path);
bool cf_in_list(const char *s, const char *const *list);
enum stype cf_scalar_type(const yaml_node_t *n);
bool cf_is_null(const yaml_node_t *n);
int cf_type_err(struct fctx *x, const yaml_node_t *n, const char *path, const char *want);
int cf_get_string(struct fctx *x, const yaml_node_t *n, const char *path, const char **out);
int cf_get_bool(struct fctx *x, const yaml_node_t *n, const char *path, bool *out);
int cf_get_int(struct fctx *x, const yaml_node_t *n, const char *path, long long *out);
int cf_section_resources(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key, const char *path);
int cf_section_sharing(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key, const char *path);
