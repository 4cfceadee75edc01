/* The one policy of every writer that keeps an object of ours in the API server as it
 * should be (the node labels and NodeFeature of cluster/cluster-publish.c, DRA's
 * ResourceSlices of dra/dra-publish.c): how a failed write is retried, how fast what
 * someone else changed or deleted is restored, and how often that is said. Numbers only:
 * the mechanisms are core/backoff.h, core/tokenbucket.h and core/ratelimit.h. */
#pragma once

/* A failed write: retried with capped exponential backoff from the first to the cap. */
#define HEAL_RETRY_MIN_MS 1000u
#define HEAL_RETRY_MAX_MS (5u * 60u * 1000u)
/* Restores of what someone else changed: a burst at once (one wipe, e.g. the kubelet's of
 * a DRA driver's slices at its start), then one per period, so a peer flipping the object
 * every 50 ms gets a write every 10 s, not 20 a second. */
#define HEAL_RESTORE_BURST 5u
#define HEAL_RESTORE_PERIOD_MS 10000u
/* Lines about restores: a few per window, the next one counts those left out. */
#define HEAL_LOG_MS (5u * 60u * 1000u)
#define HEAL_LOG_BURST 5u
