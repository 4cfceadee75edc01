/* Asks a running plugin for the live health of its devices (DP_STATUS_METHOD on its
 * socket). Synchronous: runs a private loop until the answer or the timeout. */
#pragma once

#include <jansson.h>

#include "core/error.h"

/* *out: {"resource", "pid", "streams", "devices": [{"id", "health", "reason"}]}. Returns 0
 * or -errno (-ENOENT: no socket, i.e. no plugin serving it). */
int status_query(const char *socket_path, unsigned timeout_ms, json_t **out, struct error *err);
