/* libcuda.so.1 stand-in: the CUDA driver API calls a container check needs (init, device
 * enumeration, names and UUIDs, primary contexts, memory allocation), answered from the
 * simulated node. The devices are what visible.h says this process can use: NVML's GPUs
 * whose /dev/nvidia<minor> opens, and for a GPU in MIG mode its MIG devices whose
 * capability nodes open instead of the GPU. Nothing runs on a device: allocations are
 * bookkeeping against the device's memory, with addresses no one can dereference.
 *
 * Semantics follow the real library where a caller can see them: cuInit's result is
 * sticky, every call but cuDriverGetVersion and the error strings needs a successful
 * cuInit, the current context is per thread, a primary context is reference counted and
 * its allocations go when the last reference is released.
 *
 * Limits (docs/simulator.md, "MPS" and "Memory limits per cgroup"): an allocation also
 * fails with CUDA_ERROR_OUT_OF_MEMORY beyond the MPS pinned-memory limit this process took
 * from its control daemon and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT at cuInit, and beyond the
 * hard limit nvmlDeviceSetMemoryLimits_v1 put on its cgroup (or an ancestor), read at
 * each allocation. The active thread percentage is taken and reported, not enforced. */
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/macro.h"
#include "cuda-abi.h"
#include "mps.h"
#include "sim-cgroup.h"
#include "visible.h"

struct CUctx_st {
    struct cu_dev *dev;
    unsigned refs; /* cuDevicePrimaryCtxRetain minus releases; 0: inactive */
};

struct cu_dev {
    char name[VIS_NAME_LEN];
    char uuid_text[VIS_UUID_LEN]; /* NVML's GPU-.../MIG-... */
    CUuuid uuid;
    bool is_mig;
    size_t total, used;
    uint64_t mps_limit; /* effective MPS pinned-memory limit, UINT64_MAX: none */
    double mps_thread;  /* effective active thread percentage (not enforced) */
    struct CUctx_st primary;
};

struct cu_alloc {
    CUdeviceptr ptr;
    size_t size;
    struct cu_dev *dev;
    struct cu_alloc *next;
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED; /* cuInit's sticky answer */
static bool loaded;                                     /* NVML answered */
static int driver_version;
static struct cu_dev *devs;
static int n_devs;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* refs, used, allocs, next_* */
static struct cu_alloc *allocs;
/* Fake device addresses: never reused, so a stale pointer is always an unknown one. The
 * legacy 32-bit entry points get their own window below 4 GiB. */
static CUdeviceptr next_addr = 0x7f0000000000ULL, next_addr_v1 = 0x10000000ULL;
static __thread CUcontext current;

/* "GPU-"/"MIG-" and 32 hex digits in 8-4-4-4-12 groups: the 16 bytes CUDA reports. A
 * profile may name a GPU with any string (tests use short ones): those get 16 bytes
 * derived from the text (FNV-1a), stable for the same UUID. */
static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void uuid_bytes(const char *s, CUuuid *out)
{
    const char *p = strchr(s, '-');
    unsigned n = 0;
    memset(out, 0, sizeof(*out));
    for (p = p ? p + 1 : s; *p && n < 32; p++) {
        if (*p == '-')
            continue;
        int v = hexval(*p);
        if (v < 0)
            break;
        out->bytes[n / 2] = (char)(out->bytes[n / 2] | v << (n % 2 ? 0 : 4));
        n++;
    }
    if (n == 32 && !*p)
        return;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned i = 0; i < 16; i++) {
        for (const char *c = s; *c; c++)
            h = (h ^ (unsigned char)*c ^ i) * 0x100000001b3ULL;
        out->bytes[i] = (char)(h >> 56);
    }
}

static void add_dev(const char *name, const char *uuid, unsigned long long total, bool is_mig)
{
    struct cu_dev *d = &devs[n_devs++];
    snprintf(d->name, sizeof(d->name), "%s", name);
    snprintf(d->uuid_text, sizeof(d->uuid_text), "%s", uuid);
    d->is_mig = is_mig;
    d->mps_limit = UINT64_MAX;
    d->mps_thread = 100;
    uuid_bytes(uuid, &d->uuid);
    d->total = (size_t)total;
    d->primary.dev = d;
}

