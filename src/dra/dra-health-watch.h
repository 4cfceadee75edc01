/* The kubelet's NodeWatchResources streams of the DRA socket (DRAResourceHealth
 * v1alpha1): the complete health list at open, on change when it differs from the last
 * one sent, and again every resend_ms while at least one stream is open, so the
 * kubelet's 30 s staleness rule never turns a device Unknown. No stream, no timer.
 * dra-service owns one and routes the method's stream callbacks here. Loop-thread only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;
struct loop_timer;
struct grpc_stream;
struct dra_health_entry;

struct dra_health_watch {
    struct loop *loop;
    /* the list now: *out malloc'd; free_fn (may be NULL) frees what entries point to */
    size_t (*health)(void *ud, struct dra_health_entry **out);
    void (*free_fn)(void *ud, struct dra_health_entry *h, size_t n);
    void *ud;
    unsigned resend_ms;

    struct dra_health_stream *streams;
    unsigned n_streams;
    uint8_t *last;              /* the last message sent */
    size_t last_len;
    bool sent_any;
    struct loop_timer *resend;
};

/* A stream opened with request `req`: 0 (the list is sent at once) or a gRPC status with
 * *message malloc'd. */
int dra_health_watch_open(struct dra_health_watch *w, struct grpc_stream *st, const uint8_t *req,
                          size_t len, char **message);
void dra_health_watch_closed(struct dra_health_watch *w, struct grpc_stream *st);
/* Send on every open stream if the list differs from the last one sent. */
void dra_health_watch_changed(struct dra_health_watch *w);
/* Free what w holds (its streams must be closed already: free the server first). */
void dra_health_watch_clear(struct dra_health_watch *w);
