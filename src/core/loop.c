/* The epoll loop behind loop.h.
 *
 * fd registrations are small heap objects whose pointer is the epoll cookie. Deleting
 * one only marks it dead and parks it on a graveyard list that is emptied after the
 * current batch, so an event already fetched for it is recognised and dropped, even
 * if the fd number was reused by a new registration in the meantime.
 *
 * Timers live in a binary min-heap ordered by (deadline, sequence); the epoll_wait
 * timeout is the distance to the root (or to the quiet deadline, when one is due), or -1
 * when neither is armed. */
#include <sys/epoll.h>
#include <time.h>

#include "loop.h"
#include "macro.h"

struct loop_io {
    int fd;
    bool dead;
    loop_io_fn fn;
    void *userdata;
    struct loop_io *next_dead;
};

struct loop_timer {
    uint64_t deadline_ms;
    uint64_t seq;
    size_t idx;          /* position in the heap, SIZE_MAX while running */
    loop_timer_fn fn;
    void *userdata;
};

struct loop {
    int epfd;
    /* fd -> registration; fds are small, dense integers. */
    struct loop_io **ios;
    size_t n_ios;
    struct loop_io *graveyard;

    struct loop_timer **heap;
    size_t n_heap, alloc_heap;
    uint64_t next_seq;

    /* loop_set_quiet: quiet_due is when fn runs unless another fd event comes first;
     * 0 while no event came since it last ran */
    unsigned quiet_ms;
    loop_quiet_fn quiet_fn;
    void *quiet_userdata;
    uint64_t quiet_due;

    bool quit;
    int quit_code;
};

uint64_t loop_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t loop_now_ms(void) { return loop_now_us() / 1000u; }

int loop_new(struct loop **out)
{
    int fd = epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct loop *l = xcalloc(1, sizeof(*l));
    l->epfd = fd;
    *out = l;
    return 0;
}

static void loop_bury(struct loop *l)
{
    while (l->graveyard) {
        struct loop_io *io = l->graveyard;
        l->graveyard = io->next_dead;
        free(io);
    }
}

void loop_free(struct loop *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n_ios; i++)
        free(l->ios[i]);
    free(l->ios);
    loop_bury(l);
    for (size_t i = 0; i < l->n_heap; i++)
        free(l->heap[i]);
    free(l->heap);
    close(l->epfd);
    free(l);
}

int loop_add_io(struct loop *l, int fd, uint32_t events, loop_io_fn fn, void *userdata)
{
    if (fd < 0 || !fn)
        return -EINVAL;
    if ((size_t)fd < l->n_ios && l->ios[fd])
        return -EEXIST;
    if ((size_t)fd >= l->n_ios) {
        size_t n = (size_t)fd + 1;
        if (n < l->n_ios * 2)
            n = l->n_ios * 2;
        l->ios = xreallocarray(l->ios, n, sizeof(*l->ios));
        memset(l->ios + l->n_ios, 0, (n - l->n_ios) * sizeof(*l->ios));
        l->n_ios = n;
    }
    struct loop_io *io = xcalloc(1, sizeof(*io));
    io->fd = fd;
    io->fn = fn;
    io->userdata = userdata;
    struct epoll_event ev = { .events = events, .data.ptr = io };
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int r = -errno;
        free(io);
        return r;
    }
    l->ios[fd] = io;
    return 0;
}

static struct loop_io *loop_find(struct loop *l, int fd)
{
    if (fd < 0 || (size_t)fd >= l->n_ios)
        return NULL;
    return l->ios[fd];
}

int loop_mod_io(struct loop *l, int fd, uint32_t events)
{
    struct loop_io *io = loop_find(l, fd);
    if (!io)
        return -ENOENT;
    struct epoll_event ev = { .events = events, .data.ptr = io };
    if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
        return -errno;
    return 0;
}

int loop_del_io(struct loop *l, int fd)
{
    struct loop_io *io = loop_find(l, fd);
    if (!io)
        return -ENOENT;
    /* The fd may already be closed by a careless caller; the registration goes
     * anyway so that a reused fd number can be registered again. */
    (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
    l->ios[fd] = NULL;
    io->dead = true;
    io->next_dead = l->graveyard;
    l->graveyard = io;
    return 0;
}

/* ------------------------------------------------------------------ timers */

static bool timer_before(const struct loop_timer *a, const struct loop_timer *b)
{
    if (a->deadline_ms != b->deadline_ms)
        return a->deadline_ms < b->deadline_ms;
    return a->seq < b->seq;
}

static void heap_set(struct loop *l, size_t i, struct loop_timer *t)
{
    l->heap[i] = t;
    t->idx = i;
}

static void heap_up(struct loop *l, size_t i)
{
    struct loop_timer *t = l->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!timer_before(t, l->heap[parent]))
            break;
        heap_set(l, i, l->heap[parent]);
        i = parent;
    }
    heap_set(l, i, t);
}

