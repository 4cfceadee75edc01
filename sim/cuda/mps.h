/* The simulated MPS (docs/simulator.md, "MPS"): what the nvidia-cuda-mps-control stand-in
 * (mps-control.c, mps-daemon.c) and the libcuda stand-in (mps-client.c) share: the
 * environment, the files in the pipe directory, the line protocol on its control socket
 * and the limit syntax.
 *
 * Protocol (AF_UNIX stream socket <pipe dir>/control, or a v3 namespace's
 * <pipe dir>/<server>/<ns>/control; one request per connection):
 *   "ctl <command line>\n"  a control command; the daemon answers the command's output
 *                           and closes: last line "status 0" or "status 1".
 *   "client <pid>\n"        a CUDA client (libcuda's cuInit); the daemon answers its
 *                           server's settings, "server <id>\n", "thread <pct>\n",
 *                           "pinned <dev> <bytes>\n"..., "ok\n" (through a namespace
 *                           also "namespace <name>\n", its limits), and keeps the connection:
 *                           the client is gone when it closes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MPS_PIPE_ENV "CUDA_MPS_PIPE_DIRECTORY"
#define MPS_LOG_ENV "CUDA_MPS_LOG_DIRECTORY"
#define MPS_PIPE_DEFAULT "/tmp/nvidia-mps"
#define MPS_LOG_DEFAULT "/var/log/nvidia-mps"
#define MPS_PINNED_ENV "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
#define MPS_THREAD_ENV "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
#define MPS_RECORD_ENV "MOCK_MPS_LOG"         /* the stand-in's recording */
#define MPS_DEBUG_ENV "MOCK_CUDA_MPS_DEBUG"   /* libcuda: the limits it took */
#define MPS_SOCKET "control"                  /* in the pipe directory */
#define MPS_PID_FILE "nvidia-cuda-mps-control.pid"
#define MPS_STATE_FILE "nvidia-sim-mps.state" /* the daemon's state, for people and tests */
#define MPS_CONTROL_LOG "control.log"         /* in the log directory */

#define MPS_MAX_LIMITS 64
#define MPS_V3_MIN_DRIVER 615 /* the first branch with MPS v3 (libcuda applies namespaces) */
#define MPS_KEY_LEN 96

/* One pinned-memory limit: `key` a device UUID or a decimal ordinal, "" every device. */
struct mps_limit {
    char key[MPS_KEY_LEN];
    uint64_t bytes;
};

/* "<n>" followed by K, M, G or T (binary units; an optional trailing B, either case). A
 * number without a unit is bytes when `unit_optional`, else refused. 0 or -1. */
int mps_parse_size(const char *s, bool unit_optional, uint64_t *out);
/* CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: "<dev>=<size>[,<dev>=<size>...]" (dev: ordinal or
 * UUID) or one "<size>" for every device. Number of limits, or -1 when malformed. */
int mps_parse_limits(const char *s, struct mps_limit *out, int max);
/* Percentage: a number in [0, 100] ("50", "12.5"). 0 or -1. */
int mps_parse_percent(const char *s, double *out);
/* <pipe dir>/<name> into buf (the env, else the default directory). */
void mps_pipe_path(char *buf, size_t len, const char *name);

/* The libcuda side (mps-client.c): connect to the daemon of CUDA_MPS_PIPE_DIRECTORY and
 * take its server's settings. The connection stays open for the life of the process. */
struct mps_server {
    char id[32];
    char ns[80]; /* v3: the namespace connected through, "" none */
    double thread; /* active thread percentage */
    struct mps_limit limits[MPS_MAX_LIMITS];
    int n_limits;
};
/* 0 and the settings, or -1 when no daemon answers there (not an MPS client). */
int mps_client_connect(struct mps_server *s);

/* The daemon (mps-daemon.c): serve the bound, listening socket `lfd` until `quit` or
 * SIGTERM, then remove the socket, pid and state files. `ready_fd` (unless -1) is closed
 * once the state file and the log say the daemon is up. The exit status. */
int mps_daemon_serve(int lfd, int ready_fd, const char *pipe_dir, const char *log_dir, bool multiuser,
                     bool v3);

/* MPS v3 (mps-v3.c, a daemon started with -p 3): a `server ...` or `namespace ...` command
 * (0, 1 refused; -1 neither); the namespaces' listening sockets; a client accepted on one
 * of them answered its namespace's "namespace <name>", "thread" and "pinned * <bytes>"
 * lines (false: lfd is no namespace's); state lines; everything removed at the end. */
int mps_v3_command(const char *pipe, int argc, char **argv, FILE *out);
int mps_v3_listen_fds(int *fds, int max);
bool mps_v3_client(int lfd, FILE *out);
void mps_v3_state(FILE *f);
void mps_v3_end(const char *pipe);
