/* Per-node configuration: which named config of --config-dir applies, given the value
 * of the node label (NVIDIA's config-manager semantics, cmd/config-manager/main.go:
 * a label names a file; without one, --config-default; without that, the fallback
 * strategies in order: "named" = the file called "default", "single" = the only file,
 * "empty" = no config file).
 *
 * One deliberate difference: a label naming a config that does not exist is reported
 * (note) and then treated like an absent label, where config-manager exits (and its
 * pod restarts until someone fixes the label); the issue asks for the default then.
 *
 * Pure apart from reading the directory. No logging: notes and errors are returned. */
#pragma once

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>

struct error;

/* Bound of one config file (a ConfigMap holds 1 MiB in all); the directory itself may
 * hold any number of files. */
#define CLUSTER_SELECT_MAX_BYTES (1024 * 1024)

struct cluster_selection {
    char *name;   /* the config name; NULL for the empty config */
    char *path;   /* <dir>/<name>; NULL for the empty config */
    char *how;    /* "node label", "default", "fallback named", "fallback single",
                   * "fallback empty" (static strings copied) */
    char *note;   /* NULL, or why the label was not used ("config \"x\" named by node
                   * label L does not exist in DIR") */
};

/* How many config files d (opened from dir, named in errors) holds: regular files
 * (symlinks followed, as a ConfigMap mount's entries are symlinks into ..data), names not
 * starting with ".." (the mount's own machinery). With exactly one, *single_out is its
 * name (to free), else NULL. Keeps nothing per file. Returns the count or -errno. */
int cluster_select_count(DIR *d, const char *dir, char **single_out, struct error *err);

/* label: the label's value, NULL or "" when absent. Returns 0 with *out filled, or
 * -ENOENT / -EINVAL with err saying which rule failed (config-manager's messages). */
int cluster_select_config(const char *dir, const char *label, const char *label_key,
                          const char *default_name, char *const *fallbacks,
                          struct cluster_selection *out, struct error *err);
void cluster_selection_clear(struct cluster_selection *s);

/* How a selection came about, in the words serve's log, the Node annotation and `list`
 * all use: "node label <label_key>=<name>" for a label's pick, else s->how ("default",
 * "fallback named", ...). The note is not part of it. Returns malloc'd. */
char *cluster_selection_source(const struct cluster_selection *s, const char *label_key);
/* The one-line description: "<name> (<source>)", or "<name> (<source>; <note>)" when
 * with_note and there is a note; the empty config is named "(empty config)". Returns
 * malloc'd. */
char *cluster_selection_describe(const struct cluster_selection *s, const char *label_key,
                                 bool with_note);
