/* A caller-owned error object: filled only on failure, one line, context wrapped on
 * the way up. See macro.h for the whole error contract. */
#pragma once

#include "macro.h"

struct error {
    int code;        /* -errno-style code, or a module's own negative code */
    char msg[512];   /* one line, no trailing newline */
    /* What a person should check, for failures whose cause lies outside the plugin (a
     * driver not mounted, a wrong kubelet path): static lines, NULL-terminated; NULL:
     * none. Set by the layer that knows the likely causes, logged after msg by the top
     * (log_hints, core/log.h); error_set() clears it, error_prefix() keeps it. */
    const char *const *hints;
};

/* Set err (if non-NULL; hints cleared) and return code (always negative). */
_printf_(3, 4) int error_set(struct error *err, int code, const char *fmt, ...);
/* Prepend "<prefix>: " to err->msg. Returns err->code. */
_printf_(2, 3) int error_prefix(struct error *err, const char *fmt, ...);
