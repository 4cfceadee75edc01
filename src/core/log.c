/* The logger declared in core/log.h: level/format/fd settings and log_emit(), which
 * escapes the message and writes each klog-text or JSON line with one write(2). */

#include <stdbool.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

int log_max_level = LOG_INFO;
static enum log_format log_format = LOG_FORMAT_TEXT;
static int log_fd = STDERR_FILENO;

void log_set_level(int level) { log_max_level = level; }
void log_set_format(enum log_format f) { log_format = f; }
void log_set_fd(int fd) { log_fd = fd; }

static const char *basename_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Append s to buf as a JSON string body (without quotes). */
static size_t json_escape(char *buf, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", c);
        } else {
            buf[n++] = (char)c;
        }
    }
    buf[n] = 0;
    return n;
}

/* Text lines: a message may carry bytes a peer chose (device IDs, paths, gRPC paths).
 * A newline would forge a whole klog line and other control bytes can rewrite a
 * terminal, so every byte below 0x20 and DEL is escaped, and a backslash as \\ so that
 * the escaping cannot be faked either (escape_cntrl, core/macro.h). */
void log_emit(int level, const char *file, int line, const char *fmt, ...)
{
    static const char letters[] = "EWII";
    /* The message, then the line: the header, the escaped message (at most 4 KiB of it)
     * and the end, written straight into out. Every thread that logs keeps the deepest
     * stack it ever used resident, so the frame is kept to these two buffers. */
    char msg[2048], out[4608];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    int n;
    size_t len;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    if (level < 0)
        level = 0;
    if (level > 3)
        level = 3;

    bool json = log_format == LOG_FORMAT_JSON;
    if (json) {
        static const char *names[] = { "error", "warning", "info", "debug" };
        n = snprintf(out, sizeof(out), "{\"ts\":%lld.%06ld,\"level\":\"%s\",\"caller\":\"%s:%d\",\"msg\":\"",
                     (long long)tv.tv_sec, (long)tv.tv_usec, names[level], basename_of(file), line);
    } else {
        n = snprintf(out, sizeof(out), "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ",
                     letters[level], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (long)tv.tv_usec, (int)getpid(), basename_of(file), line);
    }
    if (n < 0 || (size_t)n >= sizeof(out) - 4)
        return;
    len = (size_t)n;
    size_t cap = sizeof(out) - len - 3; /* room for the end: "}\n or \n, and the NUL */
    if (cap > 4096)
        cap = 4096;
    len += json ? json_escape(out + len, cap, msg) : escape_cntrl(out + len, cap, msg, true);
    if (json)
        out[len++] = '"', out[len++] = '}';
    out[len++] = '\n';
    (void)!write(log_fd, out, len);
}
