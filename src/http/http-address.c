/* The listener's address syntax: "host:port", "[v6addr]:port" or ":port" into a socket
 * address (http.h has the contract). IP literals and "localhost" only: resolving a name
 * would block the loop on DNS at start. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>

#include "core/error.h"
#include "http/http.h"

static int parse_port(const char *s, unsigned *port)
{
    char *end;
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 5)
        return -EINVAL;
    unsigned long v = strtoul(s, &end, 10);
    if (v > 65535)
        return -EINVAL;
    *port = (unsigned)v;
    return 0;
}

int http_address_parse(const char *address, struct sockaddr_storage *ss, unsigned *ss_len,
                       struct error *err)
{
    char host[64];
    const char *port_text;
    unsigned port;

    memset(ss, 0, sizeof(*ss));
    if (address[0] == '[') {
        const char *close = strchr(address, ']');
        if (!close || close[1] != ':' || (size_t)(close - address - 1) >= sizeof(host))
            return error_set(err, -EINVAL, "want [IPv6 address]:port");
        memcpy(host, address + 1, (size_t)(close - address - 1));
        host[close - address - 1] = '\0';
        port_text = close + 2;
    } else {
        const char *colon = strrchr(address, ':');
        if (!colon)
            return error_set(err, -EINVAL, "no port: want host:port or :port");
        size_t hlen = (size_t)(colon - address);
        if (hlen >= sizeof(host) || memchr(address, ':', hlen))
            return error_set(err, -EINVAL, "want host:port, [IPv6 address]:port or :port");
        memcpy(host, address, (size_t)(colon - address));
        host[colon - address] = '\0';
        port_text = colon + 1;
    }
    if (parse_port(port_text, &port) < 0)
        return error_set(err, -EINVAL, "invalid port \"%s\": want 0..65535", port_text);

    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (streq(host, "localhost"))
        snprintf(host, sizeof(host), "127.0.0.1");
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        *ss_len = sizeof(*in4);
    } else if (!*host || inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        /* "" is every address: IPv6 any, which also accepts IPv4 (v6only off) */
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        if (!*host)
            in6->sin6_addr = in6addr_any;
        *ss_len = sizeof(*in6);
    } else {
        return error_set(err, -EINVAL, "\"%s\" is not an IP address (or localhost)", host);
    }
    return 0;
}
