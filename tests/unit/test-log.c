/* core/log: the klog text line and the JSON line (Kubernetes' keys, in their order), with
 * escaping, and a message longer than a line holds still gives one complete,
 * newline-terminated line; log_repeat's levels; log_demote (this thread's info lines shown
 * only from -v 1, nesting). Lines are read back from
 * a pipe the logger writes to (log_set_fd). */
#include <fcntl.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <sys/time.h>

#include "core/log.h"
#include "tests/common/check.h"

int test_failures;

static int pipe_rd = -1;

/* Everything written since the last call (the pipe buffer holds far more than a line). */
static char *drain(void)
{
    static char buf[65536];
    ssize_t n = read(pipe_rd, buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

static void test_text(void)
{
    regex_t re;
    log_set_format(LOG_FORMAT_TEXT);
    log_emit(LOG_WARNING, "src/x/file.c", 42, "GPU %s is %s", "GPU-1\nE0101 forged", "lost\x1b[2J\\");
    char *line = drain();
    CHECK(regcomp(&re, "^W[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} +[0-9]+ file\\.c:42\\] "
                       "GPU GPU-1\\\\nE0101 forged is lost\\\\x1b\\[2J\\\\\\\\\n$",
                  REG_EXTENDED) == 0);
    CHECK(regexec(&re, line, 0, NULL, 0) == 0);
    if (regexec(&re, line, 0, NULL, 0) != 0)
        fprintf(stderr, "text line: %s", line);
    regfree(&re);
}

/* One JSON line from the pipe, parsed; NULL (and a failed check) when it is not one. */
static json_t *json_line(const char **keys_out, size_t n_keys)
{
    json_error_t jerr;
    char *line = drain();
    size_t len = strlen(line);
    CHECK(len > 0 && line[len - 1] == '\n' && memchr(line, '\n', len - 1) == NULL);
    json_t *j = json_loads(line, JSON_PRESERVE_ORDER, &jerr);
    CHECK(j != NULL);
    if (!j) {
        fprintf(stderr, "json line: %s (%s)\n", line, jerr.text);
        return NULL;
    }
    /* the keys in Kubernetes' order (component-base logs/json: zap's ts, caller, msg,
     * then zapr's "v" or "err") */
    const char *key;
    json_t *v;
    size_t i = 0;
    json_object_foreach(j, key, v) {
        CHECK(i < n_keys);
        if (i < n_keys)
            CHECK_STR(key, keys_out[i]);
        i++;
    }
    CHECK(i == n_keys);
    return j;
}

static void test_json(void)
{
    struct timeval now;
    gettimeofday(&now, NULL);
    log_set_format(LOG_FORMAT_JSON);

    /* an error: context in msg, the error in err (split at the first ": "), no "v" */
    log_emit(LOG_ERROR, "../src/x/file.c", 7, "loading: quote \" backslash \\ tab \t end: x");
    static const char *const err_keys[] = { "ts", "caller", "msg", "err" };
    json_t *j = json_line((const char **)err_keys, 4);
    if (j) {
        CHECK_STR(json_string_value(json_object_get(j, "caller")), "x/file.c:7");
        CHECK_STR(json_string_value(json_object_get(j, "msg")), "loading");
        CHECK_STR(json_string_value(json_object_get(j, "err")),
                  "quote \" backslash \\ tab \t end: x");
        CHECK(json_object_get(j, "level") == NULL && json_object_get(j, "v") == NULL);
        /* milliseconds since the epoch, as zap's epoch-millis encoder writes them */
        double ts = json_number_value(json_object_get(j, "ts"));
        double want = (double)now.tv_sec * 1000.0 + now.tv_usec / 1000.0;
        CHECK(json_is_real(json_object_get(j, "ts")) && ts >= want - 1.0 && ts < want + 60000.0);
        json_decref(j);
    }

    /* info and warning: "v" 0; debug: "v" 1 (shown from -v 1) */
    static const char *const info_keys[] = { "ts", "caller", "msg", "v" };
    static const int levels[] = { LOG_INFO, LOG_WARNING, LOG_DEBUG };
    for (size_t i = 0; i < 3; i++) {
        log_emit(levels[i], "main.c", 3, "Registered: %s", "nvidia.com/gpu");
        j = json_line((const char **)info_keys, 4);
        if (!j)
            continue;
        CHECK_STR(json_string_value(json_object_get(j, "caller")), "main.c:3");
        CHECK_STR(json_string_value(json_object_get(j, "msg")), "Registered: nvidia.com/gpu");
        CHECK(json_integer_value(json_object_get(j, "v")) == (levels[i] == LOG_DEBUG));
        json_decref(j);
    }

    /* an error without context is its own error; a hint after it is an info line */
    log_emit(LOG_ERROR, "a/b.c", 1, "no context here");
    j = json_line((const char **)err_keys, 4);
    if (j) {
        CHECK_STR(json_string_value(json_object_get(j, "msg")), "no context here");
        CHECK_STR(json_string_value(json_object_get(j, "err")), "no context here");
        json_decref(j);
    }
    static const char *const hints[] = { "Is it: mounted?", NULL };
    log_hints(hints);
    j = json_line((const char **)info_keys, 4);
    if (j) {
        CHECK_STR(json_string_value(json_object_get(j, "msg")), "Is it: mounted?");
        CHECK(json_integer_value(json_object_get(j, "v")) == 0);
        json_decref(j);
    }
}

/* log_repeat: the first failure and each different one at the caller's level, the same
 * one again at debug; a reset makes the next one news. */
static void test_repeat(void)
{
    struct log_repeat r = { 0 };
    CHECK(log_repeat_level(&r, LOG_WARNING, "connect: ENOENT") == LOG_WARNING);
    CHECK(log_repeat_level(&r, LOG_WARNING, "connect: ENOENT") == LOG_DEBUG);
    CHECK(log_repeat_level(&r, LOG_WARNING, "connect: ENOENT") == LOG_DEBUG);
    CHECK(r.repeats == 2);
    CHECK(log_repeat_level(&r, LOG_WARNING, "connect: ECONNREFUSED") == LOG_WARNING);
    CHECK(log_repeat_level(&r, LOG_WARNING, "connect: ENOENT") == LOG_WARNING);
    CHECK(log_repeat_level(&r, LOG_WARNING, "connect: ENOENT") == LOG_DEBUG);
    CHECK(log_repeat_reset(&r) == 1);
    CHECK(log_repeat_level(&r, LOG_ERROR, "connect: ENOENT") == LOG_ERROR);
}

/* A 2 KiB message of control bytes escapes to 8 KiB, more than a line holds: the line is
 * cut, stays one line, ends with a newline (and in JSON still parses). */
static void test_long(enum log_format format)
{
    char big[2100];
    memset(big, '\x01', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    log_set_format(format);
    log_emit(LOG_INFO, "f.c", 1, "%s", big);
    char *line = drain();
    size_t len = strlen(line);
    CHECK(len > 1000 && len <= 4608);
    CHECK(line[len - 1] == '\n' && memchr(line, '\n', len - 1) == NULL);
    if (format == LOG_FORMAT_JSON) {
        json_t *j = json_loads(line, 0, NULL);
        CHECK(j != NULL);
        json_decref(j);
    }
}

static void test_demote(void)
{
    log_set_format(LOG_FORMAT_TEXT);
    int saved = log_max_level;
    log_max_level = LOG_INFO; /* -v 0 */
    log_demote_begin();
    log_demote_begin();
    log_emit(LOG_INFO, "a.c", 1, "hidden");
    log_demote_end();
    log_emit(LOG_INFO, "a.c", 2, "hidden too");
    log_emit(LOG_WARNING, "a.c", 3, "warned");
    CHECK(strstr(drain(), "hidden") == NULL);
    log_demote_end();
    log_demote_end(); /* unbalanced: ignored */
    log_emit(LOG_INFO, "a.c", 4, "shown");
    CHECK(strstr(drain(), "shown") != NULL);
    log_max_level = LOG_DEBUG; /* -v 1: the demoted lines are there */
    log_demote_begin();
    log_emit(LOG_INFO, "a.c", 5, "at v1");
    log_demote_end();
    CHECK(strstr(drain(), "at v1") != NULL);
    log_max_level = saved;
}

int main(void)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
        perror("pipe2");
        return 1;
    }
    fcntl(fds[1], F_SETPIPE_SZ, 1 << 16);
    pipe_rd = fds[0];
    log_set_fd(fds[1]);
    test_text();
    test_json();
    test_repeat();
    test_demote();
    test_long(LOG_FORMAT_TEXT);
    test_long(LOG_FORMAT_JSON);
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
