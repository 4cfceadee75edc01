/* Event sets: registrations per device, a FIFO of pending events per set, and a
 * condition variable (CLOCK_MONOTONIC) that nvmlEventSetWait blocks on.
 *
 * NVML does not say whether a wait in progress sees a device registered after it began
 * (the driver may fix what it listens to when the wait starts), so the simulator takes
 * the conservative reading: such a registration is pending until the set's next wait
 * begins, and events on it before then are not delivered to the set at all. A client
 * that relies on a long wait noticing a new registration fails here as it could on a
 * real node. */
#include <errno.h>
#include <time.h>

#include "sim-state.h"

#define SIM_SUPPORTED_EVENTS                                                          \
    (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypeXidCriticalError)

struct sim_event {
    struct sim_event *next;
    nvmlEventData_t data;
};

struct sim_reg {
    struct sim_device *gpu;
    unsigned long long mask;
    bool pending;              /* made during a wait: live from the set's next wait */
};

struct nvmlEventSet_st {
    struct nvmlEventSet_st *next;
    pthread_cond_t cond;
    struct sim_reg *regs;
    size_t n_regs, alloc_regs;
    struct sim_event *head, *tail;
    unsigned n_waiting;        /* waits in progress on this set */
};

static struct nvmlEventSet_st *sets;
long sim_wait_error_count;
nvmlReturn_t sim_wait_error_code;

static bool known_set_locked(nvmlEventSet_t s)
{
    for (struct nvmlEventSet_st *p = sets; p; p = p->next)
        if (p == s)
            return true;
    return false;
}

_public_ nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    nvmlReturn_t r = sim_initialized();
    if (r)
        return r;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct nvmlEventSet_st *s = xcalloc(1, sizeof(*s));
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_lock(&sim_lock);
    s->next = sets;
    sets = s;
    pthread_mutex_unlock(&sim_lock);
    *set = s;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    nvmlReturn_t r = sim_initialized();
    if (r)
        return r;
    pthread_mutex_lock(&sim_lock);
    struct nvmlEventSet_st **pp = &sets;
    while (*pp && *pp != set)
        pp = &(*pp)->next;
    if (!*pp) {
        pthread_mutex_unlock(&sim_lock);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *pp = set->next;
    pthread_mutex_unlock(&sim_lock);
    /* A waiter still blocked on this set is the caller's bug, as with real NVML. */
    for (struct sim_event *e = set->head, *n; e; e = n) {
        n = e->next;
        free(e);
    }
    pthread_cond_destroy(&set->cond);
    free(set->regs);
    free(set);
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    struct sim_device *d;
    nvmlReturn_t r = sim_dev(device, SIM_ANY, &d);
    if (r)
        return r;
    if (!eventTypes)
        return NVML_ERROR_INVALID_ARGUMENT;
    *eventTypes = SIM_SUPPORTED_EVENTS;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set)
{
    struct sim_device *d;
    nvmlReturn_t r = sim_dev(device, SIM_ANY, &d);
    if (r)
        return r;
    struct sim_device *gpu = d->is_mig ? d->parent : d;
    if (!gpu->events_supported)
        return NVML_ERROR_NOT_SUPPORTED;
    if (eventTypes & ~(unsigned long long)nvmlEventTypeAll)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!eventTypes || (eventTypes & ~(unsigned long long)SIM_SUPPORTED_EVENTS))
        return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&sim_lock);
    if (!known_set_locked(set)) {
        pthread_mutex_unlock(&sim_lock);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    size_t i;
    for (i = 0; i < set->n_regs && set->regs[i].gpu != gpu; i++)
        ;
    if (i == set->n_regs) {
        set->regs = grow_array(set->regs, &set->alloc_regs, i + 1, sizeof(*set->regs));
        set->regs[set->n_regs++] = (struct sim_reg){ gpu, 0, set->n_waiting > 0 };
    }
    set->regs[i].mask |= eventTypes;
    pthread_mutex_unlock(&sim_lock);
    return NVML_SUCCESS;
}

static void queue_locked(struct nvmlEventSet_st *s, struct sim_device *gpu, unsigned long long type,
                         unsigned long long data, unsigned gi, unsigned ci)
{
    struct sim_event *e = xcalloc(1, sizeof(*e));
    e->data = (nvmlEventData_t){
        .device = gpu ? (nvmlDevice_t)(void *)gpu : NULL,
        .eventType = type,
        .eventData = data,
        .gpuInstanceId = gi,
        .computeInstanceId = ci,
    };
    if (s->tail)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    pthread_cond_signal(&s->cond);
}

void sim_events_post_locked(struct sim_device *gpu, unsigned long long type, unsigned long long data,
                            unsigned gi, unsigned ci)
{
    for (struct nvmlEventSet_st *s = sets; s; s = s->next)
        for (size_t i = 0; i < s->n_regs; i++)
            if (s->regs[i].gpu == gpu && !s->regs[i].pending && (s->regs[i].mask & type))
                queue_locked(s, gpu, type, data, gi, ci);
}

void sim_events_wake_all_locked(void)
{
    for (struct nvmlEventSet_st *s = sets; s; s = s->next)
        pthread_cond_broadcast(&s->cond);
}

void sim_events_post_unattributed_locked(unsigned long long type, unsigned long long data)
{
    for (struct nvmlEventSet_st *s = sets; s; s = s->next)
        for (size_t i = 0; i < s->n_regs; i++)
            if (!s->regs[i].pending && (s->regs[i].mask & type)) {
                queue_locked(s, NULL, type, data, SIM_UNATTRIBUTED, SIM_UNATTRIBUTED);
                break;
            }
}

static nvmlReturn_t wait_event(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeoutms, bool legacy)
{
    nvmlReturn_t r = sim_initialized();
    if (r)
        return r;
    if (!data)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeoutms / 1000;
    deadline.tv_nsec += (long)(timeoutms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&sim_lock);
    if (!known_set_locked(set)) {
        pthread_mutex_unlock(&sim_lock);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < set->n_regs; i++)
        set->regs[i].pending = false;
    set->n_waiting++;
    /* a wait-error command also fails a wait already in progress, as a driver fault
     * would: otherwise a long timeout would hide it until the wait ends */
    for (;;) {
        if (sim_wait_error_count) {
            if (sim_wait_error_count > 0)
                sim_wait_error_count--;
            r = sim_wait_error_code;
            set->n_waiting--;
            pthread_mutex_unlock(&sim_lock);
            return r;
        }
        if (set->head)
            break;
        int e = pthread_cond_timedwait(&set->cond, &sim_lock, &deadline);
        if (e == ETIMEDOUT && !set->head && !sim_wait_error_count) {
            set->n_waiting--;
            pthread_mutex_unlock(&sim_lock);
            return NVML_ERROR_TIMEOUT;
        }
    }
    set->n_waiting--;
    struct sim_event *ev = set->head;
    set->head = ev->next;
    if (!set->head)
        set->tail = NULL;
    pthread_mutex_unlock(&sim_lock);
    if (legacy) {
        /* Legacy callers pass the 24-byte layout without GI/CI ids. */
        nvmlEventData_legacy_t *l = (nvmlEventData_legacy_t *)(void *)data;
        *l = (nvmlEventData_legacy_t){ ev->data.device, ev->data.eventType, ev->data.eventData };
    } else
        *data = ev->data;
    free(ev);
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    return wait_event(set, data, timeoutms, false);
}
_public_ nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    return wait_event(set, data, timeoutms, true);
}
