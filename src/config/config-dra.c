/* The Dynamic Resource Allocation options (struct config_dra): the setters of the table's
 * rows that need more than their kind (config-options.c), for every source (flags,
 * environment, defaults). */
#include <limits.h>
#include <stdlib.h>
#include <sys/un.h>

#include "config/config-internal.h"

/* Each of the two directories gets a Unix socket, and a socket's whole path, NUL
 * included, must fit in sun_path (108 bytes on Linux). So each directory may be as long
 * as leaves room for "/" and the longest socket name put there: the registrar directory
 * gets "gpu.nvidia.com-reg.sock", the plugins directory "gpu.nvidia.com/dra.sock"; each
 * is bound first under a hidden temporary name beside it, ".<name>.tmp", and renamed into
 * place (grpc/grpc_server.c: a watcher never sees it before it listens), and that name is
 * the longest. Anything else there (the checkpoint) is a file, which PATH_MAX bounds. */
#define SUN_PATH_SIZE sizeof(((struct sockaddr_un *)0)->sun_path)
/* dra/dra-types.h's DRA_DRIVER_NAME, which config, below dra, cannot include (test-config
 * checks that the two agree) */
#define DRIVER_NAME "gpu.nvidia.com"
#define STAGED(name) "." name ".tmp"
#define REGISTRAR_SOCKET STAGED(DRIVER_NAME "-reg.sock")
#define PLUGINS_SOCKET DRIVER_NAME "/" STAGED("dra.sock")
/* sizeof("/" name) counts the "/", the name and the NUL */
#define DIR_MAX(name) (SUN_PATH_SIZE - sizeof("/" name))

static int set_dir(char **field, const char *flag, const char *value, size_t max,
                   const char *socket_name, struct error *err)
{
    if (value[0] != '/')
        return error_set(err, -EINVAL, "invalid --%s \"%s\": must be an absolute path", flag,
                         value);
    if (strlen(value) > max) {
        if (socket_name)
            return error_set(err, -EINVAL,
                             "invalid --%s \"%s\": %zu bytes, longer than %zu: the path of "
                             "the socket put there, \"<dir>/%s\", must fit in a Unix "
                             "socket address (%zu bytes with its NUL)",
                             flag, value, strlen(value), max, socket_name, SUN_PATH_SIZE);
        return error_set(err, -EINVAL, "invalid --%s \"%s\": longer than %zu bytes", flag,
                         value, max);
    }
    free(*field);
    *field = xstrdup(value);
    return 0;
}

/* A GPU is named by its NVML index or its UUID, as the config file's device lists name
 * them; whether it exists is known only after discovery (the daemon says so then). */
static int set_device_plugin_gpus(struct config *c, const char *value, struct error *err)
{
    char **v = config_split_list(value, NULL);
    for (char **p = v; *p; p++) {
        bool index = true;
        for (const char *s = *p; *s; s++)
            index = index && *s >= '0' && *s <= '9';
        if (!(index && strlen(*p) <= 4) && strncmp(*p, "GPU-", 4) != 0) {
            int r = error_set(err, -EINVAL,
                              "invalid --dra-device-plugin-gpus entry \"%s\": a GPU index or "
                              "a GPU UUID (GPU-...)",
                              *p);
            config_strv_free(v);
            return r;
        }
    }
    config_strv_free(c->dra.device_plugin_gpus);
    c->dra.device_plugin_gpus = v;
    return 0;
}

int config_dra_option_set(struct config *c, enum config_opt opt, const char *value,
                          struct error *err)
{
    switch (opt) {
    case OPT_KUBELET_REGISTRAR_DIR:
        return set_dir(&c->dra.registrar_dir, "kubelet-registrar-directory-path", value,
                       DIR_MAX(REGISTRAR_SOCKET), REGISTRAR_SOCKET, err);
    case OPT_KUBELET_PLUGINS_DIR:
        return set_dir(&c->dra.plugins_dir, "kubelet-plugins-directory-path", value,
                       DIR_MAX(PLUGINS_SOCKET), PLUGINS_SOCKET, err);
    case OPT_CDI_ROOT:
        return set_dir(&c->dra.cdi_root, "cdi-root", value, PATH_MAX / 2, NULL, err);
    case OPT_DRA_DEVICE_PLUGIN_GPUS: return set_device_plugin_gpus(c, value, err);
    default: abort(); /* only the rows above name this setter */
    }
}
