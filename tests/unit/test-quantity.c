/* core/quantity: what apimachinery's ParseQuantity accepts and Value() answers (rounded
 * up), and what it refuses. */
#include <errno.h>

#include "core/quantity.h"
#include "tests/common/check.h"

int test_failures;

int main(void)
{
    static const struct {
        const char *s;
        int r;
        int64_t v;
    } cases[] = {
        { "0", 0, 0 },          { "1", 0, 1 },           { "8589934592", 0, 8589934592LL },
        { "10Gi", 0, 10LL << 30 }, { "81559Mi", 0, 81559LL << 20 }, { "1Ki", 0, 1024 },
        { "1.5Gi", 0, 3LL << 29 }, { "0.5Ki", 0, 512 },  { "1k", 0, 1000 },
        { "1M", 0, 1000000 },   { "1.5G", 0, 1500000000 }, { "1500m", 0, 2 },
        { "1m", 0, 1 },          { "100m", 0, 1 },        { "1n", 0, 1 },
        { "1e3", 0, 1000 },      { "1E3", 0, 1000 },      { "2.5e2", 0, 250 },
        { "1e-3", 0, 1 },        { "1e-200", 0, 1 },      { "+5", 0, 5 },
        { "-1", 0, -1 },         { "-1500m", 0, -1 },     { ".5Ki", 0, 512 },
        { "5.", 0, 5 },          { "25", 0, 25 },         { "9223372036854775807", 0, INT64_MAX },
        { "8Ei", -ERANGE, 0 },   { "9223372036854775808", -ERANGE, 0 }, { "1e19", -ERANGE, 0 },
        { "", -EINVAL, 0 },      { "Gi", -EINVAL, 0 },    { "1.2.3", -EINVAL, 0 },
        { "1gi", -EINVAL, 0 },   { "1 Gi", -EINVAL, 0 },  { "1Gib", -EINVAL, 0 },
        { "1e", -EINVAL, 0 },    { "1e3Gi", -EINVAL, 0 }, { "0x10", -EINVAL, 0 },
        { ".", -EINVAL, 0 },     { "-", -EINVAL, 0 },     { "1K", -EINVAL, 0 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = 0;
        int r = quantity_parse(cases[i].s, &v);
        if (r != cases[i].r || (r == 0 && v != cases[i].v)) {
            fprintf(stderr, "quantity_parse(\"%s\") = %d, %lld; want %d, %lld\n", cases[i].s, r,
                    (long long)v, cases[i].r, (long long)cases[i].v);
            test_failures++;
        }
    }
    int64_t v;
    CHECK(quantity_parse(NULL, &v) == -EINVAL);
    return test_failures ? 1 : 0;
}
