/* The simulator's settings: environment first, then the driver root's file (sim-env.h). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim-env.h"

#define ENV_MAX 32     /* settings in the file */
#define LINE_MAX_ 4352 /* a name and a path */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *names[ENV_MAX], *values[ENV_MAX];
static unsigned n_env;

/* The file beside this library: dladdr names the object this function is in, which is
 * the library (libnvidia-ml or libcuda) as the loader found it, links not resolved, so
 * the file is looked for in the directory the program loaded it from. */
static void load(void)
{
    Dl_info info;
    if (!dladdr((void *)sim_env, &info) || !info.dli_fname || !strchr(info.dli_fname, '/'))
        return;
    char path[PATH_MAX];
    const char *slash = strrchr(info.dli_fname, '/');
    if (snprintf(path, sizeof(path), "%.*s/" SIM_ENV_FILE, (int)(slash - info.dli_fname),
                 info.dli_fname) >= (int)sizeof(path))
        return;
    FILE *f = fopen(path, "re");
    if (!f)
        return; /* the usual case: no driver root, or one rendered without settings */
    char line[LINE_MAX_];
    while (n_env < ENV_MAX && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !eq || strncmp(line, "MOCK_", 5) != 0)
            continue;
        *eq = 0;
        names[n_env] = strdup(line);
        values[n_env] = strdup(eq + 1);
        if (names[n_env] && values[n_env])
            n_env++;
    }
    fclose(f);
}

const char *sim_env(const char *name)
{
    const char *v = getenv(name);
    if (v)
        return v;
    pthread_once(&once, load);
    for (unsigned i = 0; i < n_env; i++)
        if (strcmp(names[i], name) == 0)
            return values[i];
    return NULL;
}
