/* Run-time MIG state (sim-migstate.h): the per-GPU records, the MOCK_NVML_STATE file
 * that shares them between processes, and the per-process view built from them.
 *
 * File layout (fixed for a node; all integers in host order):
 *   [0, 4096)            header: magic "NVSIMMG1", version, number of GPUs, generation,
 *                        data size
 *   [4096, 4096+S)       data copy 0 } struct ms_data: next serial, nonce, one
 *   [4096+S, 4096+2S)    data copy 1 } struct sim_ms_gpu per GPU (NVML order)
 * The copy in use is generation & 1. A writer (under flock LOCK_EX) writes the whole
 * other copy, then stores generation+1: a writer killed at any point leaves the copy in
 * use intact. Readers compare the generation with the one they synced (one load from the
 * shared mapping, no system call) and copy the data under LOCK_SH only when it moved. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "sim-caps.h"
#include "sim-env.h"
#include "sim-migstate.h"
#include "sim-state.h"

#define MS_MAGIC "NVSIMMG1"
#define MS_VERSION 1u
#define MS_HDR 4096u

struct ms_hdr {
    char magic[8];
    uint32_t version, n_gpus;
    uint64_t gen;
    uint64_t data_size;
};

struct ms_data {
    uint64_t next_serial, nonce;
    struct sim_ms_gpu gpu[];
};

static struct sim_node *node;
static struct ms_data *cur;      /* the process's copy of the records (private mode: the truth) */
static struct sim_ms_gpu backup; /* the record being edited, as it was (abort, capability diff) */
static unsigned backup_idx;
static uint64_t backup_serial;
static size_t data_size;
static uint64_t cur_gen;
static int fd = -1; /* the state file (shared mode) */
static pid_t fd_pid; /* the process that opened fd: a forked child opens its own (flock is per open file) */
static char *state_path;
static unsigned char *map;
static size_t map_len;
static const char *proc_root, *dev_root;

static size_t round_page(size_t n) { return (n + 4095) & ~(size_t)4095; }
static struct ms_hdr *hdr(void) { return (struct ms_hdr *)(void *)map; }
static struct ms_data *copy_at(uint64_t gen)
{
    return (struct ms_data *)(void *)(map + MS_HDR + (gen & 1) * round_page(data_size));
}

unsigned sim_ms_arch(const struct sim_device *gpu)
{
    if (gpu->arch != NVML_DEVICE_ARCH_UNKNOWN || !gpu->mig_table)
        return gpu->arch;
    return gpu->mig_table->arch;
}

/* ---- capability files (MOCK_NVML_PROC_ROOT / MOCK_NVML_DEV_ROOT) */

/* The capability directory of a GI (ci < 0) or CI under MOCK_NVML_PROC_ROOT, the /dev
 * node under MOCK_NVML_DEV_ROOT; false when a path does not fit. */
static bool cap_paths(const struct sim_device *gpu, unsigned gi, int ci, char dir[4096], char node_path[4096],
                      unsigned *minor)
{
    *minor = ci < 0 ? sim_cap_gi_minor(gpu->minor, gi) : sim_cap_ci_minor(gpu->minor, gi, (unsigned)ci);
    int n = ci < 0 ? snprintf(dir, 4096, "%s/driver/nvidia/capabilities/gpu%u/mig/gi%u", proc_root ? proc_root : "",
                              gpu->minor, gi)
                   : snprintf(dir, 4096, "%s/driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%d",
                              proc_root ? proc_root : "", gpu->minor, gi, ci);
    int m = snprintf(node_path, 4096, "%s/nvidia-caps/nvidia-cap%u", dev_root ? dev_root : "", *minor);
    return n > 0 && n < 4096 - 8 && m > 0 && m < 4096;
}

