/* Host facts for the GPU node labels (see host.h): machine type, PCI class, vGPU
 * capability, read the way gpu-feature-discovery reads them (machine-type.go,
 * go-nvlib nvpci, internal/vgpu), with every read bounded. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>

#include "core/log.h"
#include "host.h"

#define PCI_CONFIG_MAX 4096   /* PCIe extended config space */
#define NVIDIA_VENDOR "0x10de"

static const char *root_or_sys(const char *sysfs_root)
{
    return sysfs_root && *sysfs_root ? sysfs_root : "/sys";
}

/* Read at most `max` bytes of `path` into buf. Returns the length or -errno. */
static ssize_t read_bounded(const char *path, uint8_t *buf, size_t max)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    size_t len = 0;
    while (len < max) {
        ssize_t n = RETRY_EINTR(read(fd, buf + len, max - len));
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        len += (size_t)n;
    }
    return (ssize_t)len;
}

/* Read a small text file, trimmed of surrounding whitespace (Go strings.TrimSpace). */
static int read_text(const char *path, char *out, size_t size)
{
    ssize_t n = read_bounded(path, (uint8_t *)out, size - 1);
    if (n < 0)
        return (int)n;
    out[n] = 0;
    char *s = out;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f')
        s++;
    size_t len = strlen(s);
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n' ||
                   s[len - 1] == '\r' || s[len - 1] == '\v' || s[len - 1] == '\f'))
        len--;
    memmove(out, s, len);
    out[len] = 0;
    return 0;
}

int host_pci_class(const char *sysfs_root, const char *bus_id, uint32_t *class)
{
    char path[4096], buf[32];
    int n = snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/class", root_or_sys(sysfs_root),
                     bus_id);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -ENAMETOOLONG;
    int r = read_text(path, buf, sizeof(buf));
    if (r < 0)
        return r;
    char *end;
    errno = 0;
    unsigned long v = strtoul(buf, &end, 16);
    if (errno || end == buf || *end || !startswith(buf, "0x") || v > UINT32_MAX)
        return -EINVAL;
    *class = (uint32_t)v;
    return 0;
}

/* The vendor-specific capability (id 0x09) in a config space, or NULL; *cap_len set.
 * The chain is walked as the kernel lays it out: pointer at 0x34, each entry
 * id/next/length, a loop or an id of 0xff ends it. */
static const uint8_t *vendor_capability(const uint8_t *cfg, size_t len, size_t *cap_len)
{
    if (!(cfg[0x06] & 0x10)) /* status: no capability list */
        return NULL;
    bool visited[256] = { false };
    unsigned pos = cfg[0x34];
    while (pos != 0 && pos + 3 <= len && !visited[pos]) {
        uint8_t id = cfg[pos], next = cfg[pos + 1], clen = cfg[pos + 2];
        if (id == 0xff)
            break;
        if (id == 0x09) {
            *cap_len = pos + clen <= len ? clen : len - pos;
            return cfg + pos;
        }
        visited[pos] = true;
        pos = next;
    }
    return NULL;
}

static void copy_trimmed_nul(char *out, size_t size, const uint8_t *in, size_t n)
{
    /* the fields are NUL padded (Go strings.Trim(s, "\x00")) */
    while (n && in[0] == 0)
        in++, n--;
    while (n && in[n - 1] == 0)
        n--;
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < size; i++)
        out[k++] = (char)in[i];
    out[k] = 0;
}

