/* The one watcher of a socket's directory: notices a kubelet (re)start (inotify on the
 * directory of the kubelet socket, firing when the socket file itself is created or moved
 * in) and, with SOCKWATCH_ANY_CHANGE, one of our own sockets removed or its directory made
 * again (the DRA service's). No polling, unless inotify cannot be had (then a stat() every
 * 2 s, after one warning). In core: the device-plugin and DRA layers both use it. */
#pragma once

#include "core/error.h"

struct loop;
struct sockwatch;

typedef void (*sockwatch_fn)(void *userdata);

/* Fire also when the file is removed or moved away, and when inotify's queue overflowed
 * (events were lost): for a server watching its own socket (the DRA service), which must
 * bind it again whatever happened to it. Without it only a new file fires. Either way
 * the directory coming back (after it was removed, or was briefly not a directory) fires. */
#define SOCKWATCH_ANY_CHANGE 1u

int sockwatch_new(struct loop *l, const char *kubelet_socket, sockwatch_fn fn, void *userdata,
               struct sockwatch **out, struct error *err);
/* The same for the file at path, with SOCKWATCH_* flags. */
int sockwatch_new_flags(struct loop *l, const char *path, unsigned flags, sockwatch_fn fn,
                     void *userdata, struct sockwatch **out, struct error *err);
void sockwatch_free(struct sockwatch *w);
