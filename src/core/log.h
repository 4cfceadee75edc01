/* Logging in klog's text format, the format the kubelet itself writes:
 *   I1121 10:04:05.123456   42 file.c:88] message
 * or, with log_set_format(LOG_FORMAT_JSON), one JSON object per line in the keys and
 * order of Kubernetes' own JSON logs (k8s.io/component-base/logs/json, zapr):
 *   {"ts":1700000000123.456,"caller":"kubelet/registration.c:88","msg":"...","v":0}
 * ts in milliseconds since the epoch; "v" on every line but errors (0 for info and
 * warnings, 1 for debug: shown from -v 1); an error line has no "v" but "err": the
 * message split at its first ": " into the outermost context (msg) and the error (err),
 * as the error contract (macro.h) wraps context; a message without one is both.
 * Filtered-out messages cost one comparison (the macros test the level first).
 * Thread-safe: each line is written with a single write(2). */
#pragma once

#include "error.h"
#include "macro.h"

enum log_level { LOG_ERROR = 0, LOG_WARNING = 1, LOG_INFO = 2, LOG_DEBUG = 3 };
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };

extern int log_max_level;

void log_set_level(int level);
void log_set_format(enum log_format f);
void log_set_fd(int fd);
_printf_(4, 5) void log_emit(int level, const char *file, int line, const char *fmt, ...);

#define log_full(level, ...)                                                          \
    do {                                                                              \
        if ((level) <= log_max_level)                                                 \
            log_emit((level), __FILE__, __LINE__, __VA_ARGS__);                       \
    } while (0)
#define log_error(...) log_full(LOG_ERROR, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)

/* Until log_demote_end(), the calling thread's info lines are debug lines (shown from
 * -v 1): for a step whose parts would each repeat what one summary line says (a
 * per-node config switch says "Applied per-node config ..."; the reload under it need
 * not say its every step again at -v 0). Other threads are not affected. Nests. */
void log_demote_begin(void);
void log_demote_end(void);

/* Hint lines (struct error's `hints`: static, NULL-terminated; NULL: none), each an info
 * line of its own after the line that logged the failure: advice, so the failure stays
 * the one error (or warning) line. */
#define log_hints(hints)                                                              \
    do {                                                                              \
        for (const char *const *_h = (hints); _h && *_h; _h++)                        \
            log_info("%s", *_h);                                                      \
    } while (0)

/* A retry loop's failures, logged so that a failure that stays the same is said once:
 * log_repeat_level() gives `level` for the first failure and for one that differs from
 * the one before (by `key`: the failure without what changes every time, such as the
 * retry delay), and LOG_DEBUG while it repeats. log_repeat_reset() after a success (or
 * when something changed that makes the next failure news); it returns how many
 * failures were logged at debug level since the last one at `level`. One per loop,
 * owned by it; not thread-safe. */
struct log_repeat {
    uint64_t key_hash;   /* 0: no failure since the last reset */
    unsigned repeats;
};
int log_repeat_level(struct log_repeat *r, int level, const char *key);
unsigned log_repeat_reset(struct log_repeat *r);
