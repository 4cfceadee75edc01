/* Addresses of the API server: a numeric host and port made into a sockaddr without the
 * resolver, and whether the server name is an IP address (which TLS then checks against
 * the certificate's IP subjectAltNames instead of DNS names). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

#include "kube/kube-internal.h"

/* A numeric host (in-cluster, most kubeconfigs) needs no resolver: getaddrinfo() would
 * still run glibc's resolver code for it and map its pages into the process. -1 when
 * host is a name (or port is not a number: getaddrinfo then says why). */
int kube_numeric_address(const char *host, const char *port, struct sockaddr_storage *ss,
                           socklen_t *len)
{
    char *end;
    errno = 0;
    unsigned long p = strtoul(port, &end, 10);
    if (errno != 0 || end == port || *end != '\0' || p > 65535)
        return -1;
    *ss = (struct sockaddr_storage){ 0 };
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)p);
        *len = sizeof(*in);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)p);
        *len = sizeof(*in6);
        return 0;
    }
    return -1;
}

bool kube_is_ip(const char *s)
{
    unsigned char b[16];
    return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}
