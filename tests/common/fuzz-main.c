/* Plain driver for libFuzzer-style targets when no fuzzing engine is available: feeds
 * every file named on the command line (directories: every file inside) once. With
 * -DGDP_LIBFUZZER (clang -fsanitize=fuzzer) libFuzzer brings its own main. */
#ifndef GDP_LIBFUZZER
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rbe");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf)
        abort();
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    printf("ok %s\n", path);
    return 0;
}

int main(int argc, char **argv)
{
    int r = 0, n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            r |= run_file(argv[i]);
            n++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char p[4096];
            snprintf(p, sizeof(p), "%s/%s", argv[i], de->d_name);
            r |= run_file(p);
            n++;
        }
        if (d)
            closedir(d);
    }
    if (n == 0) {
        fprintf(stderr, "no inputs\n");
        return 1;
    }
    return r;
}
#endif
