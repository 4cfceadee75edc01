/* The config tests' shared helpers (config-test.h). */
#include "config-test.h"

#include "tests/common/scratch.h"

int failures;

void write_file(const char *name, const char *text)
{
    FILE *f = fopen(name, "we");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(name);
        exit(1);
    }
}

int load(struct config *c, const char *yaml, const char *const *args, const char *const *env,
         struct config_command *cmd, struct error *err)
{
    char *argv[MAX_ARGS + 4];
    int argc = 0;
    argv[argc++] = (char *)"gdp";
    if (yaml) {
        write_file("config.yaml", yaml);
        argv[argc++] = (char *)"--config-file";
        argv[argc++] = (char *)"config.yaml";
    }
    for (size_t i = 0; args && args[i] && i < MAX_ARGS; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    return config_load(c, argc, argv, (char **)env, cmd, err);
}

int config_test_main(const char *name, void (*const tests[])(void))
{
    const char *dir = scratch_dir("gdp-config-test.");
    if (chdir(dir) < 0) {
        perror(dir);
        return 1;
    }
    for (size_t i = 0; tests[i]; i++)
        tests[i]();
    if (chdir("/") < 0 || scratch_remove(dir) < 0) {
        fprintf(stderr, "cannot remove the scratch directory\n");
        failures++;
    }
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}
