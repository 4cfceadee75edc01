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

/* "kubelet/registration.c" of ".../src/kubelet/registration.c": the directory and file,
 * like zap's ShortCallerEncoder (package/file.go) in Kubernetes' JSON logs. */
static const char *short_caller(const char *path)
{
    const char *base = basename_of(path);
    if (base == path)
        return path;
    const char *s = base - 1; /* the '/' before base */
    while (s > path && s[-1] != '/')
        s--;
    return s;
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

/* The message, then the line: the header, the escaped message (at most 4 KiB of it)
 * and the end, written straight into out. Every thread that logs keeps the deepest
 * stack it ever used resident, so the frame is kept to these two buffers.
 * Text lines: a message may carry bytes a peer chose (device IDs, paths, gRPC paths).
 * A newline would forge a whole klog line and other control bytes can rewrite a
 * terminal, so every byte below 0x20 and DEL is escaped, and a backslash as \\ so that
 * the escaping cannot be faked either (escape_cntrl, core/macro.h). */
static _Thread_local unsigned log_demoted;

void log_demote_begin(void)
{
    log_demoted++;
}

void log_demote_end(void)
{
    if (log_demoted)
        log_demoted--;
}

void log_emit(int level, const char *file, int line, const char *fmt, ...)
{
    if (level == LOG_INFO && log_demoted && log_max_level < LOG_DEBUG)
        return;
    static const char letters[] = "EWII";
    char msg[2048], out[4608];
    va_list ap;
    struct timeval tv;
    struct tm tm;
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
    const char *err_part = NULL;
    if (json) {
        /* zap's epoch-millis time encoder, as component-base's JSON logs use it */
        n = snprintf(out, sizeof(out), "{\"ts\":%lld.%03ld,\"caller\":\"%s:%d\",\"msg\":\"",
                     (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000, (long)(tv.tv_usec % 1000),
                     short_caller(file), line);
        if (level == LOG_ERROR) {
            char *colon = strstr(msg, ": ");
            err_part = colon ? colon + 2 : msg;
            if (colon)
                *colon = 0;
        }
    } else {
        n = snprintf(out, sizeof(out), "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ",
                     letters[level], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (long)tv.tv_usec, (int)getpid(), basename_of(file), line);
    }
    if (n < 0 || (size_t)n >= sizeof(out) - 4)
        return;
    len = (size_t)n;
    /* Room for the end: `","err":"` (9) or `,"v":1` (6) with `}`, the newline and the
     * NUL; the message and the error together get at most 4 KiB. */
    size_t cap = sizeof(out) - len - 12;
    if (cap > 4096)
        cap = 4096;
    if (!json) {
        len += escape_cntrl(out + len, cap, msg, true);
    } else if (err_part) {
        size_t m = json_escape(out + len, cap, msg);
        len += m;
        memcpy(out + len, "\",\"err\":\"", 9);
        len += 9;
        len += json_escape(out + len, cap - m, err_part);
        out[len++] = '"';
        out[len++] = '}';
    } else {
        len += json_escape(out + len, cap, msg);
        len += (size_t)snprintf(out + len, 10, "\",\"v\":%d}", level == LOG_DEBUG ? 1 : 0);
    }
    out[len++] = '\n';
    (void)!write(log_fd, out, len);
}

/* FNV-1a: a key that differs in one byte gives another hash; 0 is kept for "none". */
static uint64_t key_hash(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; key && *key; key++)
        h = (h ^ (unsigned char)*key) * 0x100000001b3ull;
    return h ? h : 1;
}

int log_repeat_level(struct log_repeat *r, int level, const char *key)
{
    uint64_t h = key_hash(key);
    if (h == r->key_hash) {
        r->repeats++;
        return LOG_DEBUG;
    }
    r->key_hash = h;
    r->repeats = 0;
    return level;
}

unsigned log_repeat_reset(struct log_repeat *r)
{
    unsigned n = r->repeats;
    *r = (struct log_repeat){ 0 };
    return n;
}
