/* SHA-256 (see digest.h). */
#include <mbedtls/sha256.h>
#include <mbedtls/version.h>
#include <stdio.h>

#include "core/digest.h"

void digest_sha256(const void *data, size_t len, unsigned char out[32])
{
    /* mbedtls 2 names it _ret; 3 dropped the suffix */
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
    mbedtls_sha256(data, len, out, 0);
#else
    mbedtls_sha256_ret(data, len, out, 0);
#endif
}

void digest_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char d[32];
    digest_sha256(data, len, d);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}
