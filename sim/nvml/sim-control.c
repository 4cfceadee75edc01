/* Run-time fault injection: a thread reads commands from the MOCK_NVML_CONTROL FIFO
 * (see docs/simulator.md) and applies them under sim_lock. The FIFO is opened O_RDWR so
 * that writers coming and going never produce EOF: the thread just blocks in read. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim-errors.h"
#include "sim-state.h"

static char *ack_path;

static void ack(const char *line)
{
    if (!ack_path)
        return;
    _cleanup_close_ int fd = open(ack_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "nvml-sim: control: cannot open ack file %s: %s\n", ack_path, strerror(errno));
        return;
    }
    _cleanup_free_ char *msg = xasprintf("%s\n", line);
    if (write(fd, msg, strlen(msg)) < 0)
        fprintf(stderr, "nvml-sim: control: writing ack file %s: %s\n", ack_path, strerror(errno));
}

static int parse_uint(const char *s, unsigned *v)
{
    char *end;
    if (!s || !*s || *s == '-')
        return -EINVAL;
    errno = 0;
    unsigned long x = strtoul(s, &end, 0);
    if (errno || *end || x > 0xffffffffUL)
        return -EINVAL;
    *v = (unsigned)x;
    return 0;
}

/* Apply one command. Returns NULL or a reason it was rejected. */
static const char *apply(char *line)
{
    char *argv[6];
    int argc = 0;
    for (char *tok = strtok(line, " \t"); tok; tok = strtok(NULL, " \t")) {
        if (argc == 6)
            return "too many arguments";
        argv[argc++] = tok;
    }
    if (argc == 0)
        return NULL;
    const char *cmd = argv[0];

    if (streq(cmd, "wait-error")) {
        if (argc == 2 && streq(argv[1], "clear")) {
            sim_wait_error_count = 0;
            return NULL;
        }
        nvmlReturn_t code;
        unsigned n = 0;
        if (argc != 3 || sim_parse_return(argv[1], &code) < 0)
            return "usage: wait-error <nvml code> <count|forever> | wait-error clear";
        if (!streq(argv[2], "forever") && (parse_uint(argv[2], &n) < 0 || n == 0))
            return "count must be a positive number or 'forever'";
        sim_wait_error_code = code;
        sim_wait_error_count = streq(argv[2], "forever") ? -1 : (long)n;
        sim_events_wake_all_locked();
        return NULL;
    }

    if (streq(cmd, "xid-unattributed")) {
        unsigned code;
        if (argc != 2 || parse_uint(argv[1], &code) < 0)
            return "usage: xid-unattributed <code>";
        sim_events_post_unattributed_locked(nvmlEventTypeXidCriticalError, code);
        return NULL;
    }

    if (argc < 2)
        return "missing UUID";
    struct sim_device *d = sim_find_uuid_locked(argv[1]);
    if (!d)
        return "unknown UUID";
    struct sim_device *gpu = d->is_mig ? d->parent : d;
    unsigned gi = d->is_mig ? d->gi->id : SIM_UNATTRIBUTED, ci = d->is_mig ? d->ci->id : SIM_UNATTRIBUTED;

    if (streq(cmd, "xid")) {
        unsigned code;
        if ((argc != 3 && argc != 5) || parse_uint(argv[2], &code) < 0)
            return "usage: xid <uuid> <code> [<gi> <ci>]";
        if (argc == 5) {
            if (d->is_mig)
                return "explicit GI/CI only with a GPU UUID";
            if (parse_uint(argv[3], &gi) < 0 || parse_uint(argv[4], &ci) < 0)
                return "GI and CI must be numbers";
        }
        sim_events_post_locked(gpu, nvmlEventTypeXidCriticalError, code, gi, ci);
    } else if (streq(cmd, "ecc")) {
        if (argc != 3 || (!streq(argv[2], "single") && !streq(argv[2], "double")))
            return "usage: ecc <uuid> single|double";
        sim_events_post_locked(gpu, streq(argv[2], "single") ? nvmlEventTypeSingleBitEccError
                                                              : nvmlEventTypeDoubleBitEccError,
                               0, gi, ci);
    } else if (streq(cmd, "lose") || streq(cmd, "restore") || streq(cmd, "probe-fail") ||
               streq(cmd, "probe-ok")) {
        if (argc != 2)
            return "usage: lose|restore|probe-fail|probe-ok <uuid>";
        if (streq(cmd, "lose")) {
            gpu->lost = true;
            /* Xid 79: "GPU has fallen off the bus". */
            sim_events_post_locked(gpu, nvmlEventTypeXidCriticalError, 79, SIM_UNATTRIBUTED, SIM_UNATTRIBUTED);
        } else if (streq(cmd, "restore"))
            gpu->lost = false;
        else
            gpu->probe_fail = streq(cmd, "probe-fail");
    } else if (streq(cmd, "settings-error")) {
        nvmlReturn_t code;
        if (argc != 3 || sim_parse_return(argv[2], &code) < 0)
            return "usage: settings-error <uuid> <nvml code>";
        gpu->settings_error = code;
    } else if (streq(cmd, "busy")) {
        if (argc != 3 || (!streq(argv[2], "1") && !streq(argv[2], "0")))
            return "usage: busy <uuid> 1|0";
        return sim_mig_set_busy_locked(d, streq(argv[2], "1"));
    } else if (streq(cmd, "reset")) {
        if (argc != 2 || d->is_mig)
            return "usage: reset <GPU uuid>";
        return sim_mig_reset_locked(d);
    } else if (streq(cmd, "settings-ok")) {
        if (argc != 2)
            return "usage: settings-ok <uuid>";
        gpu->settings_error = NVML_SUCCESS;
    } else
        return "unknown command";
    return NULL;
}

static void *control_main(void *arg)
{
    FILE *f = arg;
    char *line = NULL;
    size_t cap = 0;

    pthread_setname_np(pthread_self(), "nvml-sim-ctl");
    ssize_t n;
    while ((n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        _cleanup_free_ char *orig = xstrdup(line);
        pthread_mutex_lock(&sim_lock);
        const char *why = apply(line);
        pthread_mutex_unlock(&sim_lock);
        if (why)
            fprintf(stderr, "nvml-sim: control: %s: '%s', ignored\n", why, orig);
        else if (orig[strspn(orig, " \t")])
            ack(orig);
    }
    free(line);
    fclose(f);
    return NULL;
}

void sim_control_start(const char *fifo, const char *ackp)
{
    if (mkfifo(fifo, 0600) < 0 && errno != EEXIST) {
        fprintf(stderr, "nvml-sim: control: mkfifo %s: %s\n", fifo, strerror(errno));
        return;
    }
    int fd = open(fifo, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "nvml-sim: control: open %s: %s\n", fifo, strerror(errno));
        return;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        oom();
    }
    if (ackp && *ackp)
        ack_path = xstrdup(ackp);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The host program may rely on signals reaching only its own threads (signalfd). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&t, &attr, control_main, f);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (e) {
        fprintf(stderr, "nvml-sim: control: pthread_create: %s\n", strerror(e));
        fclose(f);
    }
}