static void cap_write(const struct sim_device *gpu, unsigned gi, int ci)
{
    char dir[4096], path[4096 + 8], node_path[4096], text[128];
    unsigned minor;
    if (!cap_paths(gpu, gi, ci, dir, node_path, &minor))
        return;
    if (proc_root) {
        snprintf(path, sizeof(path), "%s/access", dir);
        int n = snprintf(text, sizeof(text), "DeviceFileMinor: %u\nDeviceFileMode: 292\nDeviceFileModify: 1\n", minor);
        if (mkdir_p(dir, 0755) < 0 || write_file_atomic(path, text, (size_t)n, 0444, false) < 0)
            fprintf(stderr, "nvml-sim: cannot write %s\n", path);
    }
    if (dev_root) {
        char d[4096 + 16];
        snprintf(d, sizeof(d), "%s/nvidia-caps", dev_root);
        if (mkdir_p(d, 0755) < 0 || write_file_atomic(node_path, "", 0, 0444, false) < 0)
            fprintf(stderr, "nvml-sim: cannot write %s\n", node_path);
    }
}

static void cap_remove(const struct sim_device *gpu, unsigned gi, int ci)
{
    char dir[4096], path[4096 + 8], node_path[4096];
    unsigned minor;
    if (!cap_paths(gpu, gi, ci, dir, node_path, &minor))
        return;
    if (proc_root) {
        snprintf(path, sizeof(path), "%s/access", dir);
        (void)unlink(path);
        (void)rmdir(dir);
    }
    if (dev_root)
        (void)unlink(node_path);
}

static const struct sim_ms_gi *gi_by_serial(const struct sim_ms_gpu *r, uint64_t serial)
{
    for (unsigned g = 0; g < r->n_gi; g++)
        if (r->gi[g].serial == serial)
            return &r->gi[g];
    return NULL;
}

static bool ci_in(const struct sim_ms_gi *g, uint64_t serial)
{
    for (unsigned c = 0; g && c < g->n_ci; c++)
        if (g->ci[c].serial == serial)
            return true;
    return false;
}

/* Files for what `to` has and `from` lacks are written, the others removed. */
static void caps_diff(const struct sim_device *gpu, const struct sim_ms_gpu *from, const struct sim_ms_gpu *to)
{
    if (!proc_root && !dev_root)
        return;
    for (unsigned g = 0; g < from->n_gi; g++) {
        const struct sim_ms_gi *o = &from->gi[g], *n = gi_by_serial(to, o->serial);
        for (unsigned c = 0; c < o->n_ci; c++)
            if (!ci_in(n, o->ci[c].serial))
                cap_remove(gpu, o->id, (int)o->ci[c].id);
        if (!n)
            cap_remove(gpu, o->id, -1);
    }
    for (unsigned g = 0; g < to->n_gi; g++) {
        const struct sim_ms_gi *n = &to->gi[g], *o = gi_by_serial(from, n->serial);
        if (!o)
            cap_write(gpu, n->id, -1);
        for (unsigned c = 0; c < n->n_ci; c++)
            if (!ci_in(o, n->ci[c].serial))
                cap_write(gpu, n->id, (int)n->ci[c].id);
    }
}

/* ---- the view */

static void fill_mig(struct sim_device *m, struct sim_device *gpu, struct sim_gi *gi, struct sim_ci *ci, const char *uuid)
{
    *m = *gpu;
    m->is_mig = true;
    m->parent = gpu;
    m->gi = gi;
    m->ci = ci;
    m->gis = NULL;
    m->n_gis = 0;
    m->migs = NULL;
    m->n_migs = 0;
    m->mv = NULL;
    m->mem_total = (uint64_t)gi->prof->memory_mb << 20;
    m->mem_reserved = 0;
    m->mem_free = m->mem_total;
    m->mem_used = 0;
    snprintf(m->name, sizeof(m->name), "%.60s MIG %.30s", gpu->name,
             ci->prof.slices == gi->prof->slices ? gi->prof->name : ci->prof.name);
    snprintf(m->uuid, sizeof(m->uuid), "%s", uuid);
}

