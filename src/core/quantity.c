/* Kubernetes quantities (see quantity.h): <sign><digits>[.<digits>][<suffix>], the suffix
 * a binary SI one (Ki..Ei), a decimal SI one (n u m "" k M G T P E) or a decimal exponent
 * (e/E followed by an integer). Exact: mantissa and scale in integers, never a double. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "core/quantity.h"

struct suffix {
    const char *s;
    int base, exp; /* value = mantissa * base^exp */
};

static const struct suffix suffixes[] = {
    { "Ki", 2, 10 }, { "Mi", 2, 20 }, { "Gi", 2, 30 }, { "Ti", 2, 40 }, { "Pi", 2, 50 },
    { "Ei", 2, 60 }, { "n", 10, -9 }, { "u", 10, -6 }, { "m", 10, -3 }, { "k", 10, 3 },
    { "M", 10, 6 },  { "G", 10, 9 },  { "T", 10, 12 }, { "P", 10, 15 }, { "E", 10, 18 },
};

/* a * b into *out, or false past int64's magnitude */
static bool mul(unsigned __int128 a, unsigned __int128 b, unsigned __int128 *out)
{
    const unsigned __int128 max = (unsigned __int128)INT64_MAX + 1;
    if (a && b > max / a)
        return false;
    *out = a * b;
    return *out <= max;
}

int quantity_parse(const char *s, int64_t *out)
{
    bool neg = false;
    if (!s || !*s)
        return -EINVAL;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    /* the number: digits, at most one point, at least one digit */
    unsigned __int128 mant = 0;
    int frac = 0, digits = 0;
    bool point = false;
    for (; (*s >= '0' && *s <= '9') || *s == '.'; s++) {
        if (*s == '.') {
            if (point)
                return -EINVAL;
            point = true;
            continue;
        }
        digits++;
        if (mant > (unsigned __int128)1 << 100)
            return -ERANGE; /* more digits than any int64 quantity needs */
        mant = mant * 10 + (unsigned)(*s - '0');
        frac += point;
    }
    if (!digits)
        return -EINVAL;
    int base = 10, exp = 0;
    /* "E" alone is exa, "Ei" exbi; e/E followed by a number is an exponent */
    if ((*s == 'e' || *s == 'E') && (s[1] == '+' || s[1] == '-' || (s[1] >= '0' && s[1] <= '9'))) {
        const char *e = s + 1;
        bool eneg = false;
        if (*e == '+' || *e == '-')
            eneg = *e++ == '-';
        if (!(*e >= '0' && *e <= '9'))
            return -EINVAL;
        for (; *e >= '0' && *e <= '9'; e++) {
            exp = exp * 10 + (*e - '0');
            if (exp > 1000)
                return -ERANGE;
        }
        if (*e)
            return -EINVAL;
        exp = eneg ? -exp : exp;
    } else if (*s) {
        const struct suffix *f = NULL;
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]) && !f; i++)
            if (strcmp(s, suffixes[i].s) == 0)
                f = &suffixes[i];
        if (!f)
            return -EINVAL;
        base = f->base;
        exp = f->exp;
    }
    /* value = mant * base^exp / 10^frac, rounded up */
    unsigned __int128 num = mant, den = 1;
    for (int i = 0; i < frac; i++)
        if (!mul(den, 10, &den))
            return -ERANGE;
    for (int i = 0; i < (exp < 0 ? -exp : exp); i++) {
        if (exp > 0 && !mul(num, (unsigned)base, &num)) {
            if (num == 0)
                break;
            return -ERANGE;
        }
        if (exp < 0 && !mul(den, (unsigned)base, &den)) {
            /* a tiny fraction: rounded up it is 1 (0 when negative or zero) */
            *out = num && !neg ? 1 : 0;
            return 0;
        }
    }
    unsigned __int128 v = num / den + (num % den != 0);
    if (neg) {
        /* Value() rounds towards +inf: -1.5 -> -1 */
        v = num / den;
        if (v > (unsigned __int128)INT64_MAX + 1)
            return -ERANGE;
        *out = v == (unsigned __int128)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
        return 0;
    }
    if (v > INT64_MAX)
        return -ERANGE;
    *out = (int64_t)v;
    return 0;
}
