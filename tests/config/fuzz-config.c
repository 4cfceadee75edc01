/* Fuzz target: a config file, plus optional command-line flags and environment, through
 * everything the plugin does with them at start and on SIGHUP: the YAML parser, the
 * field walkers, validation, the JSON print, the `health:` section and the health
 * environment (config/config-health.c, checked at every load), the health policy over
 * the result, and config_load() with its flag > env > file precedence; the same flags
 * and variables also through the config-manager entrypoint's parser (config_cm_load).
 *
 * Input: leading lines "#!arg <flag>" and "#!env NAME=value" (YAML comments, so the
 * parser skips them) set argv and envp; the whole input is the file. Every failure must
 * carry a message; nothing may crash or leak. Build with clang -fsanitize=fuzzer
 * -DGDP_LIBFUZZER (scripts/fuzz.sh); otherwise tests/common/fuzz-main.c replays the
 * corpus. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "config/config-cm.h"
#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/log.h"
#include "policy/health.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

#define MAX_WORDS 16

struct words {
    char *v[MAX_WORDS + 1];
    size_t n;
};

/* Split off the "#!arg " / "#!env " lines. A flag or variable naming the config file
 * is dropped: the target supplies the file itself (and a peer-chosen path such as
 * /dev/stdin would block the fuzzer, not the plugin). */
static void header(const unsigned char *data, size_t size, struct words *args,
                   struct words *env)
{
    size_t off = 0;
    while (off < size && size - off > 6 && data[off] == '#' && data[off + 1] == '!') {
        const unsigned char *nl = memchr(data + off, '\n', size - off);
        size_t end = nl ? (size_t)(nl - data) : size;
        struct words *w = !memcmp(data + off, "#!arg ", 6)   ? args
                          : !memcmp(data + off, "#!env ", 6) ? env
                                                             : NULL;
        if (w && w->n < MAX_WORDS) {
            char *s = strndup((const char *)data + off + 6, end - off - 6);
            if (!s)
                oom();
            if (strcasestr(s, "config") || strlen(s) != end - off - 6)
                free(s);
            else
                w->v[w->n++] = s;
        }
        off = end + 1;
    }
}

static void words_free(struct words *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i]);
}

static void check(int r, const struct error *err)
{
    if (r < 0 && (err->code != r || !err->msg[0]))
        abort(); /* every failure must carry a message */
}

/* The health settings of a config that loaded: what the checks promise, then the
 * policy over every Xid they name. */
static void health(const struct config *c)
{
    const struct health_config *hc = &c->health;
    if (hc->wait_error_threshold == 0 || hc->quiet_ms == 0 || hc->max_quiet_ms < hc->quiet_ms ||
        hc->wait_timeout_ms < 10 || hc->unattributed_probe_ms == 0)
        abort(); /* validation let through what it promises to refuse */
    for (size_t i = 0; i < hc->n_rules; i++)
        (void)health_classify(hc, hc->rules[i].xid);
}

/* The file as the plugin reads it: through a path (a memfd), with flags and env. */
static void load(const unsigned char *data, size_t size, struct words *args, char **envp)
{
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create("fuzz-config", MFD_CLOEXEC)) < 0)
        abort();
    if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    char file[64];
    snprintf(file, sizeof(file), "--config-file=/proc/self/fd/%d", fd);
    char *argv[MAX_WORDS + 3] = { (char *)"gpu-device-plugin" };
    int argc = 1;
    for (size_t i = 0; i < args->n; i++)
        argv[argc++] = args->v[i];
    argv[argc++] = file;

    struct config c;
    struct config_command cmd;
    struct error err = { 0 };
    int r = config_load(&c, argc, argv, envp, &cmd, &err);
    check(r, &err);
    if (r >= 0) /* also --help / --version: the caller frees the command */
        config_command_free(&cmd);
    if (r == 0) {
        free(config_to_json_string(&c, true));
        health(&c);
    }
    config_free(&c);
}

/* The same words as the config-manager entrypoint's flags and environment
 * (config/config-cm.c): help and version words end it; any failure carries a message. */
static void load_cm(const struct words *args, char **envp)
{
    char *argv[MAX_WORDS + 2] = { (char *)"config-manager" };
    int argc = 1;
    for (size_t i = 0; i < args->n; i++)
        argv[argc++] = args->v[i];
    struct config_cm cm;
    struct error err = { 0 };
    int r = config_cm_load(&cm, argc, argv, envp, &err);
    if (r < 0 && !err.msg[0])
        abort(); /* a failure without its message */
    if (r >= 0)
        config_cm_free(&cm);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static bool quiet;
    if (!quiet) {
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd >= 0)
            log_set_fd(fd);
        quiet = true;
    }
    struct words args = { 0 }, env = { 0 };
    header(data, size, &args, &env);

    struct config c;
    struct config_marks marks = { 0 };
    bool set[_OPT_MAX] = { 0 };
    struct error err = { 0 };
    config_init_defaults(&c);
    int r = config_file_parse(&c, "fuzz.yaml", data, size, set, &marks, &err);
    if (r == 0 && (r = config_health_check(&c, &marks, &err)) == 0) {
        r = config_validate(&c, &marks, &err);
        free(config_to_json_string(&c, true));
    }
    check(r, &err);
    if (r == 0)
        health(&c);
    config_free(&c);

    if (args.n || env.n) {
        load(data, size, &args, env.v);
        load_cm(&args, env.v);
    }
    words_free(&args);
    words_free(&env);
    return 0;
}

/* Without libFuzzer, tests/common/fuzz-main.c replays the corpus through this target. */