static void kill_gi(struct sim_gi *gi)
{
    for (unsigned c = 0; c < gi->n_live_cis; c++)
        gi->live_cis[c]->live = false;
    gi->n_live_cis = 0;
    gi->live = false;
}

static void sync_cis(struct sim_mig_view *v, struct sim_gi *gi, const struct sim_ms_gi *rg)
{
    struct sim_ci *list[SIM_MS_MAX_CI];
    unsigned n = 0;
    for (unsigned c = 0; c < rg->n_ci && c < SIM_MS_MAX_CI; c++) {
        const struct sim_ms_ci *rc = &rg->ci[c];
        struct sim_ci *ci = NULL;
        for (unsigned k = 0; k < gi->n_live_cis && !ci; k++)
            if (gi->live_cis[k]->serial == rc->serial)
                ci = gi->live_cis[k];
        if (!ci) {
            struct sim_ci_profile prof;
            if (!sim_mig_ci_profile(gi->prof, rc->profile, &prof))
                continue; /* not a profile of this GI: a corrupt record, ignored */
            unsigned i = v->ci_next;
            for (unsigned k = 0; k < SIM_MS_POOL && v->ci_pool[i].live; k++)
                i = (i + 1) % SIM_MS_POOL;
            v->ci_next = (i + 1) % SIM_MS_POOL;
            ci = &v->ci_pool[i];
            *ci = (struct sim_ci){ .id = rc->id, .prof = prof, .start = rc->start, .gi = gi,
                                   .mig = &v->mig_pool[i], .serial = rc->serial, .live = true };
            fill_mig(ci->mig, gi->parent, gi, ci, rc->uuid);
        }
        list[n++] = ci;
    }
    for (unsigned k = 0; k < gi->n_live_cis; k++) {
        bool keep = false;
        for (unsigned j = 0; j < n && !keep; j++)
            keep = list[j] == gi->live_cis[k];
        if (!keep)
            gi->live_cis[k]->live = false;
    }
    memcpy(gi->live_cis, list, n * sizeof(*list));
    gi->n_live_cis = n;
}

static void sync_gpu(struct sim_device *d, const struct sim_ms_gpu *r)
{
    struct sim_mig_view *v = d->mv;
    if (!v)
        return;
    d->mig_mode = r->mode_current;
    d->mig_pending = r->mode_pending;
    v->busy = r->busy;
    struct sim_gi *list[SIM_MS_MAX_GI];
    unsigned n = 0;
    for (unsigned g = 0; g < r->n_gi && g < SIM_MS_MAX_GI; g++) {
        const struct sim_ms_gi *rg = &r->gi[g];
        struct sim_gi *gi = NULL;
        for (unsigned k = 0; k < v->n_gis && !gi; k++)
            if (v->gis[k]->serial == rg->serial)
                gi = v->gis[k];
        if (!gi) {
            const struct sim_gi_profile *p = sim_mig_gi_by_id(d->mig_table, rg->profile);
            if (!p)
                continue;
            unsigned i = v->gi_next;
            for (unsigned k = 0; k < SIM_MS_POOL && v->gi_pool[i].live; k++)
                i = (i + 1) % SIM_MS_POOL;
            v->gi_next = (i + 1) % SIM_MS_POOL;
            gi = &v->gi_pool[i];
            *gi = (struct sim_gi){ .id = rg->id, .prof = p, .start = rg->start, .parent = d,
                                   .serial = rg->serial, .live = true };
        }
        sync_cis(v, gi, rg);
        list[n++] = gi;
    }
    for (unsigned k = 0; k < v->n_gis; k++) {
        bool keep = false;
        for (unsigned j = 0; j < n && !keep; j++)
            keep = list[j] == v->gis[k];
        if (!keep)
            kill_gi(v->gis[k]);
    }
    memcpy(v->gis, list, n * sizeof(*list));
    v->n_gis = n;
    v->n_migs = 0;
    for (unsigned g = 0; g < n; g++)
        for (unsigned c = 0; c < list[g]->n_live_cis; c++) {
            struct sim_device *m = list[g]->live_cis[c]->mig;
            m->index = v->n_migs;
            v->migs[v->n_migs++] = m;
        }
}