/* A limit's device key names device i: its UUID, or its ordinal in decimal. */
static bool key_is(const char *key, int i)
{
    if (strcasecmp(key, devs[i].uuid_text) == 0)
        return true;
    char ord[16];
    snprintf(ord, sizeof(ord), "%d", i);
    return strcmp(key, ord) == 0;
}

/* The last limit for device i ("" is every device), UINT64_MAX when none. */
static uint64_t limit_for(const struct mps_limit *l, int n, int i)
{
    uint64_t v = UINT64_MAX;
    for (int k = 0; k < n; k++)
        if (!l[k].key[0] || strcmp(l[k].key, "*") == 0 || key_is(l[k].key, i))
            v = l[k].bytes;
    return v;
}

static void mps_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mps_debug(const char *fmt, ...)
{
    const char *path = getenv(MPS_DEBUG_ENV);
    FILE *f = path && *path ? fopen(path, "ae") : NULL;
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

/* An MPS client when a control daemon answers in the pipe directory: the server's limits,
 * lowered (never raised) by the client's own CUDA_MPS_PINNED_DEVICE_MEM_LIMIT and
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE. A client limit naming a device this process does not
 * see drops every pinned limit, the server's too: what NVIDIA measured (a known escape). */
static void mps_setup(bool v3)
{
    static struct mps_server srv;
    char pipe[4096];
    mps_pipe_path(pipe, sizeof(pipe), "");
    pipe[strlen(pipe) - 1] = 0;
    if (mps_client_connect(&srv) < 0) {
        mps_debug("mps %s none\n", pipe);
        return;
    }
    struct mps_limit mine[MPS_MAX_LIMITS];
    const char *env = getenv(MPS_PINNED_ENV);
    int n_mine = env && *env ? mps_parse_limits(env, mine, MPS_MAX_LIMITS) : 0;
    if (n_mine < 0) {
        fprintf(stderr, "libcuda.so.1 (simulated): %s=%s: malformed, ignored\n", MPS_PINNED_ENV, env);
        n_mine = 0;
    }
    bool escape = false;
    for (int k = 0; k < n_mine; k++) {
        bool seen = !mine[k].key[0];
        for (int i = 0; i < n_devs && !seen; i++)
            seen = key_is(mine[k].key, i);
        escape |= !seen;
    }
    /* r615+ (MPS v3) through a namespace's socket: the namespace's percentage overrides the
     * client's own, and its pinned limit stays whatever the client's variable names */
    bool ns = v3 && srv.ns[0];
    double thread = srv.thread, t;
    const char *tenv = getenv(MPS_THREAD_ENV);
    if (!ns && tenv && *tenv && mps_parse_percent(tenv, &t) == 0 && t < thread)
        thread = t;
    if (ns)
        mps_debug("mps %s server %s namespace %s\n", pipe, srv.id, srv.ns);
    else
        mps_debug("mps %s server %s%s\n", pipe, srv.id, escape ? " escape" : "");
    for (int i = 0; i < n_devs; i++) {
        uint64_t a = limit_for(srv.limits, srv.n_limits, i), b = limit_for(mine, n_mine, i);
        devs[i].mps_limit = escape && !ns ? UINT64_MAX : escape ? a : a < b ? a : b;
        devs[i].mps_thread = thread;
        char lim[32] = "none";
        if (devs[i].mps_limit != UINT64_MAX)
            snprintf(lim, sizeof(lim), "%" PRIu64, devs[i].mps_limit);
        mps_debug("device %d %s pinned %s thread %.1f\n", i, devs[i].uuid_text, lim, thread);
    }
}

static void load(void)
{
    struct vis_node node;
    char err[512];
    int r = vis_load(&node, err, sizeof(err));
    if (r < 0) {
        /* The real library cannot say why either; the stand-in says it once, so a test
         * that fails here shows the loader's or NVML's reason. */
        fprintf(stderr, "libcuda.so.1 (simulated): %s\n", err);
        return;
    }
    loaded = true;
    driver_version = node.cuda_version;
    size_t n = 0;
    for (unsigned i = 0; i < node.n_gpus; i++)
        n += node.gpus[i].mig_enabled ? node.gpus[i].n_migs : 1;
    devs = calloc(n ? n : 1, sizeof(*devs));
    if (!devs) {
        vis_free(&node);
        init_result = CUDA_ERROR_OUT_OF_MEMORY;
        return;
    }
    for (unsigned i = 0; i < node.n_gpus; i++) {
        const struct vis_gpu *g = &node.gpus[i];
        if (!g->mig_enabled)
            add_dev(g->name, g->uuid, g->mem_total, false);
        for (unsigned j = 0; g->mig_enabled && j < g->n_migs; j++)
            add_dev(g->migs[j].name, g->migs[j].uuid, g->migs[j].mem_total, true);
    }
    vis_free(&node);
    mps_setup(atoi(node.driver_version) >= MPS_V3_MIN_DRIVER);
    init_result = n_devs ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

_public_ CUresult cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&load_once, load);
    return init_result;
}

