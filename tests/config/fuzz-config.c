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
        free(config_to_json_string(&c));
    }
    if (r < 0 && (err.code != r || !err.msg[0]))
        abort(); /* every failure must carry a message */
    config_free(&c);
    return 0;
}

#ifndef GDP_LIBFUZZER
static int run_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        perror(path);
        return -1;
    }
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) < 0)
                return 1;
            runs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d)
            return 1;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (run_file(path) < 0) {
                closedir(d);
                return 1;
            }
            runs++;
        }
        closedir(d);
    }
    printf("fuzz-config: %d inputs\n", runs);
    return runs > 0 ? 0 : 1;
}
#endif