static void sync_all(void)
{
    for (unsigned i = 0; i < node->n_devs; i++)
        sync_gpu(&node->devs[i], &cur->gpu[i]);
}

/* ---- refresh, mutations */

static void load_locked(void)
{
    uint64_t g = __atomic_load_n(&hdr()->gen, __ATOMIC_ACQUIRE);
    memcpy(cur, copy_at(g), data_size);
    cur_gen = g;
    sync_all();
}

/* After fork() the child shares the parent's open file and so its flock: open its own. */
static void own_fd(void)
{
    if (getpid() == fd_pid)
        return;
    int nfd = open(state_path, O_RDWR | O_CLOEXEC);
    if (nfd < 0)
        return;
    close(fd);
    fd = nfd;
    fd_pid = getpid();
}

void sim_ms_refresh(void)
{
    if (!map || __atomic_load_n(&hdr()->gen, __ATOMIC_ACQUIRE) == cur_gen)
        return;
    own_fd();
    if (flock(fd, LOCK_SH) < 0)
        return; /* keep the view we have */
    load_locked();
    flock(fd, LOCK_UN);
}

static unsigned gpu_index(const struct sim_device *gpu) { return (unsigned)(gpu - node->devs); }

struct sim_ms_gpu *sim_ms_begin(struct sim_device *gpu)
{
    if (map) {
        own_fd();
        while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
            ;
        load_locked();
    }
    struct sim_ms_gpu *r = &cur->gpu[gpu_index(gpu)];
    backup = *r;
    backup_idx = gpu_index(gpu);
    backup_serial = cur->next_serial;
    return r;
}

void sim_ms_commit(struct sim_device *gpu)
{
    struct sim_ms_gpu *r = &cur->gpu[gpu_index(gpu)];
    if (map) {
        uint64_t g = cur_gen + 1;
        memcpy(copy_at(g), cur, data_size);
        __atomic_store_n(&hdr()->gen, g, __ATOMIC_RELEASE);
        cur_gen = g;
    }
    caps_diff(gpu, &backup, r);
    sync_gpu(gpu, r);
    if (map)
        flock(fd, LOCK_UN);
}

void sim_ms_abort(void)
{
    cur->gpu[backup_idx] = backup;
    cur->next_serial = backup_serial;
    if (map)
        flock(fd, LOCK_UN);
}

const struct sim_ms_gpu *sim_ms_record(const struct sim_device *gpu) { return &cur->gpu[gpu_index(gpu)]; }

uint64_t sim_ms_serial(void) { return cur->next_serial++; }

void sim_ms_new_uuid(const struct sim_device *gpu, unsigned gi, unsigned ci, uint64_t serial, char *out, size_t size)
{
    char key[160];
    snprintf(key, sizeof(key), "%s/%u/%u/%llu/%llx", gpu->uuid, gi, ci, (unsigned long long)serial,
             (unsigned long long)cur->nonce);
    uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL;
    for (const char *p = key; *p; p++) {
        h1 = (h1 ^ (unsigned char)*p) * 0x100000001b3ULL;
        h2 = (h2 ^ (unsigned char)*p) * 0x100000001b3ULL + 1;
    }
    /* Version 4 / variant 1 bits, as a random UUID has. */
    snprintf(out, size, "MIG-%08x-%04x-4%03x-%04x-%012llx", (unsigned)(h1 >> 32), (unsigned)(h1 >> 16) & 0xffff,
             (unsigned)h1 & 0xfff, (unsigned)((h2 >> 48) & 0x3fff) | 0x8000,
             (unsigned long long)(h2 & 0xffffffffffffULL));
}

