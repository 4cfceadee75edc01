/* Rules that need only the configuration: resource names, sharing device
 * references, MPS constraints (reference §3.3, §3.4, §3.6). Rules that need the
 * hardware (MIG devices with MPS, too many devices requested) are checked where the
 * inventory is known (policy/resources.c). */
#include <ctype.h>

#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/dns-name.h"

#define RESOURCE_PREFIX "nvidia.com/"
#define RESOURCE_NAME_MAX 63

char *config_resource_name(const char *name, struct error *err)
{
    _cleanup_free_ char *full =
        startswith(name, RESOURCE_PREFIX) ? xstrdup(name) : xasprintf(RESOURCE_PREFIX "%s", name);
    size_t len = strlen(full);
    if (len > RESOURCE_NAME_MAX) {
        error_set(err, -EINVAL,
                  "invalid resource name \"%s\": must be at most %d characters, got %zu",
                  full, RESOURCE_NAME_MAX, len);
        return NULL;
    }
    const char *base = full + strlen(RESOURCE_PREFIX);
    if (!dns_subdomain_valid(base)) {
        error_set(err, -EINVAL,
                  "invalid resource name \"%s\": \"%s\" must be a DNS subdomain (lowercase "
                  "letters, digits, '-' and '.', starting and ending with a letter or digit)",
                  full, base);
        return NULL;
    }
    return TAKE_PTR(full);
}

static bool all_digits(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* RFC 4122 text form: 8-4-4-4-12 hex digits. */
static bool is_uuid(const char *s, size_t len)
{
    static const int groups[] = { 8, 4, 4, 4, 12 };
    size_t off = 0;
    for (size_t g = 0; g < ELEMENTSOF(groups); g++) {
        if (g) {
            if (off >= len || s[off] != '-')
                return false;
            off++;
        }
        for (int k = 0; k < groups[g]; k++, off++)
            if (off >= len || !isxdigit((unsigned char)s[off]))
                return false;
    }
    return off == len;
}

int config_check_device_ref(const char *ref, struct error *err)
{
    size_t len = strlen(ref);
    const char *colon = strchr(ref, ':');
    if (all_digits(ref, len))
        return 0;
    if (colon && all_digits(ref, (size_t)(colon - ref)) &&
        all_digits(colon + 1, strlen(colon + 1)))
        return 0;
    if (startswith(ref, "GPU-") && is_uuid(ref + 4, len - 4))
        return 0;
    if (startswith(ref, "MIG-GPU-")) {
        /* legacy MIG-GPU-<uuid>/<gi>/<ci> */
        const char *s1 = strchr(ref + 8, '/');
        const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
        if (s2 && is_uuid(ref + 8, (size_t)(s1 - ref - 8)) &&
            all_digits(s1 + 1, (size_t)(s2 - s1 - 1)) && all_digits(s2 + 1, strlen(s2 + 1)))
            return 0;
    } else if (startswith(ref, "MIG-") && is_uuid(ref + 4, len - 4)) {
        return 0;
    }
    return error_set(err, -EINVAL,
                     "invalid device reference \"%s\": must be a GPU index (\"0\"), a MIG "
                     "index (\"0:1\"), a GPU UUID (\"GPU-<uuid>\") or a MIG UUID "
                     "(\"MIG-<uuid>\", \"MIG-GPU-<uuid>/<gi>/<ci>\")",
                     ref);
}

static int mps_error(const struct config_marks *m, const char *file, struct error *err,
                     const char *msg)
{
    if (m && m->mps_line > 0)
        return error_set(err, -EINVAL, "%s:%d:%d: sharing.mps: %s", file, m->mps_line,
                         m->mps_col, msg);
    return error_set(err, -EINVAL, "sharing.mps: %s", msg);
}

int config_validate(struct config *c, const struct config_marks *marks,
                    struct error *err)
{
    const char *file = c->config_file ? c->config_file : "";
    if (c->mps.present) {
        if (c->mig_strategy == MIG_STRATEGY_MIXED)
            return mps_error(marks, file, err,
                             "using --mig-strategy=mixed is not supported with MPS");
        if (!c->mps_root || !*c->mps_root)
            return mps_error(marks, file, err, "using MPS requires --mps-root to be specified");
    }
    return 0;
}
