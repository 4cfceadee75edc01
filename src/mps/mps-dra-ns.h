/* MPS v3 namespaces of a GPU share daemon (`mps-control-daemon --dra`, a desired state
 * with "protocol": 3; docs/dra.md, "What bounds a share"). The daemon is started with
 * `-p 3` and holds one server, MPS_DRA_SERVER, allowed the daemon's GPUs; each share the
 * plugin desires (<id>/ns/<ns>.json, src/dra/dra-mps.h) is a namespace of it:
 *   namespace create <ns> --server=shares
 *   namespace set <ns> --server=shares --pinned-memory-limit=<n>M --active-thread-percentage=<p>
 *   namespace list <ns> --server=shares --format=csv,noheader   (read back: both limits)
 * and its socket <id>/pipe/shares/<ns>/control looked for, then <id>/ns/<ns>.ready written
 * (the text of its .json): the plugin's Prepare waits for it. A namespace whose .json went
 * is deleted (--force: its share is unprepared, a client left must not go on) and its
 * .ready removed. What fails is written to <ns>.failed, which ends the plugin's wait with
 * that reason. The real tool reports some failures only by what it lists afterwards
 * (../shared/reference/dra/mps-v3-memory-partitioning.md §3.2, §3.3): a server whose
 * device is missing leaves `server list`, a client without a socket runs unlimited; both
 * are checked rather than trusted. */
#pragma once

#include <stddef.h>

#include "core/error.h"

#define MPS_DRA_SERVER "shares"

/* One control command to the daemon (its answer in out, one line): 0 or -errno, err. */
typedef int (*mps_dra_send_fn)(void *ctx, const char *command, char *out, size_t out_len,
                               struct error *err);

/* Right after the daemon's start: the server made, allowed devices (comma-separated
 * UUIDs), and checked to be listed. 0 or -errno, err. */
int mps_dra_ns_server(const char *devices, mps_dra_send_fn send, void *ctx, struct error *err);
/* Before the daemon of directory dir starts (again): our marks of the namespaces of the
 * daemon before it removed (a new daemon has none; each is made again from its .json). */
void mps_dra_ns_forget(const char *dir);
/* The namespaces of the running daemon of directory dir (id) made and deleted as its
 * ns/ directory desires. 0, or -errno after logging each failure. */
int mps_dra_ns_reconcile(const char *dir, const char *id, mps_dra_send_fn send, void *ctx);
