/* The API client's request lists (kube-internal.h): the queue of requests waiting for a
 * stream (FIFO, or at the front for a retry), the requests active on the connection, and
 * those ready to be concluded from the loop. Pure bookkeeping on struct kube's fields. */
#include "kube/kube-internal.h"

void kube_queue_remove(struct kube *k, struct kube_req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        k->queue_head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        k->queue_tail = r->prev;
    r->prev = r->next = NULL;
    r->queued = false;
}

void kube_queue_push(struct kube *k, struct kube_req *r, bool front)
{
    r->queued = true;
    if (front) {
        r->next = k->queue_head;
        r->prev = NULL;
        if (k->queue_head)
            k->queue_head->prev = r;
        else
            k->queue_tail = r;
        k->queue_head = r;
    } else {
        r->prev = k->queue_tail;
        r->next = NULL;
        if (k->queue_tail)
            k->queue_tail->next = r;
        else
            k->queue_head = r;
        k->queue_tail = r;
    }
}

void kube_active_remove(struct kube *k, struct kube_req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        k->active = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    r->active = false;
    if (k->conn.h2 && r->stream_id > 0)
        (void)nghttp2_session_set_stream_user_data(k->conn.h2, r->stream_id, NULL);
}

void kube_ready_push(struct kube *k, struct kube_req *r)
{
    if (r->ready)
        return;
    if (r->active)
        kube_active_remove(k, r);
    if (r->queued)
        kube_queue_remove(k, r);
    r->ready = true;
    r->ready_next = NULL;
    struct kube_req **p = &k->ready;
    while (*p)
        p = &(*p)->ready_next;
    *p = r;
}

void kube_ready_remove(struct kube *k, struct kube_req *r)
{
    for (struct kube_req **p = &k->ready; *p; p = &(*p)->ready_next)
        if (*p == r) {
            *p = r->ready_next;
            break;
        }
    r->ready = false;
}
