/* The one event loop. It owns every fd of the plugin: listening and connected
 * sockets, signalfd, inotify, timers and the eventfd that the health thread uses to
 * hand events over. Single-threaded: every function here must be called on the loop
 * thread, except that any thread may write to an eventfd the loop watches.
 *
 * No polling: epoll_wait blocks with the timeout of the nearest timer, or forever. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct loop;
struct loop_timer;

/* events is the epoll mask that fired (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR). */
typedef void (*loop_io_fn)(struct loop *l, int fd, uint32_t events, void *userdata);
typedef void (*loop_timer_fn)(struct loop *l, struct loop_timer *t, void *userdata);
typedef void (*loop_quiet_fn)(struct loop *l, void *userdata);

/* Returns 0 or -errno. */
int loop_new(struct loop **out);
/* Frees the loop and any timers still armed; does not close watched fds. */
void loop_free(struct loop *l);

/* Watch fd for `events` (EPOLLIN / EPOLLOUT / ...). One registration per fd.
 * Returns 0 or -errno. */
int loop_add_io(struct loop *l, int fd, uint32_t events, loop_io_fn fn, void *userdata);
int loop_mod_io(struct loop *l, int fd, uint32_t events);
/* Stop watching fd. Safe to call from inside any callback, including for an fd whose
 * event is still pending in the current batch: that event is then not delivered. */
int loop_del_io(struct loop *l, int fd);

/* One-shot timer firing after `ms` milliseconds (CLOCK_MONOTONIC). The timer object is
 * owned by the loop and freed right after its callback returns, or by
 * loop_timer_cancel(). Returns NULL only on allocation failure (which aborts). */
struct loop_timer *loop_timer_add(struct loop *l, uint64_t ms, loop_timer_fn fn, void *userdata);
/* Cancel a pending timer. NULL is ignored. Must not be called on a timer whose
 * callback is running (it is freed after that anyway). */
void loop_timer_cancel(struct loop *l, struct loop_timer *t);

/* Call fn once each time the loop has gone `ms` milliseconds without an fd event after
 * one or more: what a burst of work (a start, a round of API writes and their watch
 * echo, an RPC) freed has been freed by then. Costs nothing while the loop stays idle
 * (no event, no wakeup); fn NULL turns it off. One per loop. */
void loop_set_quiet(struct loop *l, unsigned ms, loop_quiet_fn fn, void *userdata);

/* Run until loop_quit(); returns the code given to loop_quit(), or -errno if epoll
 * fails. */
int loop_run(struct loop *l);
void loop_quit(struct loop *l, int code);

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t loop_now_ms(void);
/* Microseconds on CLOCK_MONOTONIC. */
uint64_t loop_now_us(void);
