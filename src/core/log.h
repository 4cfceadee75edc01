/* Logging in klog's text format, the format the kubelet itself writes:
 *   I1121 10:04:05.123456   42 file.c:88] message
 * or, with log_set_format(LOG_FORMAT_JSON), one JSON object per line.
 * Filtered-out messages cost one comparison (the macros test the level first).
 * Thread-safe: each line is written with a single write(2). */
#pragma once

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