_public_ CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    /* The real library knows its version without cuInit; the stand-in's version is the
     * simulated node's, which needs NVML. */
    pthread_once(&load_once, load);
    if (!loaded)
        return CUDA_ERROR_NOT_INITIALIZED;
    *version = driver_version;
    return CUDA_SUCCESS;
}

static CUresult device(CUdevice dev, struct cu_dev **out)
{
    if (init_result != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= n_devs)
        return CUDA_ERROR_INVALID_DEVICE;
    *out = &devs[dev];
    return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceGetCount(int *count)
{
    if (init_result != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = n_devs;
    return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceGet(CUdevice *device_out, int ordinal)
{
    if (init_result != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= n_devs)
        return CUDA_ERROR_INVALID_DEVICE;
    *device_out = ordinal;
    return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    struct cu_dev *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", d->name);
    return CUDA_SUCCESS;
}

/* v1 and v2 answer alike here: the MIG device's own UUID for a MIG device. */
_public_ CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    struct cu_dev *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    *uuid = d->uuid;
    return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

_public_ CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    struct cu_dev *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = d->total;
    return CUDA_SUCCESS;
}

/* Legacy 32-bit entry point: a size that does not fit is clamped. */
_public_ CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t b;
    CUresult r = bytes ? cuDeviceTotalMem_v2(&b, dev) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *bytes = b > UINT_MAX ? UINT_MAX : (unsigned int)b;
    return r;
}

_public_ CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    struct cu_dev *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    d->primary.refs++;
    pthread_mutex_unlock(&lock);
    *pctx = &d->primary;
    return CUDA_SUCCESS;
}