/* ---- handles */

/* The view and pool index whose pool (at `off` in the view, `len` bytes of `each`) holds h. */
static struct sim_mig_view *pool_hit(const void *h, size_t off, size_t len, size_t each, size_t *idx)
{
    uintptr_t p = (uintptr_t)h;
    for (unsigned i = 0; node && i < node->n_devs; i++) {
        struct sim_mig_view *v = node->devs[i].mv;
        uintptr_t b = (uintptr_t)v + off;
        if (v && p >= b && p < b + len && (p - b) % each == 0) {
            *idx = (p - b) / each;
            return v;
        }
    }
    return NULL;
}
#define POOL(h, field, idx)                                                           \
    pool_hit(h, offsetof(struct sim_mig_view, field), sizeof(((struct sim_mig_view *)0)->field), \
             sizeof(((struct sim_mig_view *)0)->field[0]), idx)

struct sim_gi *sim_ms_gi_of(const void *h, bool *ours)
{
    size_t i;
    struct sim_mig_view *v = POOL(h, gi_pool, &i);
    if (ours)
        *ours = v != NULL;
    return v && v->gi_pool[i].live ? &v->gi_pool[i] : NULL;
}

struct sim_ci *sim_ms_ci_of(const void *h, bool *ours)
{
    size_t i;
    struct sim_mig_view *v = POOL(h, ci_pool, &i);
    if (ours)
        *ours = v != NULL;
    return v && v->ci_pool[i].live ? &v->ci_pool[i] : NULL;
}

struct sim_device *sim_ms_mig_of(const void *h, bool *ours)
{
    size_t i;
    struct sim_mig_view *v = POOL(h, mig_pool, &i);
    if (ours)
        *ours = v != NULL;
    return v && v->ci_pool[i].live ? &v->mig_pool[i] : NULL;
}

struct sim_device *sim_ms_find_mig_uuid(const char *uuid)
{
    for (unsigned i = 0; node && i < node->n_devs; i++) {
        struct sim_mig_view *v = node->devs[i].mv;
        for (unsigned m = 0; v && m < v->n_migs; m++)
            if (!strcasecmp(v->migs[m]->uuid, uuid))
                return v->migs[m];
    }
    return NULL;
}

struct sim_device *sim_ms_find_mig_ids(struct sim_device *gpu, unsigned gi, unsigned ci)
{
    struct sim_mig_view *v = gpu->mv;
    for (unsigned m = 0; v && m < v->n_migs; m++)
        if (v->migs[m]->gi->id == gi && v->migs[m]->ci->id == ci)
            return v->migs[m];
    return NULL;
}

/* ---- init */

static void initial_records(struct sim_node *nd)
{
    for (unsigned i = 0; i < nd->n_devs; i++) {
        const struct sim_device *d = &nd->devs[i];
        struct sim_ms_gpu *r = &cur->gpu[i];
        snprintf(r->uuid, sizeof(r->uuid), "%.79s", d->uuid);
        r->mode_current = d->mig_mode;
        r->mode_pending = d->mig_pending;
        for (unsigned g = 0; g < d->n_gis && g < SIM_MS_MAX_GI; g++) {
            const struct sim_gi *gi = &d->gis[g];
            struct sim_ms_gi *rg = &r->gi[r->n_gi++];
            *rg = (struct sim_ms_gi){ .id = gi->id, .profile = gi->prof->id, .start = gi->start,
                                      .serial = cur->next_serial++ };
            for (unsigned c = 0; c < gi->n_cis && c < SIM_MS_MAX_CI; c++) {
                struct sim_ms_ci *rc = &rg->ci[rg->n_ci++];
                *rc = (struct sim_ms_ci){ .id = gi->cis[c].id, .profile = gi->cis[c].prof.id,
                                          .start = gi->cis[c].start, .serial = cur->next_serial++ };
                snprintf(rc->uuid, sizeof(rc->uuid), "%.47s", gi->cis[c].mig ? gi->cis[c].mig->uuid : "");
            }
        }
    }
}

