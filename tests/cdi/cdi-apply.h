/* cdi-apply: a CDI spec applied to a root filesystem the way a container runtime applies
 * it, without one (cdi-apply.c: the container; cdi-apply-spec.c: reading and merging the
 * edits). Shared types and the one way out on error. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/macro.h"

/* Exit statuses of cdi-apply itself; any other is the command's (126 and 127 as a shell
 * gives them: found but not runnable, not found). */
enum {
    EXIT_USAGE = 2,
    EXIT_REFUSED = 3, /* this host does not let us build a container (not root, no mount
                       * namespace, mount or mknod and its fallback refused) */
    EXIT_FAIL = 125,  /* the spec, the devices asked for, or a step that should have worked */
};

/* Bounds on what one run reads: every spec we write is far below them. */
#define MAX_SPEC_BYTES (4u << 20)
#define MAX_SPECS 8
#define MAX_DEVICES 64
#define MAX_ENV 1024
#define MAX_NODES 1024
#define MAX_MOUNTS 4096
#define MAX_HOOKS 64
#define MAX_ARGS 4096
#define MAX_GIDS 64
#define MAX_STR 4096 /* any one string: a path, an env entry, an argument */

struct node {
    char *path, *host_path; /* host_path may be NULL */
    char type;              /* 'c', 'u', 'b', 'p', or 0: from the host node */
    long long major, minor;
    long long mode; /* permission bits, -1: not given */
    long long uid, gid; /* -1: not given */
};

struct mnt {
    char *host, *ctr, *type; /* type may be NULL */
    char **opts;
    size_t n_opts;
    size_t seq; /* arrival order: the sort is stable */
};

enum hook_kind { HOOK_PRESTART, HOOK_CREATE_RUNTIME, HOOK_CREATE_CONTAINER, HOOK_START_CONTAINER };

struct hook {
    enum hook_kind kind;
    char *path;
    char **args, **env; /* NULL-terminated */
    long long timeout;  /* seconds, 0: our cap */
};

/* The edits of every device asked for, merged as the CDI library merges them. */
struct edits {
    char **env; /* NAME=VALUE; the base env first, then the specs' (replacing by name) */
    size_t n_env;
    struct node *nodes;
    size_t n_nodes;
    struct mnt *mounts;
    size_t n_mounts;
    struct hook *hooks;
    size_t n_hooks;
    gid_t gids[MAX_GIDS];
    size_t n_gids;
};

/* One line "cdi-apply: <what>" on stderr, then exit(status). */
_noreturn_ _printf_(2, 3) void die(int status, const char *fmt, ...);
/* The same for a failed call: "<what>: <strerror(err)>", exit 3 when err is what a host
 * that refuses containers answers (refused()), else 125. */
_noreturn_ _printf_(2, 3) void die_sys(int err, const char *fmt, ...);
bool refused(int err);
/* With -v: one line "cdi-apply| <what>" on stderr. */
extern bool verbose;
_printf_(1, 2) void note(const char *fmt, ...);
void *xalloc(size_t n);
char *xdup(const char *s);
_printf_(1, 2) char *strf(const char *fmt, ...);
struct timespec;
long long ms_since(const struct timespec *t0);

/* Add NAME=VALUE to the env, replacing a variable of that name where it stands. */
void env_set(struct edits *e, const char *entry);
/* Read the spec files, find each kind=name in them and merge the edits into e: a spec's
 * top-level containerEdits once, before its first device's, then each device's, in the
 * order asked; mounts then sorted by depth. Dies with the spec and field named. */
void edits_load(struct edits *e, char *const *specs, size_t n_specs, char *const *ids,
                size_t n_ids);

/* <bundle>/config.json as NVIDIA's hooks read it: root.path (absolute) and the process. */
void write_config(const char *bundle, const char *rootfs, const struct edits *e, char **argv);
/* The hooks of kinds from..to, in that order and each kind in spec order; the OCI state
 * names bundle, and each runs in cwd. Dies on the first that fails. */
void run_hooks(const struct edits *e, enum hook_kind from, enum hook_kind to,
               const char *bundle, const char *cwd);
