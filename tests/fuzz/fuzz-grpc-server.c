/* Fuzz target: bytes from a peer into a gRPC server session (nghttp2_session_mem_recv
 * plus everything of ours behind it: header checks, framing, dispatch, streams, replies,
 * teardown). Built with libFuzzer when the compiler has it (-DGDP_LIBFUZZER); with gcc
 * the plain main() below replays files and directories, which is how the checked-in
 * corpus runs as a meson test. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "grpc/grpc_internal.h"
#include "tests/common/scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct loop *loop;
static struct grpc_server *server;
static const char *sock_dir; /* a scratch directory: removed at exit and on abort */
static char sock_path[108]; /* sizeof(sun_path) */

static void echo(void *ud, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    reply->data = xmalloc(len);
    if (len)
        memcpy(reply->data, req, len);
    reply->len = len;
}

static void fail(void *ud, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    reply->status = GRPC_STATUS_INVALID_ARGUMENT;
    reply->message = xstrdup("bad \xff request %");
}

/* Sends the request back twice (the second coalesces over the first if it is not on
 * the wire yet) and, if the first byte is even, finishes; otherwise stays open until
 * the connection goes. */
static int stream_open(void *ud, struct grpc_stream *s, const uint8_t *req, size_t len,
                       char **message)
{
    if (len > 0 && req[0] == 'x') {
        *message = xstrdup("refused");
        return GRPC_STATUS_FAILED_PRECONDITION;
    }
    (void)grpc_stream_send(s, req, len);
    (void)grpc_stream_send(s, req, len);
    if (len == 0 || req[0] % 2 == 0)
        grpc_stream_finish(s, GRPC_STATUS_OK, NULL);
    return GRPC_STATUS_OK;
}

static void stream_closed(void *ud, struct grpc_stream *s) {}

static const struct grpc_method methods[] = {
    { .path = "/test.Echo/Unary", .unary = echo },
    { .path = "/test.Echo/Fail", .unary = fail },
    { .path = "/test.Echo/Stream", .stream_open = stream_open, .stream_closed = stream_closed },
};

static void quit_cb(struct loop *l, struct loop_timer *t, void *userdata) { loop_quit(l, 0); }

/* Run what is due now (flush timers, EOF on the connection), then return. */
static void loop_turn(void)
{
    (void)loop_timer_add(loop, 0, quit_cb, NULL);
    (void)loop_run(loop);
}

static void drain(int fd)
{
    uint8_t buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

static void setup(void)
{
    if (loop)
        return;
    log_set_level(LOG_ERROR);
    sock_dir = scratch_dir("gdp-fuzz-grpc-");
    if (loop_new(&loop) < 0)
        abort();
    if ((size_t)snprintf(sock_path, sizeof(sock_path), "%s/s", sock_dir) >= sizeof(sock_path))
        abort(); /* $TMPDIR too long for a socket path */
    struct grpc_server_limits lim = { .max_message = 64 * 1024, .max_streams = 16 };
    if (grpc_server_new(loop, sock_path, methods, ELEMENTSOF(methods), NULL, &lim, &server) < 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    struct grpc_conn *c = grpc_server_adopt(server, sv[0]);
    if (!c)
        abort();
    /* Two feeds, split in the middle: state must carry across reads. */
    size_t half = size / 2;
    int r = grpc_server_conn_feed(c, data, half);
    drain(sv[1]);
    if (r >= 0) {
        loop_turn();
        drain(sv[1]);
        /* loop_turn may have freed it (flush error); the count tells. */
        if (grpc_server_connections(server) > 0)
            r = grpc_server_conn_feed(c, data + half, size - half);
        drain(sv[1]);
        if (r >= 0 && grpc_server_connections(server) > 0)
            loop_turn();
        drain(sv[1]);
    }
    /* Peer hangs up: the server frees the connection and every stream on it. */
    close(sv[1]);
    loop_turn();
    if (grpc_server_connections(server) != 0)
        abort();
    return 0;
}

#ifndef GDP_LIBFUZZER
/* --mutate N: besides each input, N deterministic mutants of it (bit flips, byte
 * overwrites, truncation), so the plain driver explores a little without libFuzzer. */
static unsigned mutations;
static unsigned seed = 1;

static void run_mutants(const uint8_t *buf, size_t len)
{
    if (len == 0)
        return;
    _cleanup_free_ uint8_t *m = xmalloc(len);
    for (unsigned i = 0; i < mutations; i++) {
        memcpy(m, buf, len);
        size_t n = len;
        unsigned edits = 1 + (unsigned)rand_r(&seed) % 4;
        for (unsigned e = 0; e < edits; e++) {
            size_t at = (size_t)rand_r(&seed) % n;
            switch (rand_r(&seed) % 3) {
            case 0:
                m[at] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
                break;
            case 1:
                m[at] = (uint8_t)rand_r(&seed);
                break;
            default:
                n = at + 1;
                break;
            }
        }
        LLVMFuzzerTestOneInput(m, n);
    }
}

static int run_file(const char *path)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    _cleanup_free_ uint8_t *buf = xmalloc((size_t)st.st_size);
    ssize_t n = read(fd, buf, (size_t)st.st_size);
    if (n != st.st_size)
        return -1;
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    run_mutants(buf, (size_t)n);
    return 0;
}

int main(int argc, char **argv)
{
    unsigned runs = 0;
    int first = 1;
    if (argc > 2 && streq(argv[1], "--mutate")) {
        mutations = (unsigned)strtoul(argv[2], NULL, 10);
        first = 3;
    }
    for (int i = first; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            if (run_file(argv[i]) < 0)
                return 1;
            runs++;
            continue;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            _cleanup_free_ char *p = xasprintf("%s/%s", argv[i], de->d_name);
            if (run_file(p) < 0) {
                closedir(d);
                return 1;
            }
            runs++;
        }
        closedir(d);
    }
    grpc_server_free(server);
    loop_free(loop);
    scratch_remove(sock_dir);
    printf("%u inputs, %u mutants each\n", runs, mutations);
    return runs > 0 ? 0 : 1;
}
#endif
