/* Fuzz target: a PCI config space as read from sysfs (node/host.c's vGPU capability
 * walk), then the labels derived from what it found. gcc: the plain driver replays the
 * corpus (tests/labels/corpus); clang: libFuzzer (scripts/fuzz.sh). */
#include "labels/labels.h"
#include "node/host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0; /* host.c never reads more */
    struct inventory inv = { 0 };
    inv.host.read = true;
    inv.host.vgpu = host_vgpu_from_config(data, size, "0000:00:00.0", &inv.host);
    struct config cfg;
    config_init_defaults(&cfg);
    struct labels_input in = { .cfg = &cfg, .inv = &inv };
    struct labels *l = NULL;
    struct error err = { 0 };
    if (labels_derive(&in, &l, &err) == 0)
        labels_free(l);
    config_free(&cfg);
    return 0;
}
