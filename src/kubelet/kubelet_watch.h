/* Notices a kubelet (re)start: inotify on the directory of the kubelet socket, firing
 * when the socket file itself is created or moved in. No polling, unless inotify cannot
 * be had (then a stat() every 2 s, after one warning). */
#pragma once

#include "core/error.h"

struct loop;
struct kwatch;

typedef void (*kwatch_fn)(void *userdata);

int kwatch_new(struct loop *l, const char *kubelet_socket, kwatch_fn fn, void *userdata,
               struct kwatch **out, struct error *err);
void kwatch_free(struct kwatch *w);
