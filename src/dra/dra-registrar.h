/* The kubelet plugin-registration socket of the DRA driver
 * (<registrar dir>/<driver>-reg.sock, the convention of the upstream helper library
 * NVIDIA's driver uses): answers /pluginregistration.Registration/GetInfo with
 * PluginInfo{DRAPlugin, driver, endpoint, versions} and records what
 * NotifyRegistrationStatus says. The kubelet finds the socket by inotify and at its
 * start by walking the directory; re-creating it (dra_registrar_rebind) is what makes a
 * running kubelet call GetInfo again. Loop-thread only. */
#pragma once

#include <stdbool.h>

#include "core/error.h"

struct loop;
struct dra_registrar;

/* The services a DRA plugin lists in PluginInfo.supported_versions, in our order of
 * preference: a 1.34 kubelet takes the first it knows (v1), skips the health service's
 * name, and opens the health stream whatever the list says. */
#define DRA_SUPPORTED_VERSIONS { "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth" }

/* The lines NotifyRegistrationStatus makes (registered; refused, once per failed
 * stretch): at most this many per window, the next one let through counting those left
 * out (core/ratelimit.h). A real kubelet changes its mind a few times at most; a peer
 * flipping it cannot flood the log. */
#define DRA_REGISTRAR_LOG_INTERVAL_MS 60000u
#define DRA_REGISTRAR_LOG_BURST 10u

/* Serve the registration service on `path` (its directory is created, 0755, as the
 * kubelet would) for `driver`, naming `endpoint` (the DRA socket). The strings are
 * copied. Returns 0 or -errno with err naming the socket. */
int dra_registrar_start(struct loop *l, const char *path, const char *driver, const char *endpoint,
                        struct dra_registrar **out, struct error *err);
/* Remove and bind the socket again (connections of the old one are closed). */
int dra_registrar_rebind(struct dra_registrar *r, struct error *err);
/* Whether the kubelet's last NotifyRegistrationStatus said registered (false until one
 * comes, and again after a rebind). */
bool dra_registrar_registered(const struct dra_registrar *r);
const char *dra_registrar_path(const struct dra_registrar *r);
/* Close and unlink the socket. NULL ok. */
void dra_registrar_free(struct dra_registrar *r);
