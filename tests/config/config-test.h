/* Shared by the config tests (test-config.c: flags, env and file values, their
 * precedence and every validation message; test-config-file.c: file sections, warnings,
 * subcommands, help and how the file is read). Each runs in a scratch directory so file
 * errors read "config.yaml:L:C: ...". */
#pragma once

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "config/config-load.h"
#include "core/log.h"

extern int failures;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

#define MAX_ARGS 24

#define A(...) ((const char *const[]){ __VA_ARGS__, NULL })

void write_file(const char *name, const char *text);

/* argv = "gdp" + args (+ --config-file config.yaml when yaml is given). */
int load(struct config *c, const char *yaml, const char *const *args, const char *const *env,
         struct config_command *cmd, struct error *err);

/* Run each test (NULL-terminated) in a fresh scratch directory; the exit status. */
int config_test_main(const char *name, void (*const tests[])(void));
