/* A small HTTP/1.1 server on our event loop, for the opt-in metrics and probe listener
 * (--metrics-address): GET and HEAD on a fixed set of paths, answered synchronously by
 * handlers running on the loop.
 *
 * Requests are parsed by Debian's libhttp-parser (a streaming parser: no buffering of
 * the head here beyond the URL). Why not libmicrohttpd, the obvious well-kept server
 * library: it links GnuTLS (and its dependencies) even when TLS is unused, and adding it
 * measured +2.9 MiB of RSS against a 3 MiB budget for the whole plugin; it also wants
 * its own threads or its own select/poll loop, where everything here runs on our epoll.
 *
 * Bounds a peer meets (struct http_limits): the request head (request line + headers)
 * is at most max_head bytes (else 431 and close); requests with a body are refused
 * (413, close); at most max_connections connections (at the cap a new one evicts the
 * idle-longest, else the one whose request is oldest); a deadline per request, from its
 * first byte until its response is written (a timer armed only while a request is in
 * progress: an idle keep-alive connection costs no wakeups); a response that cannot be
 * written at once is finished on EPOLLOUT while the connection reads nothing more.
 * GET/HEAD only (405 with Allow), unknown paths 404, keep-alive by default for HTTP/1.1,
 * `Connection: close` and HTTP/1.0 honoured, pipelined requests answered in order.
 *
 * Loop thread only. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct error;
struct loop;
struct http_server;

/* What a handler answers: status (200, 503...), body (malloc'd or NULL, the server
 * frees it) of len bytes, and its content type (static; NULL: text/plain). */
struct http_response {
    int status;
    char *body;
    size_t len;
    const char *content_type;
};

typedef void (*http_handler_fn)(void *userdata, struct http_response *resp);

struct http_route {
    const char *path;       /* exact match, without the query string */
    http_handler_fn fn;
};

struct http_limits {
    size_t max_head;             /* 0 = 8192 bytes */
    unsigned max_connections;    /* 0 = 16 */
    unsigned request_timeout_ms; /* 0 = 10000 */
};

/* Parse "host:port", "[v6addr]:port" or ":port" (every address, IPv6 and IPv4) into a
 * socket address. host is an IP literal or "localhost". Returns 0 or -EINVAL with err
 * saying what is wrong with the text. */
struct sockaddr_storage;
int http_address_parse(const char *address, struct sockaddr_storage *ss, unsigned *ss_len,
                       struct error *err);

/* Bind and listen on address, serve routes (which must outlive the server) with
 * userdata. limits may be NULL (defaults). Returns 0 or -errno with err naming the
 * address. */
int http_server_new(struct loop *l, const char *address, const struct http_route *routes,
                    size_t n_routes, void *userdata, const struct http_limits *limits,
                    struct http_server **out, struct error *err);
/* Close every connection and the listening socket. NULL ok. */
void http_server_free(struct http_server *s);
/* The port actually bound (":0" picks a free one). */
unsigned http_server_port(const struct http_server *s);

/* Fuzz hooks (tests/fuzz/fuzz-http.c): serve an already connected socket as if it had
 * been accepted, and feed it bytes as if read from it (the answers go to the socket).
 * http_conn_feed returns 0, or -1 when the connection was closed (and freed). */
struct http_conn;
struct http_conn *http_server_adopt(struct http_server *s, int fd);
int http_conn_feed(struct http_conn *c, const uint8_t *data, size_t len);
