/* SHA-256 through mbedtls (the API client's TLS library, linked already): one home for the
 * digests we take (an MPS daemon's id, the compared content of a ResourceSlice). */
#pragma once

#include <stddef.h>

void digest_sha256(const void *data, size_t len, unsigned char out[32]);
/* The digest as 64 lower-case hex digits and a NUL. */
void digest_sha256_hex(const void *data, size_t len, char out[65]);
