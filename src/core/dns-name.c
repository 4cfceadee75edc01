/* RFC 1123 labels and subdomains (dns-name.h). Written once: five hand-rolled copies of
 * these loops used to disagree on edge cases. */
#include <string.h>

#include "core/dns-name.h"

static bool lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool dns_label_shape(const char *s, size_t len)
{
    if (!s || len == 0 || !lower_alnum(s[0]) || !lower_alnum(s[len - 1]))
        return false;
    for (size_t i = 1; i + 1 < len; i++)
        if (!lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

bool dns_subdomain_shape(const char *s, size_t len)
{
    if (!s || len == 0)
        return false;
    const char *end = s + len;
    for (const char *p = s;;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        if (!dns_label_shape(p, n))
            return false;
        if (!dot)
            return true;
        p = dot + 1;
    }
}

bool dns_label_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n <= DNS_LABEL_MAX && dns_label_shape(s, n);
}

bool dns_subdomain_valid_n(const char *s, size_t len)
{
    return len <= DNS_SUBDOMAIN_MAX && dns_subdomain_shape(s, len);
}

bool dns_subdomain_valid(const char *s)
{
    return s && dns_subdomain_valid_n(s, strlen(s));
}
