/* core/loop: timer order and cancel, fd deletion inside a batch, loop_quit after the
 * current callback, 0 ms timers re-arming themselves do not starve fds, the quiet hook
 * runs once after fd events and never without one. */
#include <fcntl.h>
#include <stdio.h>

#include "tests/common/check.h"

#include "core/loop.h"
#include "core/macro.h"

int test_failures;

static char order[16];
static size_t n_order;

static void mark_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    order[n_order++] = *(const char *)userdata;
    if (*(const char *)userdata == 'd')
        loop_quit(l, 7);
}

static void test_timers(void)
{
    struct loop *l;
    CHECK(loop_new(&l) == 0);
    n_order = 0;
    loop_timer_add(l, 30, mark_timer, "d");
    loop_timer_add(l, 10, mark_timer, "b");
    struct loop_timer *x = loop_timer_add(l, 15, mark_timer, "x");
    loop_timer_add(l, 20, mark_timer, "c");
    loop_timer_add(l, 0, mark_timer, "a");
    loop_timer_cancel(l, x);
    loop_timer_add(l, 60000, mark_timer, "z"); /* left armed: loop_free frees it */
    CHECK(loop_run(l) == 7);
    CHECK(n_order == 4 && memcmp(order, "abcd", 4) == 0);
    loop_free(l);
}

struct pair {
    int p[2];
    unsigned calls;
    struct pair *victim;
};

static void pipe_cb(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct pair *me = userdata;
    me->calls++;
    if (me->victim) {
        /* Delete and close the other one, whose event is pending in this batch, and
         * reuse its fd number at once for a new registration. */
        CHECK(loop_del_io(l, me->victim->p[0]) == 0);
        close(me->victim->p[0]);
        close(me->victim->p[1]);
        me->victim->victim = NULL;
        CHECK(pipe2(me->victim->p, O_CLOEXEC) == 0);
        CHECK(write(me->victim->p[1], "y", 1) == 1);
        me->victim = NULL;
    }
}

static void quit_timer(struct loop *l, struct loop_timer *t, void *userdata) { loop_quit(l, 0); }

static void test_delete_in_batch(void)
{
    struct loop *l;
    CHECK(loop_new(&l) == 0);
    struct pair a = { 0 }, b = { 0 };
    CHECK(pipe2(a.p, O_CLOEXEC) == 0 && pipe2(b.p, O_CLOEXEC) == 0);
    a.victim = &b;
    b.victim = &a;
    CHECK(loop_add_io(l, a.p[0], EPOLLIN, pipe_cb, &a) == 0);
    CHECK(loop_add_io(l, b.p[0], EPOLLIN, pipe_cb, &b) == 0);
    CHECK(write(a.p[1], "x", 1) == 1 && write(b.p[1], "x", 1) == 1);
    /* Both are ready in the same batch; whichever runs first deletes the other. The
     * quit timer runs after the batch: exactly one callback must have run. */
    loop_timer_add(l, 0, quit_timer, NULL);
    CHECK(loop_run(l) == 0);
    CHECK(a.calls + b.calls == 1);
    struct pair *first = a.calls ? &a : &b;
    struct pair *second = a.calls ? &b : &a;
    CHECK(first->calls == 1 && second->calls == 0);
    CHECK(loop_del_io(l, second->p[0]) == -ENOENT); /* already deleted */
    CHECK(loop_del_io(l, first->p[0]) == 0);
    loop_free(l);
    close(a.p[0]);
    close(a.p[1]);
    close(b.p[0]);
    close(b.p[1]);
}

static unsigned spins;

static void spin_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    spins++;
    loop_timer_add(l, 0, spin_timer, NULL);
}

static void quit_on_read(struct loop *l, int fd, uint32_t events, void *userdata)
{
    loop_quit(l, 3);
}

static void test_timer_cannot_starve_fds(void)
{
    struct loop *l;
    int p[2];
    CHECK(loop_new(&l) == 0);
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    CHECK(write(p[1], "x", 1) == 1);
    loop_timer_add(l, 0, spin_timer, NULL);
    CHECK(loop_add_io(l, p[0], EPOLLIN, quit_on_read, NULL) == 0);
    CHECK(loop_run(l) == 3);
    CHECK(spins <= 2);
    CHECK(loop_add_io(l, p[0], EPOLLIN, quit_on_read, NULL) == -EEXIST);
    loop_free(l);
    close(p[0]);
    close(p[1]);
}

static int quiets;

static void count_quiet(struct loop *l, void *userdata)
{
    quiets++;
    loop_quit(l, *(int *)userdata);
}

static void drain(struct loop *l, int fd, uint32_t events, void *userdata)
{
    char c;
    CHECK(read(fd, &c, 1) == 1);
}

static void quit_1_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    loop_quit(l, 1);
}

static void test_quiet(void)
{
    struct loop *l;
    int p[2], code = 2;
    CHECK(loop_new(&l) == 0);
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    loop_set_quiet(l, 10, count_quiet, &code);
    /* timers alone are no burst: the hook stays silent */
    loop_timer_add(l, 30, quit_1_timer, NULL);
    CHECK(loop_run(l) == 1);
    CHECK(quiets == 0);
    /* an fd event, then 10 ms without one: the hook runs, once */
    CHECK(loop_add_io(l, p[0], EPOLLIN, drain, NULL) == 0);
    CHECK(write(p[1], "x", 1) == 1);
    uint64_t t0 = loop_now_ms();
    CHECK(loop_run(l) == 2);
    CHECK(quiets == 1);
    CHECK(loop_now_ms() - t0 >= 10);
    loop_timer_add(l, 30, quit_1_timer, NULL);
    CHECK(loop_run(l) == 1);
    CHECK(quiets == 1);
    loop_free(l);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    test_timers();
    test_delete_in_batch();
    test_timer_cannot_starve_fds();
    test_quiet();
    printf("%d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
