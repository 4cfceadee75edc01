/* PCI bus ids as NVML writes them ("00000000:3B:00.0") in the form sysfs and the
 * Kubernetes pciBusID attribute use ("0000:3b:00.0"): pure string work, apart from the
 * NVML door (nvml.c) so that it is tested and fuzzed without a library. */
#include <stdio.h>
#include <string.h>

#include "nvml.h"

/* Parse 1..max_digits hex digits ending at a character in `ends` (or the string's end
 * when ends is ""). Strict: no "0x" prefix, no sign, no spaces. */
static const char *parse_hex(const char *s, unsigned max_digits, unsigned *out, const char *ends)
{
    unsigned v = 0, n = 0;
    for (; n < max_digits + 1 && s[n] && strchr("0123456789abcdefABCDEF", s[n]); n++) {
        char c = s[n];
        v = v * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (n == 0 || n > max_digits)
        return NULL;
    if (*ends ? !(s[n] && strchr(ends, s[n])) : s[n] != 0)
        return NULL;
    *out = v;
    return s + n;
}

int nvml_bus_id_normalize(const char *in, char *out, size_t len)
{
    unsigned domain = 0, bus, dev, fn;
    /* "domain:bus:device.function" (NVML pads the domain to 8 digits) or "bus:device.function" */
    const char *p = parse_hex(in, 8, &domain, ":");
    const char *q = p ? parse_hex(p + 1, 2, &bus, ":") : NULL;
    if (!q) {
        domain = 0;
        q = parse_hex(in, 2, &bus, ":");
        if (!q)
            return -EINVAL;
        q = parse_hex(q + 1, 2, &dev, ".");
    } else {
        q = parse_hex(q + 1, 2, &dev, ".");
    }
    if (!q || !parse_hex(q + 1, 1, &fn, ""))
        return -EINVAL;
    if (domain > 0xffff || dev > 0x1f || fn > 7)
        return -EINVAL;
    int n = snprintf(out, len, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
    return n < 0 || (size_t)n >= len ? -ENOBUFS : 0;
}