_public_ CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    struct cu_dev *d;
    CUresult r = device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&lock);
    if (d->primary.refs == 0) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--d->primary.refs == 0) {
        /* The context is destroyed with its last reference, and its memory with it. */
        for (struct cu_alloc **a = &allocs; *a;) {
            if ((*a)->dev != d) {
                a = &(*a)->next;
                continue;
            }
            struct cu_alloc *gone = *a;
            *a = gone->next;
            free(gone);
        }
        d->used = 0;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

_public_ CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

static bool is_primary(CUcontext ctx)
{
    for (int i = 0; i < n_devs; i++)
        if (ctx == &devs[i].primary)
            return true;
    return false;
}

_public_ CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (init_result != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx && !is_primary(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    current = ctx;
    return CUDA_SUCCESS;
}

_public_ CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    if (init_result != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = current;
    return CUDA_SUCCESS;
}

/* What this process may hold on the device: its memory, its MPS limit, and the hard limit
 * on its cgroup or an ancestor now (a limit set after start counts, as the kernel's does).
 * MIG devices have no cgroup limits (NVML refuses them). *total (when asked): what
 * cuMemGetInfo reports as total: the device's memory, or the hard limit of the process's
 * own cgroup (NVIDIA: a limit on a parent or an MPS limit leaves the whole GPU there). */
static uint64_t capacity(const struct cu_dev *d, uint64_t *total)
{
    uint64_t cap = d->total < d->mps_limit ? d->total : d->mps_limit;
    if (total)
        *total = d->total;
    char *cg = d->is_mig ? NULL : sim_cg_self();
    if (cg) {
        uint64_t hard = sim_cg_hard_limit(cg, d->uuid_text), soft, own;
        cap = hard < cap ? hard : cap;
        if (total && sim_cg_get(cg, d->uuid_text, &soft, &own) == 0 && own < *total)
            *total = own;
        free(cg);
    }
    return cap;
}

/* Reserve size bytes on the current context's device at an address from *next. */
static CUresult alloc(CUdeviceptr *dptr, size_t size, CUdeviceptr *next, CUdeviceptr limit)
{
    if (init_result != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = current;
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = CUDA_SUCCESS;
    struct cu_dev *d = ctx->dev;
    uint64_t cap = capacity(d, NULL);
    pthread_mutex_lock(&lock);
    /* Real allocations come in 2 MiB pages; so do the fake addresses. */
    CUdeviceptr span = ((CUdeviceptr)size + 0x1fffff) & ~(CUdeviceptr)0x1fffff;
    if (ctx->refs == 0)
        r = CUDA_ERROR_CONTEXT_IS_DESTROYED;
    else if (d->used > cap || size > cap - d->used || span > limit - *next)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        struct cu_alloc *a = calloc(1, sizeof(*a));
        if (!a) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            *a = (struct cu_alloc){ .ptr = *next, .size = size, .dev = d, .next = allocs };
            allocs = a;
            d->used += size;
            *dptr = *next;
            *next += span;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

_public_ CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return alloc(dptr, bytesize, &next_addr, ~0ULL);
}

_public_ CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    CUdeviceptr p;
    CUresult r = dptr ? alloc(&p, bytesize, &next_addr_v1, 0x100000000ULL) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)p;
    return r;
}

_public_ CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    if (init_result != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (struct cu_alloc **a = &allocs; *a; a = &(*a)->next) {
        if ((*a)->ptr != dptr)
            continue;
        struct cu_alloc *gone = *a;
        *a = gone->next;
        gone->dev->used -= gone->size;
        free(gone);
        r = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

_public_ CUresult cuMemFree(CUdeviceptr_v1 dptr) { return cuMemFree_v2(dptr); }

/* free: what the limits leave of the current context's device; total: see capacity(). */
_public_ CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    if (init_result != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!free_bytes || !total_bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = current;
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    uint64_t total, cap = capacity(ctx->dev, &total);
    pthread_mutex_lock(&lock);
    CUresult r = ctx->refs == 0 ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_SUCCESS;
    size_t used = ctx->dev->used;
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS) {
        *free_bytes = used < cap ? (size_t)(cap - used) : 0;
        *total_bytes = (size_t)total;
    }
    return r;
}

/* Legacy 32-bit entry point: sizes that do not fit are clamped. */
_public_ CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total_bytes)
{
    size_t f, t;
    CUresult r = free_bytes && total_bytes ? cuMemGetInfo_v2(&f, &t) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        *free_bytes = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
        *total_bytes = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    }
    return r;
}

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
    { CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library" },
    { CUDA_ERROR_INSUFFICIENT_DRIVER, "CUDA_ERROR_INSUFFICIENT_DRIVER",
      "CUDA driver version is insufficient for CUDA runtime version" },
    { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS" },
    { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed" },
    { CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted" },
    { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
      "system has unsupported display driver / cuda driver combination" },
    { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static CUresult describe(CUresult error, const char **out, bool name)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ELEMENTSOF(errors); i++) {
        if (errors[i].code == error) {
            *out = name ? errors[i].name : errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

_public_ CUresult cuGetErrorString(CUresult error, const char **pStr) { return describe(error, pStr, false); }
_public_ CUresult cuGetErrorName(CUresult error, const char **pStr) { return describe(error, pStr, true); }
