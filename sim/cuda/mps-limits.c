/* MPS limit syntax (mps.h), shared by the control daemon stand-in and libcuda. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mps.h"

int mps_parse_size(const char *s, bool unit_optional, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    case 0:
        if (!unit_optional)
            return -1;
        *out = v;
        return 0;
    default: return -1;
    }
    end++;
    if (toupper((unsigned char)*end) == 'B')
        end++;
    if (*end || v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

int mps_parse_limits(const char *s, struct mps_limit *out, int max)
{
    if (!s)
        return -1;
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
        return -1;
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok))
            tok++;
        if (n == max)
            return -1;
        char *eq = strchr(tok, '=');
        const char *size = tok;
        out[n].key[0] = 0;
        if (eq) {
            *eq = 0;
            if (!*tok || strlen(tok) >= MPS_KEY_LEN)
                return -1;
            snprintf(out[n].key, MPS_KEY_LEN, "%s", tok);
            size = eq + 1;
        }
        if (mps_parse_size(size, true, &out[n].bytes) < 0)
            return -1;
        n++;
    }
    /* One bare size is for every device; a bare size among keyed ones is malformed. */
    for (int i = 0; n > 1 && i < n; i++)
        if (!out[i].key[0])
            return -1;
    return n ? n : -1;
}

int mps_parse_percent(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= 0 && v <= 100))
        return -1;
    *out = v;
    return 0;
}

void mps_pipe_path(char *buf, size_t len, const char *name)
{
    const char *dir = getenv(MPS_PIPE_ENV);
    snprintf(buf, len, "%s/%s", dir && *dir ? dir : MPS_PIPE_DEFAULT, name);
}