static void heap_down(struct loop *l, size_t i)
{
    struct loop_timer *t = l->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->n_heap)
            break;
        if (c + 1 < l->n_heap && timer_before(l->heap[c + 1], l->heap[c]))
            c++;
        if (!timer_before(l->heap[c], t))
            break;
        heap_set(l, i, l->heap[c]);
        i = c;
    }
    heap_set(l, i, t);
}

static void heap_remove(struct loop *l, size_t i)
{
    struct loop_timer *last = l->heap[--l->n_heap];
    if (i == l->n_heap)
        return;
    heap_set(l, i, last);
    heap_down(l, i);
    heap_up(l, last->idx);
}

struct loop_timer *loop_timer_add(struct loop *l, uint64_t ms, loop_timer_fn fn, void *userdata)
{
    struct loop_timer *t = xcalloc(1, sizeof(*t));
    t->deadline_ms = loop_now_ms() + ms;
    t->seq = l->next_seq++;
    t->fn = fn;
    t->userdata = userdata;
    l->heap = grow_array(l->heap, &l->alloc_heap, l->n_heap + 1, sizeof(*l->heap));
    l->heap[l->n_heap] = t;
    t->idx = l->n_heap++;
    heap_up(l, t->idx);
    return t;
}

void loop_timer_cancel(struct loop *l, struct loop_timer *t)
{
    if (!t)
        return;
    if (t->idx < l->n_heap && l->heap[t->idx] == t)
        heap_remove(l, t->idx);
    free(t);
}

/* Fire the timers that are due. Only timers armed before this pass started run, so a
 * callback re-arming itself with 0 ms cannot starve the fds. */
static void loop_run_timers(struct loop *l)
{
    uint64_t now = loop_now_ms();
    uint64_t seq_limit = l->next_seq;
    while (l->n_heap > 0 && !l->quit) {
        struct loop_timer *t = l->heap[0];
        if (t->deadline_ms > now || t->seq >= seq_limit)
            break;
        heap_remove(l, 0);
        t->idx = SIZE_MAX;
        t->fn(l, t, t->userdata);
        free(t);
    }
}

void loop_set_quiet(struct loop *l, unsigned ms, loop_quiet_fn fn, void *userdata)
{
    l->quiet_ms = ms;
    l->quiet_fn = fn;
    l->quiet_userdata = userdata;
    l->quiet_due = 0;
}

static void loop_run_quiet(struct loop *l)
{
    if (!l->quiet_due || l->quit || loop_now_ms() < l->quiet_due)
        return;
    l->quiet_due = 0;
    l->quiet_fn(l, l->quiet_userdata);
}

static int loop_timeout(struct loop *l)
{
    if (l->n_heap == 0 && !l->quiet_due)
        return -1;
    uint64_t now = loop_now_ms();
    uint64_t when = l->n_heap ? l->heap[0]->deadline_ms : UINT64_MAX;
    if (l->quiet_due)
        when = u64_min(when, l->quiet_due);
    if (when <= now)
        return 0;
    /* Clamp: epoll_wait takes an int; waking up early is harmless. */
    return (int)u64_min(when - now, 24u * 3600u * 1000u);
}

int loop_run(struct loop *l)
{
    struct epoll_event evs[64];
    l->quit = false;
    while (!l->quit) {
        int n = epoll_wait(l->epfd, evs, (int)ELEMENTSOF(evs), loop_timeout(l));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        for (int i = 0; i < n && !l->quit; i++) {
            struct loop_io *io = evs[i].data.ptr;
            if (io->dead)
                continue;
            io->fn(l, io->fd, evs[i].events, io->userdata);
        }
        if (n > 0 && l->quiet_fn)
            l->quiet_due = loop_now_ms() + l->quiet_ms;
        loop_bury(l);
        loop_run_timers(l);
        loop_run_quiet(l);
    }
    loop_bury(l);
    return l->quit_code;
}

void loop_quit(struct loop *l, int code)
{
    l->quit = true;
    l->quit_code = code;
}
