/* Fuzz target: the API client's parsers of outside input. The first byte picks one:
 *   0  a kubeconfig file (written to a fresh directory; credential files it names are
 *      read relative to it)
 *   1  watch event lines (the rest split at newlines, each parsed as the stream would)
 *   2  a server URL
 *   3  an API path (RBAC verb and resource naming, escaping)
 * Every failure must carry a one-line message; nothing may crash, block or leak. Build
 * with clang -fsanitize=fuzzer -DGDP_LIBFUZZER (scripts/fuzz.sh); otherwise
 * tests/common/fuzz-main.c replays the corpus. */
#include <stdio.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/log.h"
#include "core/macro.h"
#include "kube/kube-internal.h"
#include "tests/common/scratch.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void must_say(int r, const struct error *err)
{
    if (r < 0 && (!err->msg[0] || strchr(err->msg, '\n'))) {
        fprintf(stderr, "fuzz-kube: failure without a one-line message: \"%s\"\n", err->msg);
        abort();
    }
}

static void kubeconfig(const char *text, size_t len)
{
    const char *dir = scratch_dir("fuzz-kube-");
    char path[600];
    if ((size_t)snprintf(path, sizeof(path), "%s/config", dir) >= sizeof(path))
        abort();
    FILE *f = fopen(path, "we");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0)
        abort();
    struct kube_creds c = { 0 };
    struct error err = { 0 };
    must_say(kube_creds_from_kubeconfig(&c, path, &err), &err);
    kube_creds_clear(&c);
    scratch_remove(dir);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    log_set_level(LOG_ERROR);
    if (size < 1)
        return 0;
    _cleanup_free_ char *s = xstrndup((const char *)data + 1, size - 1);
    size_t len = size - 1;
    struct error err = { 0 };
    switch (data[0] % 4) {
    case 0:
        /* A path the input names must not be a device or FIFO the fuzzer would block on
         * only because it runs as a test: regular files only is what read_bounded
         * checks, after an O_NONBLOCK open. */
        kubeconfig((const char *)data + 1, len);
        break;
    case 1:
        for (size_t off = 0; off < len;) {
            const char *nl = memchr(data + 1 + off, '\n', len - off);
            size_t l = nl ? (size_t)(nl - (const char *)data - 1 - off) : len - off;
            json_t *ev, *obj;
            const char *type;
            int r = kube_watch_parse_line((const char *)data + 1 + off, l, &ev, &type, &obj, &err);
            must_say(r, &err);
            if (r == 0)
                json_decref(ev);
            off += l + 1;
        }
        break;
    case 2: {
        struct kube_creds c = { 0 };
        must_say(kube_parse_server(&c, s, &err), &err);
        kube_creds_clear(&c);
        break;
    }
    default: {
        char res[128], group[128];
        kube_path_resource(s, res, sizeof(res), group, sizeof(group));
        (void)kube_verb(KUBE_DELETE, s);
        free(kube_escape(s));
        break;
    }
    }
    return 0;
}
