/* core/error: the one-line half of the error contract. A message that quotes a name
 * someone else chose (a kubeconfig context with a newline, as fuzz-kube found) still
 * comes out as one printable line, from error_set() and from error_prefix(); a cut
 * never splits an escape; an empty message is replaced by the code's description. */
#include <stdio.h>

#include "core/error.h"
#include "tests/common/check.h"

int test_failures;

static int printable_line(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

static void test_set(void)
{
    struct error err = { 0 };
    CHECK(error_set(&err, -ENOENT, "context \"%s\" not found", "c-\n\n o\r\t\x1b[2J\x7f") == -ENOENT);
    CHECK_STR(err.msg, "context \"c-\\n\\n o\\r\\t\\x1b[2J\\x7f\" not found");
    CHECK(err.code == -ENOENT);
    /* bytes from 0x80 up are UTF-8 in a name, not control bytes */
    error_set(&err, -EINVAL, "%s", "na\xc3\xafve");
    CHECK_STR(err.msg, "na\xc3\xafve");
    /* a positive code becomes -EINVAL */
    CHECK(error_set(&err, 5, "x") == -EINVAL && err.code == -EINVAL);
    CHECK(error_set(NULL, -EIO, "x") == -EIO);
}

static void test_cut(void)
{
    struct error err = { 0 };
    char big[2 * sizeof(err.msg)];
    /* 509 plain bytes, then control bytes: only whole escapes fit in what is left */
    memset(big, 'a', 509);
    memset(big + 509, '\x01', sizeof(big) - 510);
    big[sizeof(big) - 1] = 0;
    error_set(&err, -EIO, "%s", big);
    size_t len = strlen(err.msg);
    CHECK(len == 509);
    CHECK(printable_line(err.msg));
    memset(big, '\n', sizeof(big) - 1);
    error_set(&err, -EIO, "%s", big);
    len = strlen(err.msg);
    CHECK(len == 510 && printable_line(err.msg) && err.msg[len - 1] == 'n' && err.msg[len - 2] == '\\');
}

static void test_prefix(void)
{
    struct error err = { 0 };
    error_set(&err, -EINVAL, "bad value");
    CHECK(error_prefix(&err, "field \"%s\"", "a\nb") == -EINVAL);
    CHECK_STR(err.msg, "field \"a\\nb\": bad value");
    CHECK(printable_line(err.msg));
}

static void test_empty(void)
{
    struct error err = { 0 };
    error_set(&err, -ENOENT, "%s", "");
    CHECK_STR(err.msg, "No such file or directory");
    error_set(&err, -100000, "%s", "");
    CHECK_STR(err.msg, "unknown error");
}

int main(void)
{
    test_set();
    test_cut();
    test_prefix();
    test_empty();
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
