/* core/listener: every pending connection accepted, `batch` per wakeup at most; an
 * accept failure handed to the owner (EMFILE forced with RLIMIT_NOFILE): RETRY says
 * so to the next failure, PAUSE unwatches the fd for the backoff's delays (doubling
 * across pauses), and the first accepted connection after it resets the backoff. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/listener.h"
#include "core/loop.h"
#include "tests/common/check.h"

int test_failures;

static struct {
    struct listener ln;
    unsigned conns, errors, retried_seen, pauses;
    unsigned want;           /* quit after this many connections */
    enum listener_next answer;
    int last_err;
    uint64_t pause_delays[4];
} t;

static void on_conn(void *userdata, int cfd)
{
    close(cfd);
    if (++t.conns == t.want)
        loop_quit(t.ln.loop, 0);
}

static enum listener_next on_error(void *userdata, int err, bool retried)
{
    t.errors++;
    t.last_err = err;
    t.retried_seen += retried;
    enum listener_next a = t.answer;
    if (a == LISTENER_RETRY && t.errors >= 2)
        a = LISTENER_PAUSE; /* one retry, then pause */
    if (a == LISTENER_PAUSE) {
        if (t.pauses < 4)
            t.pause_delays[t.pauses] = t.ln.pause.delay_ms; /* before this pause's step */
        t.pauses++;
        if (t.pauses == 3) { /* enough pauses seen: give the fds back */
            struct rlimit rl;
            getrlimit(RLIMIT_NOFILE, &rl);
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    return a;
}

static const struct listener_ops ops = { .conn = on_conn, .error = on_error };

static void watchdog(struct loop *l, struct loop_timer *timer, void *userdata)
{
    loop_quit(l, 1);
}

static int listen_tcp(unsigned short *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        return -1;
    *port = ntohs(sa.sin_port);
    return fd;
}

static int dial(unsigned short port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int main(void)
{
    struct loop *l;
    unsigned short port = 0;
    CHECK(loop_new(&l) == 0);
    int lfd = listen_tcp(&port);
    CHECK(lfd >= 0);

    /* Five waiting connections, two per wakeup: all five accepted. */
    int c[8];
    for (int i = 0; i < 5; i++)
        CHECK((c[i] = dial(port)) >= 0);
    t.want = 5;
    listener_init(&t.ln, l, lfd, 2, BACKOFF_INIT(10, 40, 0, false), &ops, NULL);
    CHECK(listener_start(&t.ln) == 0);
    CHECK(listener_start(&t.ln) == 0); /* already watched: nothing to do */
    struct loop_timer *wd = loop_timer_add(l, 5000, watchdog, NULL);
    CHECK(loop_run(l) == 0);
    loop_timer_cancel(l, wd);
    CHECK(t.conns == 5 && t.errors == 0);

    /* Out of fds: the first failure is retried once (the owner "made room"), the next is
     * paused, 10 then 20 ms (the delays double across pauses), then the fds come back
     * and the connection is accepted; that resets the backoff. */
    CHECK((c[5] = dial(port)) >= 0);
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    int probe = dup(0);
    CHECK(probe >= 0);
    close(probe);
    rl.rlim_cur = (rlim_t)probe; /* every fd below the lowest free one is in use */
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    t.answer = LISTENER_RETRY;
    t.want = 6;
    uint64_t t0 = loop_now_ms();
    wd = loop_timer_add(l, 5000, watchdog, NULL);
    CHECK(loop_run(l) == 0);
    loop_timer_cancel(l, wd);
    CHECK(t.conns == 6);
    CHECK(t.last_err == EMFILE);
    CHECK(t.retried_seen >= 1);                 /* the failure after a RETRY knows it */
    CHECK(t.pauses == 3);
    CHECK(t.pause_delays[0] == 0 && t.pause_delays[1] == 10 && t.pause_delays[2] == 20);
    CHECK(loop_now_ms() - t0 >= 10 + 20);       /* the fd was not watched meanwhile */
    CHECK(t.ln.pause.failures == 0);            /* reset by the accepted connection */
    CHECK(t.ln.listening && !t.ln.timer);

    /* Any other answer: STOP leaves the fd watched and takes no pause. */
    listener_stop(&t.ln);
    CHECK(!t.ln.listening && !t.ln.timer);
    listener_stop(&t.ln); /* twice is fine */
    struct listener zero = { 0 };
    listener_stop(&zero); /* never started */

    CHECK(listener_out_of_fds(EMFILE) && listener_out_of_fds(ENFILE) &&
          listener_out_of_fds(ENOBUFS) && listener_out_of_fds(ENOMEM));
    CHECK(!listener_out_of_fds(ECONNABORTED) && !listener_out_of_fds(EAGAIN));
    for (int i = 0; i < 6; i++)
        close(c[i]);
    close(lfd);
    loop_free(l);
    return test_failures ? 1 : 0;
}
