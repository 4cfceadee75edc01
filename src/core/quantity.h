/* Kubernetes resource quantities ("10Gi", "1.5G", "500m", "1e3", "8589934592"), as
 * apimachinery's resource.ParseQuantity reads them, for the values that reach us in API
 * objects (a claim's consumedCapacity, an opaque config's memory limits). */
#pragma once

#include <stdint.h>

/* The quantity's value as a whole number, rounded up as resource.Quantity.Value() rounds
 * ("1500m" -> 2, "0.5Ki" -> 512). 0, or -EINVAL for what ParseQuantity refuses (empty,
 * a bad suffix, "1.2.3", "Gi"), -ERANGE past int64. Negative values are kept. */
int quantity_parse(const char *s, int64_t *out);
