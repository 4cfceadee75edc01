/* RFC 1123 names as Kubernetes checks them (apimachinery's IsDNS1123Label and
 * IsDNS1123Subdomain): the one check behind every name we take from a flag, a file or a
 * peer and put into a request path, a field selector, a CDI name or a ResourceSlice. Pure:
 * no allocation, no locale (bytes outside [a-z0-9.-] are refused whatever the locale). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define DNS_LABEL_MAX 63      /* IsDNS1123Label: a namespace, a device or request name */
#define DNS_SUBDOMAIN_MAX 253 /* IsDNS1123Subdomain: a Node's or a claim's name */

/* The shapes, without the length bounds (callers that report "too long" on its own, as
 * the API server does, check those apart). A label: 1 or more of [a-z0-9-], a letter or
 * digit first and last. A subdomain: labels joined by single dots. */
bool dns_label_shape(const char *s, size_t len);
bool dns_subdomain_shape(const char *s, size_t len);

/* The whole checks: shape and length (label 1..63, subdomain 1..253). NULL: false. */
bool dns_label_valid(const char *s);
bool dns_subdomain_valid(const char *s);
/* A subdomain given by length (a prefix of a longer string, e.g. "cdi.k8s.io" of
 * "cdi.k8s.io/"). */
bool dns_subdomain_valid_n(const char *s, size_t len);
