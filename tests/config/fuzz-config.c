/* Fuzz target: config-file contents through the YAML parser, the field walkers,
 * validation and the JSON print. Build with clang -fsanitize=fuzzer
 * -DGDP_LIBFUZZER for real fuzzing; otherwise main() replays files and
 * directories given as arguments (the corpus test). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/log.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static bool quiet;
    if (!quiet) {
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd >= 0)
            log_set_fd(fd);
        quiet = true;
    }
    struct config c;
    struct config_file_marks marks = { 0 };
    bool set[_OPT_MAX] = { 0 };
    struct error err = { 0 };

    config_init_defaults(&c);
    int r = config_file_parse(&c, "fuzz.yaml", data, size, set, &marks, &err);
    if (r == 0) {
        r = config_validate(&c, &marks, &err);
        free(config_to_json_string(&c, true));
    }
    if (r < 0 && (err.code != r || !err.msg[0]))
        abort(); /* every failure must carry a message */
    config_free(&c);
    return 0;
}

/* Without libFuzzer, tests/common/fuzz-main.c replays the corpus through this target. */
