/* Shared by the two halves of the health policy: health.c (classes, state machine)
 * and health-config.c (loading). Not for other modules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/health.h"

/* The class of the built-in table, or hc->default_class for Xids without a row. */
enum health_class health_builtin_class(const struct health_config *hc, uint64_t xid);
/* "ignore" / "recover" / "lost" / "never", case-insensitive; -EINVAL otherwise. */
int health_class_from_name(const char *s, enum health_class *out);
/* The i-th Xid of the built-in table; false past its end. */
bool health_builtin_xid(size_t i, uint64_t *xid);
