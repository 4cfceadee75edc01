/* MIG naming (see mig.h): profile names from slice counts, memory and the GPU-instance
 * variant, and capability minors from the driver's mig-minors table. */
#include <errno.h>
#include <stdio.h>

#include "node/mig.h"

static const char *variant_suffix(enum nvml_gi_variant v)
{
    switch (v) {
    case NVML_GI_VARIANT_ME:
        return "+me";
    case NVML_GI_VARIANT_ME_ALL:
        return "+me.all";
    case NVML_GI_VARIANT_GFX:
        return "+gfx";
    case NVML_GI_VARIANT_NO_ME:
        return "-me";
    case NVML_GI_VARIANT_PLAIN:
    default:
        return "";
    }
}

void mig_profile_name(unsigned gi_slices, unsigned ci_slices, uint64_t mig_memory,
                      uint64_t gpu_memory, enum nvml_gi_variant variant, char *out, size_t len)
{
    /* Memory is shown as the MIG share of the GPU rounded up to an eighth, scaled to
     * the GPU's size in whole GiB: 4864 MiB of a 40 GiB A100 reads "5gb". */
    uint64_t gb = 0;
    if (gpu_memory > 0) {
        /* Integer arithmetic: exact where floating point could push a whole number of
         * eighths over the next one. */
        uint64_t eighths = (mig_memory * 8 + gpu_memory - 1) / gpu_memory;
        uint64_t total_gib = (gpu_memory + (1ULL << 30) - 1) >> 30;
        gb = (eighths * total_gib + 4) / 8;
    }
    const char *suffix = variant_suffix(variant);
    if (ci_slices == gi_slices)
        snprintf(out, len, "%ug.%llugb%s", gi_slices, (unsigned long long)gb, suffix);
    else
        snprintf(out, len, "%uc.%ug.%llugb%s", ci_slices, gi_slices, (unsigned long long)gb,
                 suffix);
}

int mig_cap_minor(const char *proc_root, unsigned gpu_minor, unsigned gi, int ci,
                  struct error *err)
{
    _cleanup_free_ char *path =
        xasprintf("%s/driver/nvidia-caps/mig-minors", proc_root && *proc_root ? proc_root : "/proc");
    FILE *f = fopen(path, "re");
    if (!f)
        return error_set(err, -errno, "opening %s: %s", path, strerror(errno));

    char line[256];
    int found = -1;
    while (found < 0 && fgets(line, sizeof(line), f)) {
        unsigned g, i, c;
        int minor, n = 0;
        if (ci >= 0) {
            if (sscanf(line, "gpu%u/gi%u/ci%u/access %d%n", &g, &i, &c, &minor, &n) == 4 && n > 0 &&
                g == gpu_minor && i == gi && c == (unsigned)ci)
                found = minor;
        } else if (sscanf(line, "gpu%u/gi%u/access %d%n", &g, &i, &minor, &n) == 3 && n > 0 &&
                   g == gpu_minor && i == gi) {
            found = minor;
        }
        /* "config %d" / "monitor %d" lines are valid but not needed per device. */
    }
    fclose(f);
    if (found < 0) {
        if (ci >= 0)
            return error_set(err, -ENOENT, "%s: no entry for gpu%u/gi%u/ci%d/access", path,
                             gpu_minor, gi, ci);
        return error_set(err, -ENOENT, "%s: no entry for gpu%u/gi%u/access", path, gpu_minor, gi);
    }
    return found;
}

void mig_resolve_caps(const char *proc_root, unsigned gpu_minor, struct inv_mig *m)
{
    struct error e = { 0 };
    m->cap_error[0] = 0;
    m->cap_error_code = 0;
    m->ci_cap_minor = -1;
    m->gi_cap_minor = mig_cap_minor(proc_root, gpu_minor, m->gi_id, -1, &e);
    if (m->gi_cap_minor >= 0)
        m->ci_cap_minor = mig_cap_minor(proc_root, gpu_minor, m->gi_id, (int)m->ci_id, &e);
    if (m->gi_cap_minor < 0 || m->ci_cap_minor < 0) {
        m->gi_cap_minor = m->gi_cap_minor < 0 ? -1 : m->gi_cap_minor;
        m->ci_cap_minor = -1;
        m->cap_error_code = e.code;
        snprintf(m->cap_error, sizeof(m->cap_error), "%s", e.msg);
    }
}
