/* The API client's TLS configuration, made once per client (kube_conn_init): mbedtls 2.28
 * as a TLS 1.2 client with ALPN h2, the server verified against the kubeconfig's (or the
 * service account's) CA unless insecure-skip-tls-verify, a client certificate when
 * configured, the key exchange curves in the order below, a DRBG seeded from the kernel.
 * The connection that uses it is kube-conn.c's. */
#include <mbedtls/ecp.h>
#include <mbedtls/error.h>
#include <stdio.h>
#include <sys/random.h>

#include "core/error.h"
#include "core/macro.h"
#include "kube/kube-internal.h"

static const char *alpn_list[] = { "h2", NULL };

static int tls_error(struct error *err, int code, const char *what)
{
    char buf[160];
    mbedtls_strerror(code, buf, sizeof(buf));
    return error_set(err, -EINVAL, "%s: %s", what, buf);
}

/* The DRBG's seed comes straight from the kernel's CSPRNG. mbedtls_entropy_func would
 * add Debian's HAVEGE source (MBEDTLS_HAVEGE_C) to the same getrandom() source: a
 * timing loop over a 37 KiB table, filled at init and resident for the process's life,
 * and no better a seed on a VM. getrandom blocks only before the kernel's pool is
 * initialised at boot. */
static int kernel_entropy(void *unused, unsigned char *buf, size_t len)
{
    (void)unused;
    while (len > 0) {
        ssize_t n = getrandom(buf, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return MBEDTLS_ERR_CTR_DRBG_ENTROPY_SOURCE_FAILED;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* X25519 first, then mbedtls's list (secp521r1 first: a Go server over TLS 1.2 took it, ~10
 * ms of CPU a handshake each side); all stay, as the list bounds the server's cert too. */
static const mbedtls_ecp_group_id *key_exchange_curves(void)
{
    static mbedtls_ecp_group_id list[32];
    if (list[0] != MBEDTLS_ECP_DP_NONE)
        return list;
    size_t n = 0;
    const mbedtls_ecp_group_id *all = mbedtls_ecp_grp_id_list();
    for (size_t i = 0; all[i] != MBEDTLS_ECP_DP_NONE; i++)
        if (all[i] == MBEDTLS_ECP_DP_CURVE25519)
            list[n++] = MBEDTLS_ECP_DP_CURVE25519;
    for (size_t i = 0; all[i] != MBEDTLS_ECP_DP_NONE && n + 1 < ELEMENTSOF(list); i++)
        if (all[i] != MBEDTLS_ECP_DP_CURVE25519)
            list[n++] = all[i];
    list[n] = MBEDTLS_ECP_DP_NONE;
    return list;
}

int kube_conn_init(struct kube *k, struct error *err)
{
    struct kube_conn *c = &k->conn;
    struct kube_creds *cr = &k->creds;
    c->fd = -1;
    if (!cr->tls)
        return 0;
    mbedtls_ssl_init(&c->ssl);
    mbedtls_ssl_config_init(&c->conf);
    mbedtls_x509_crt_init(&c->ca);
    mbedtls_x509_crt_init(&c->cert);
    mbedtls_pk_init(&c->key);
    mbedtls_ctr_drbg_init(&c->drbg);
    c->tls_ready = true;

    static const unsigned char pers[] = "gpu-device-plugin kube";
    int r = mbedtls_ctr_drbg_seed(&c->drbg, kernel_entropy, NULL, pers, sizeof(pers));
    if (r != 0)
        return tls_error(err, r, "seeding the TLS random generator");
    r = mbedtls_ssl_config_defaults(&c->conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT);
    if (r != 0)
        return tls_error(err, r, "TLS configuration");
    /* HTTP/2 over TLS needs 1.2 or later; mbedtls 2.28 speaks 1.2. */
    mbedtls_ssl_conf_min_version(&c->conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_rng(&c->conf, mbedtls_ctr_drbg_random, &c->drbg);
    mbedtls_ssl_conf_curves(&c->conf, key_exchange_curves());
    if ((r = mbedtls_ssl_conf_alpn_protocols(&c->conf, alpn_list)) != 0)
        return tls_error(err, r, "TLS ALPN");
    if (cr->insecure) {
        mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_NONE);
    } else {
        r = mbedtls_x509_crt_parse(&c->ca, (const unsigned char *)cr->ca_pem, cr->ca_len);
        if (r != 0)
            return r < 0 ? tls_error(err, r, "certificate authority")
                         : error_set(err, -EINVAL, "certificate authority: %d of its certificates could not be parsed", r);
        mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
        mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    }
    if (cr->cert_pem) {
        r = mbedtls_x509_crt_parse(&c->cert, (const unsigned char *)cr->cert_pem, cr->cert_len);
        if (r != 0)
            return r < 0 ? tls_error(err, r, "client certificate")
                         : error_set(err, -EINVAL, "client certificate: not parsable");
        r = mbedtls_pk_parse_key(&c->key, (const unsigned char *)cr->key_pem, cr->key_len, NULL, 0);
        if (r != 0)
            return tls_error(err, r, "client key");
        if ((r = mbedtls_ssl_conf_own_cert(&c->conf, &c->cert, &c->key)) != 0)
            return tls_error(err, r, "client certificate and key");
    }
    if ((r = mbedtls_ssl_setup(&c->ssl, &c->conf)) != 0)
        return tls_error(err, r, "TLS setup");
    return 0;
}