/* Open or create the state file; *created when this process initialised it. */
static int attach(const char *path, bool *created)
{
    size_t want = MS_HDR + 2 * round_page(data_size);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    fd_pid = getpid();
    state_path = xstrdup(path);
    if (fd < 0) {
        fprintf(stderr, "MOCK_NVML_STATE: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "MOCK_NVML_STATE: %s: flock: %s\n", path, strerror(errno));
            return -1;
        }
    struct stat st;
    struct ms_hdr h = { 0 };
    bool valid = fstat(fd, &st) == 0 && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
                 !memcmp(h.magic, MS_MAGIC, 8);
    const char *why = NULL;
    if (valid && (h.version != MS_VERSION || h.data_size != data_size || (size_t)st.st_size != want))
        why = "another simulator version or another number of GPUs";
    if (!why && (!valid ? ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)want) < 0 : false))
        why = strerror(errno);
    if (!why) {
        map = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
            map = NULL;
            why = strerror(errno);
        }
    }
    map_len = want;
    if (!why && valid) {
        const struct ms_data *dd = copy_at(__atomic_load_n(&hdr()->gen, __ATOMIC_ACQUIRE));
        for (unsigned i = 0; i < node->n_devs && !why; i++)
            if (strcmp(dd->gpu[i].uuid, cur->gpu[i].uuid))
                why = "made for another node (GPU UUIDs differ)";
        if (!why)
            load_locked();
    } else if (!why) {
        /* Fresh: copy 0 in use, the magic written last. */
        memcpy(copy_at(0), cur, data_size);
        struct ms_hdr *hp = hdr();
        hp->version = MS_VERSION;
        hp->n_gpus = node->n_devs;
        hp->data_size = data_size;
        __atomic_store_n(&hp->gen, 0, __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        memcpy(hp->magic, MS_MAGIC, 8);
        cur_gen = 0;
        *created = true;
    }
    if (why) {
        fprintf(stderr, "MOCK_NVML_STATE: %s: %s\n", path, why);
        if (map)
            munmap(map, map_len);
        map = NULL;
        close(fd);
        fd = -1;
        return -1;
    }
    return 0; /* still holding LOCK_EX: the caller writes the initial files, then unlocks */
}

nvmlReturn_t sim_ms_init(struct sim_node *nd)
{
    node = nd;
    data_size = sizeof(struct ms_data) + nd->n_devs * sizeof(struct sim_ms_gpu);
    cur = xcalloc(1, data_size);
    cur->next_serial = 1;
    if (getrandom(&cur->nonce, sizeof(cur->nonce), GRND_NONBLOCK) != sizeof(cur->nonce))
        cur->nonce = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    initial_records(nd);
    for (unsigned i = 0; i < nd->n_devs; i++)
        if (nd->devs[i].mig_table)
            nd->devs[i].mv = xcalloc(1, sizeof(struct sim_mig_view));
    const char *e = sim_env("MOCK_NVML_PROC_ROOT");
    proc_root = e && *e ? xstrdup(e) : NULL;
    e = sim_env("MOCK_NVML_DEV_ROOT");
    dev_root = e && *e ? xstrdup(e) : NULL;
    bool created = true;
    const char *path = sim_env("MOCK_NVML_STATE");
    if (path && *path) {
        created = false;
        if (attach(path, &created) < 0)
            return NVML_ERROR_UNKNOWN;
    }
    sync_all();
    if (created) {
        static const struct sim_ms_gpu none;
        for (unsigned i = 0; i < nd->n_devs; i++)
            caps_diff(&nd->devs[i], &none, &cur->gpu[i]);
    }
    if (map)
        flock(fd, LOCK_UN);
    return NVML_SUCCESS;
}
