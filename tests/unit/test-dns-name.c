/* core/dns-name: Kubernetes' IsDNS1123Label and IsDNS1123Subdomain as one table, with the
 * edges each of the former copies had to get right (a dash beside a dot, empty labels,
 * the length bounds counted in bytes, bytes outside ASCII). */
#include <string.h>

#include "core/dns-name.h"
#include "tests/common/check.h"

int test_failures;

struct dns_case {
    const char *s;
    bool label, subdomain;
};

int main(void)
{
    char l63[64], l64[65], s253[254], s254[255];
    memset(l63, 'a', 63), l63[63] = 0;
    memset(l64, 'a', 64), l64[64] = 0;
    /* 253 bytes of labels of 63 joined by dots, the last one shorter */
    memset(s253, 'a', 253), s253[253] = 0;
    s253[63] = s253[127] = s253[191] = '.';
    memcpy(s254, s253, 253), s254[253] = 'a', s254[254] = 0;

    const struct dns_case cases[] = {
        { "a", true, true },
        { "0", true, true },
        { "n1", true, true },
        { "a-b", true, true },
        { "a--b", true, true },
        { "0-0", true, true },
        { l63, true, true },
        { l64, false, true },   /* a subdomain's labels are bounded only by the whole */
        { s253, false, true },
        { s254, false, false },
        { "node-1.example.com", false, true },
        { "a.b", false, true },
        { "", false, false },
        { "-a", false, false },
        { "a-", false, false },
        { "-", false, false },
        { "A", false, false },
        { "nodE", false, false },
        { "a_b", false, false },
        { "a b", false, false },
        { "a/b", false, false },
        { "a\n", false, false },
        { "n\xc3\xb6" "de", false, false },
        { ".", false, false },
        { ".a", false, false },
        { "a.", false, false },
        { "a..b", false, false },
        { "a.-b", false, false },  /* a label may not start with '-' after a dot */
        { "a-.b", false, false },  /* nor end with one before it */
        { "a.b-", false, false },
        { "..", false, false },
        { "n1/../x", false, false },
        { "n1?watch=1", false, false },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        const struct dns_case *c = &cases[i];
        if (dns_label_valid(c->s) != c->label || dns_subdomain_valid(c->s) != c->subdomain) {
            fprintf(stderr, "case %zu \"%.40s\": label %d subdomain %d, want %d %d\n", i, c->s,
                    dns_label_valid(c->s), dns_subdomain_valid(c->s), c->label, c->subdomain);
            test_failures++;
        }
        /* the shapes are the checks without the bounds */
        size_t n = strlen(c->s);
        CHECK(dns_label_shape(c->s, n) == (c->label || (n > 63 && !strchr(c->s, '.') &&
                                                           dns_subdomain_valid(c->s))));
        CHECK(dns_subdomain_shape(c->s, n) == (c->subdomain || n > 253));
    }
    CHECK(!dns_label_valid(NULL) && !dns_subdomain_valid(NULL));
    /* by length: the prefix of "cdi.k8s.io/" (the CDI annotation prefix), a NUL inside */
    CHECK(dns_subdomain_valid_n("cdi.k8s.io/", 10));
    CHECK(!dns_subdomain_valid_n("cdi.k8s.io/", 11));
    CHECK(!dns_subdomain_valid_n("a\0b", 3));
    CHECK(!dns_subdomain_valid_n("a", 0));
    return test_failures ? 1 : 0;
}
