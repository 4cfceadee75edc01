/* `gpu-device-plugin list` output (see list.h): which configuration is listed, then one
 * row or JSON object per advertised device, with its resource, memory, NUMA node and live
 * health. */

#include <jansson.h>

#include "list.h"

static const char *device_name(const struct inventory *inv, const struct rs_device *d)
{
    return d->gpu >= 0 && (size_t)d->gpu < inv->n_gpus ? inv->gpus[d->gpu].name : "";
}

static void format_memory(char *buf, size_t len, uint64_t bytes)
{
    if (bytes == 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%llu MiB", (unsigned long long)(bytes >> 20));
}

static json_t *string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

int list_print_table(FILE *f, const struct list_config *c, const struct inventory *inv,
                     const struct resource_set *rs, list_health_fn health, void *userdata)
{
    fprintf(f, "Config: %s\n", c->description);
    fprintf(f, "%-28s %-46s %-9s %-4s %-40s %-26s %s\n", "RESOURCE", "ID", "HEALTH", "NUMA",
            "GPU", "NAME", "MEMORY");
    for (size_t i = 0; i < rs->n_resources; i++) {
        const struct rs_resource *r = &rs->resources[i];
        for (size_t j = 0; j < r->n_devices; j++) {
            const struct rs_device *d = &r->devices[j];
            const char *reason = NULL;
            bool ok = health ? health(userdata, d, &reason) : true;
            char numa[16], mem[32];
            if (d->numa_node >= 0)
                snprintf(numa, sizeof(numa), "%d", d->numa_node);
            else
                snprintf(numa, sizeof(numa), "-");
            format_memory(mem, sizeof(mem), d->memory_bytes);
            const char *gpu_uuid = d->gpu >= 0 ? inv->gpus[d->gpu].uuid : "";
            fprintf(f, "%-28s %-46s %-9s %-4s %-40s %-26s %s%s%s\n", r->name, d->id,
                    ok ? "Healthy" : "Unhealthy", numa, gpu_uuid, device_name(inv, d), mem,
                    reason && *reason ? "  # " : "", reason && *reason ? reason : "");
        }
    }
    if (rs->n_resources == 0)
        fprintf(f, "(no resources: no GPUs found)\n");
    return ferror(f) ? -EIO : 0;
}

int list_print_json(FILE *f, const struct list_config *c, const struct inventory *inv,
                    const struct resource_set *rs, list_health_fn health, void *userdata)
{
    json_t *root = json_object();
    json_object_set_new(root, "config",
                        json_pack("{s:o,s:s,s:s,s:o,s:o}", "name", string_or_null(c->name),
                                  "how", c->how, "source", c->source ? c->source : c->how,
                                  "note", string_or_null(c->note), "file",
                                  string_or_null(c->file)));
    json_t *resources = json_array();
    json_object_set_new(root, "driverVersion", json_string(inv->driver_version));
    json_object_set_new(root, "cudaDriverVersion", json_string(inv->cuda_driver_version));
    for (size_t i = 0; i < rs->n_resources; i++) {
        const struct rs_resource *r = &rs->resources[i];
        json_t *jr = json_object();
        json_t *devs = json_array();
        json_object_set_new(jr, "resource", json_string(r->name));
        json_object_set_new(jr, "socket", json_string(r->socket_name));
        for (size_t j = 0; j < r->n_devices; j++) {
            const struct rs_device *d = &r->devices[j];
            const char *reason = NULL;
            bool ok = health ? health(userdata, d, &reason) : true;
            json_t *jd = json_object();
            json_object_set_new(jd, "id", json_string(d->id));
            json_object_set_new(jd, "health", json_string(ok ? "Healthy" : "Unhealthy"));
            if (reason && *reason)
                json_object_set_new(jd, "reason", json_string(reason));
            json_object_set_new(jd, "numa", d->numa_node >= 0 ? json_integer(d->numa_node) : json_null());
            json_object_set_new(jd, "uuid", json_string(d->uuid));
            json_object_set_new(jd, "index", json_string(d->index));
            json_object_set_new(jd, "gpu", json_string(d->gpu >= 0 ? inv->gpus[d->gpu].uuid : ""));
            json_object_set_new(jd, "name", json_string(device_name(inv, d)));
            json_object_set_new(jd, "memoryBytes", json_integer((json_int_t)d->memory_bytes));
            json_object_set_new(jd, "replicas", json_integer(d->replicas));
            if (d->mig >= 0)
                json_object_set_new(jd, "migProfile",
                                    json_string(inv->gpus[d->gpu].migs[d->mig].profile));
            json_array_append_new(devs, jd);
        }
        json_object_set_new(jr, "devices", devs);
        json_array_append_new(resources, jr);
    }
    json_object_set_new(root, "resources", resources);
    int r = json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', f);
    json_decref(root);
    return r < 0 ? -EIO : 0;
}