enum inv_vgpu host_vgpu_from_config(const uint8_t *config, size_t len, const char *addr,
                                    struct inv_host *out)
{
    enum { RECORDS = 5, FIELD = 10 };
    if (len < 256)
        return INV_VGPU_UNKNOWN;
    size_t clen = 0;
    const uint8_t *cap = vendor_capability(config, len, &clen);
    if (!cap || clen < 5 || cap[3] != 'V' || cap[4] != 'F')
        return INV_VGPU_ABSENT;
    /* Records from offset 5: id, length, data; the host driver record has id 0. */
    size_t pos = RECORDS;
    uint8_t record = clen > pos ? cap[pos] : 0;
    for (unsigned hops = 0; record != 0 && pos < clen && hops < 256; hops++) {
        uint8_t rlen = pos + 1 < clen ? cap[pos + 1] : 0;
        if (rlen == 0)
            break; /* a zero-length record never advances */
        pos += rlen;
        record = pos < clen ? cap[pos] : 0xff;
    }
    if (record == 0 && pos + 2 + 2 * FIELD <= clen) {
        copy_trimmed_nul(out->vgpu_host_driver_version, sizeof(out->vgpu_host_driver_version),
                         cap + pos + 2, FIELD);
        copy_trimmed_nul(out->vgpu_host_driver_branch, sizeof(out->vgpu_host_driver_branch),
                         cap + pos + 2 + FIELD, FIELD);
        out->vgpu_record_missing[0] = 0;
    } else {
        /* a PCI address ("0000:3b:00.0") fits; the precision keeps -O3's truncation
         * analysis (release builds) from failing -Werror on the directory entry's 256 */
        snprintf(out->vgpu_record_missing, sizeof(out->vgpu_record_missing), "%.*s",
                 (int)sizeof(out->vgpu_record_missing) - 1, addr);
    }
    return INV_VGPU_PRESENT;
}

/* GFD's vGPU detection: every NVIDIA PCI device's config space is read; one that cannot
 * be (or is cut short, as unprivileged reads are) makes the answer unknown. */
static void discover_vgpu(const char *sysfs_root, struct inv_host *out)
{
    _cleanup_free_ char *dir = xasprintf("%s/bus/pci/devices", root_or_sys(sysfs_root));
    DIR *d = opendir(dir);
    out->vgpu = INV_VGPU_UNKNOWN;
    if (!d) {
        log_warning("vGPU detection: %s: %s, leaving the vgpu labels out, ignoring", dir,
                    strerror(errno));
        return;
    }
    _cleanup_free_ uint8_t *config = xmalloc(PCI_CONFIG_MAX);
    enum inv_vgpu found = INV_VGPU_ABSENT;
    struct dirent *e;
    while ((e = readdir(d))) {
        char vendor[16];
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *vpath = xasprintf("%s/%s/vendor", dir, e->d_name);
        _cleanup_free_ char *cpath = xasprintf("%s/%s/config", dir, e->d_name);
        if (read_text(vpath, vendor, sizeof(vendor)) < 0) {
            log_warning("vGPU detection: %s unreadable, leaving the vgpu labels out, ignoring",
                        vpath);
            found = INV_VGPU_UNKNOWN;
            break;
        }
        if (!streq(vendor, NVIDIA_VENDOR))
            continue;
        ssize_t n = read_bounded(cpath, config, PCI_CONFIG_MAX);
        enum inv_vgpu v = n < 0 ? INV_VGPU_UNKNOWN
                                : host_vgpu_from_config(config, (size_t)n, e->d_name, out);
        if (v == INV_VGPU_UNKNOWN) {
            log_warning("vGPU detection: %s: %s, leaving the vgpu labels out, ignoring", cpath,
                        n < 0 ? strerror((int)-n) : "shorter than 256 bytes (not privileged?)");
            found = INV_VGPU_UNKNOWN;
            break;
        }
        if (v == INV_VGPU_PRESENT)
            found = INV_VGPU_PRESENT;
    }
    closedir(d);
    out->vgpu = found;
}

void host_discover(const struct host_options *opt, struct inv_host *out)
{
    int r;
    memset(out, 0, sizeof(*out));
    out->read = true;
    const char *mt = opt->machine_type_file;
    if (!mt || !*mt)
        snprintf(out->machine_type, sizeof(out->machine_type), "unknown");
    else if ((r = read_text(mt, out->machine_type, sizeof(out->machine_type))) < 0) {
        log_warning("Error getting machine type from %s: %s, labelling it unknown, ignoring", mt,
                    strerror(-r));
        snprintf(out->machine_type, sizeof(out->machine_type), "unknown");
    }
    discover_vgpu(opt->sysfs_root, out);
}
