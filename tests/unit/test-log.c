/* core/log: the klog text line and the JSON line, with escaping, and a message longer than
 * a line holds still gives one complete, newline-terminated line. Lines are read back from
 * a pipe the logger writes to (log_set_fd). */
#include <fcntl.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>

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

static void test_json(void)
{
    json_error_t jerr;
    log_set_format(LOG_FORMAT_JSON);
    log_emit(LOG_ERROR, "src/x/file.c", 7, "quote \" backslash \\ tab \t end");
    char *line = drain();
    size_t len = strlen(line);
    CHECK(len > 0 && line[len - 1] == '\n' && memchr(line, '\n', len - 1) == NULL);
    json_t *j = json_loads(line, 0, &jerr);
    CHECK(j != NULL);
    if (!j) {
        fprintf(stderr, "json line: %s (%s)\n", line, jerr.text);
        return;
    }
    CHECK_STR(json_string_value(json_object_get(j, "level")), "error");
    CHECK_STR(json_string_value(json_object_get(j, "caller")), "file.c:7");
    CHECK_STR(json_string_value(json_object_get(j, "msg")), "quote \" backslash \\ tab \t end");
    CHECK(json_is_number(json_object_get(j, "ts")));
    json_decref(j);
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
    test_long(LOG_FORMAT_TEXT);
    test_long(LOG_FORMAT_JSON);
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
