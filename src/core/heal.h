/* The one policy and state machine of every writer that keeps an object of ours in the
 * API server as it should be (the node labels and NodeFeature of
 * cluster/cluster-publish.c, DRA's ResourceSlices of dra/dra-publish.c): how a failed
 * write is retried, how fast what someone else changed or deleted is restored, and how
 * often either is said. Built on core/backoff.h, core/tokenbucket.h and
 * core/ratelimit.h; the writers differ only in their requests and their words.
 *
 * It decides and counts, it does not log (core is pure but for log.c): each call says
 * whether its line is due and gives the suffix for it. Plain data, loop thread only,
 * owned by its writer: heal_init() before use, heal_clear() at the end (a zeroed struct
 * may be cleared). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/backoff.h"
#include "core/ratelimit.h"
#include "core/tokenbucket.h"

/* A failed write: retried with capped exponential backoff from the first to the cap,
 * jittered in the upper half of each delay: every node's writers lose the API server
 * together (an upgrade) and would otherwise come back in lock-step, each retry a
 * thundering herd. */
#define HEAL_RETRY_MIN_MS 1000u
#define HEAL_RETRY_MAX_MS (5u * 60u * 1000u)
/* Restores of what someone else changed: a burst at once (one wipe, e.g. the kubelet's of
 * a DRA driver's slices at its start), then one per period, so a peer flipping the object
 * every 50 ms gets a write every 10 s, not 20 a second. */
#define HEAL_RESTORE_BURST 5u
#define HEAL_RESTORE_PERIOD_MS 10000u
/* Lines about restores: a few per window, the next one counts those left out; the line
 * that restores are being paced, one per window. */
#define HEAL_LOG_MS (5u * 60u * 1000u)
#define HEAL_LOG_BURST 5u

/* Room for heal_more()'s " (4294967295 more not logged)". */
#define HEAL_MORE_MAX 48

struct heal {
    struct backoff retry;          /* failed writes in a row */
    char *error;                   /* why the last write failed, while it is retried */
    struct tokenbucket restore;    /* restores of what others changed */
    struct ratelimit restore_log;  /* one line per restore, HEAL_LOG_BURST per window */
    struct ratelimit flap_log;     /* "restoring at most once every ...", one per window */
};

void heal_init(struct heal *h);
void heal_clear(struct heal *h);

/* A write failed with why: the wait before the retry (jittered). *is_new: why is not the
 * reason of the failure before (a warning then, a debug line for a repeat: an API away
 * for an hour is one line, not one per retry). */
uint64_t heal_failed(struct heal *h, const char *why, bool *is_new);
/* A write worked: the next failure waits HEAL_RETRY_MIN_MS again. True when it ends a run
 * of failures (worth one line: it works again). */
bool heal_succeeded(struct heal *h);

/* Someone else changed the object at now_ms: 0 when a restore may run now (its token is
 * taken), else how long to wait for one (>= 1 ms). *warn: the "keep being changed" line
 * is due, with `more` its suffix (see heal_more). */
uint64_t heal_restore_at(struct heal *h, uint64_t now_ms, bool *warn, char more[HEAL_MORE_MAX]);
uint64_t heal_restore(struct heal *h, bool *warn, char more[HEAL_MORE_MAX]);
/* May the line about one restore be logged at now_ms? If so `more` gets its suffix. */
bool heal_say_at(struct heal *h, uint64_t now_ms, char more[HEAL_MORE_MAX]);
bool heal_say(struct heal *h, char more[HEAL_MORE_MAX]);

/* The suffix of a line after n were left out: " (n more not logged)", or "" when none
 * were (never "(0 more not logged)"). Returns buf. */
const char *heal_more(unsigned n, char buf[HEAL_MORE_MAX]);
