/* Notices a kubelet (re)start: inotify on the directory of the kubelet socket, firing
 * when the socket file itself is created or moved in. No polling, unless inotify cannot
 * be had (then a stat() every 2 s, after one warning). */
#pragma once

#include "core/error.h"

struct loop;
struct kwatch;

typedef void (*kwatch_fn)(void *userdata);

/* Fire also when the file is removed or moved away, and when inotify's queue overflowed
 * (events were lost): for a server watching its own socket (the DRA service), which must
 * bind it again whatever happened to it. Without it only a new file fires. Either way
 * the directory coming back (after it was removed, or was briefly not a directory) fires. */
#define KWATCH_ANY_CHANGE 1u

int kwatch_new(struct loop *l, const char *kubelet_socket, kwatch_fn fn, void *userdata,
               struct kwatch **out, struct error *err);
/* The same for the file at path, with KWATCH_* flags. */
int kwatch_new_flags(struct loop *l, const char *path, unsigned flags, kwatch_fn fn,
                     void *userdata, struct kwatch **out, struct error *err);
void kwatch_free(struct kwatch *w);
