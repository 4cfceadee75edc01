/* Framing, percent-encoding and socket output shared by the gRPC server and client. */
#include <stdio.h>
#include <sys/socket.h>

#include "core/macro.h"
#include "grpc/grpc_internal.h"

#define FRAMER_MIN_CAP (16u * 1024u)

/* Capacity needed to hold `need` body bytes: doubling, capped at the declared length. */
static size_t framer_grow_to(size_t cap, size_t need, size_t msg_len)
{
    if (need <= cap)
        return cap;
    uint64_t c = cap ? cap : FRAMER_MIN_CAP;
    while (c < need)
        c *= 2;
    return (size_t)u64_min(c, msg_len);
}

static uint32_t prefix_length(const uint8_t *p)
{
    return (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
}

size_t grpc_framer_cap_after(const struct grpc_framer *f, const uint8_t *data, size_t len,
                             size_t max)
{
    if (f->in_body)
        return framer_grow_to(f->msg_cap, f->msg_have + u64_min(len, f->msg_len - f->msg_have),
                              f->msg_len);
    if (f->complete > 0 || f->prefix_have + len <= GRPC_PREFIX_LEN)
        return f->msg_cap;
    uint8_t prefix[GRPC_PREFIX_LEN];
    size_t n = GRPC_PREFIX_LEN - f->prefix_have;
    memcpy(prefix, f->prefix, f->prefix_have);
    memcpy(prefix + f->prefix_have, data, n);
    uint32_t mlen = prefix_length(prefix);
    if (prefix[0] != 0 || mlen > max)
        return f->msg_cap;
    return framer_grow_to(0, u64_min(len - n, mlen), mlen);
}

int grpc_framer_feed(struct grpc_framer *f, const uint8_t *data, size_t len, size_t max)
{
    while (len > 0) {
        if (!f->in_body) {
            if (f->complete > 0)
                return -EBADMSG;
            size_t n = u64_min(len, GRPC_PREFIX_LEN - f->prefix_have);
            memcpy(f->prefix + f->prefix_have, data, n);
            f->prefix_have += n;
            data += n;
            len -= n;
            if (f->prefix_have < GRPC_PREFIX_LEN)
                break;
            /* Only bit 0 is defined (compressed); we never offer an encoding, so a
             * compressed message cannot be decoded. */
            if (f->prefix[0] != 0)
                return -ENOTSUP;
            uint32_t mlen = prefix_length(f->prefix);
            if (mlen > max)
                return -EMSGSIZE;
            f->msg_len = mlen;
            f->msg_have = 0;
            f->in_body = true;
        }
        size_t n = u64_min(len, f->msg_len - f->msg_have);
        if (n > 0) {
            size_t cap = framer_grow_to(f->msg_cap, f->msg_have + n, f->msg_len);
            if (cap != f->msg_cap) {
                f->msg = xrealloc(f->msg, cap);
                f->msg_cap = cap;
            }
            memcpy(f->msg + f->msg_have, data, n);
            f->msg_have += n;
            data += n;
            len -= n;
        }
        if (f->msg_have == f->msg_len) {
            f->in_body = false;
            f->prefix_have = 0;
            f->complete++;
        }
    }
    /* An empty message completes as soon as its prefix is in. */
    if (f->in_body && f->msg_len == 0) {
        f->in_body = false;
        f->prefix_have = 0;
        f->complete++;
    }
    /* Callers get a valid pointer even for an empty message (msg_cap stays 0: the one
     * byte is not worth charging to a budget). */
    if (f->complete > 0 && !f->msg)
        f->msg = xmalloc(1);
    return 0;
}

int grpc_framer_finish(const struct grpc_framer *f)
{
    if (f->in_body || f->prefix_have > 0)
        return -EBADMSG;
    if (f->complete == 0)
        return -ENODATA;
    return 0;
}

void grpc_framer_reset(struct grpc_framer *f)
{
    free(f->msg);
    *f = (struct grpc_framer){ 0 };
}

uint8_t *grpc_frame_message(const uint8_t *msg, size_t len, size_t *out_len)
{
    size_t total;
    if (len > UINT32_MAX || __builtin_add_overflow(len, (size_t)GRPC_PREFIX_LEN, &total))
        oom();
    uint8_t *b = xmalloc(total);
    b[0] = 0;
    b[1] = (uint8_t)(len >> 24);
    b[2] = (uint8_t)(len >> 16);
    b[3] = (uint8_t)(len >> 8);
    b[4] = (uint8_t)len;
    if (len)
        memcpy(b + GRPC_PREFIX_LEN, msg, len);
    *out_len = total;
    return b;
}

/* The spec: bytes outside 0x20..0x7E, and '%' itself, are sent as %XX. A space at either
 * end is too: HTTP/2 (RFC 9113 8.2.1) makes a field value that starts or ends with
 * whitespace malformed, and peers drop the header (a peer's device ID "x " ended the
 * Allocate error message). */
char *grpc_percent_encode(const char *s)
{
    if (!s)
        return xstrdup("");
    size_t n = strlen(s);
    size_t cap;
    if (__builtin_mul_overflow(n, (size_t)3, &cap))
        oom();
    char *out = xmalloc(cap + 1), *p = out;
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        bool edge_space = *c == ' ' && (c == (const unsigned char *)s || !c[1]);
        if (*c >= 0x20 && *c <= 0x7e && *c != '%' && !edge_space) {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 0xf];
        }
    }
    *p = '\0';
    return out;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *grpc_percent_decode(const uint8_t *s, size_t len)
{
    char *out = xmalloc(len + 1), *p = out;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            *p++ = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
            i += 2;
        } else {
            *p++ = (char)s[i];
        }
    }
    *p = '\0';
    return out;
}

int grpc_parse_status(const uint8_t *s, size_t len)
{
    if (len == 0 || len > 4)
        return GRPC_STATUS_UNKNOWN;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return GRPC_STATUS_UNKNOWN;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

#define GRPC_OUT_GATHER (64u * 1024)

int grpc_session_flush(nghttp2_session *session, int fd, struct grpc_outbuf *ob, bool *blocked)
{
    *blocked = false;
    for (;;) {
        while (ob->off < ob->len) {
            ssize_t n = send(fd, ob->buf + ob->off, ob->len - ob->off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    *blocked = true;
                    return 0;
                }
                return -EIO;
            }
            ob->off += (size_t)n;
        }
        ob->len = ob->off = 0;
        while (ob->len < GRPC_OUT_GATHER) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(session, &data);
            if (n < 0)
                return -EIO;
            if (n == 0)
                break;
            ob->buf = grow_array(ob->buf, &ob->cap, ob->len + (size_t)n, 1);
            memcpy(ob->buf + ob->len, data, (size_t)n);
            ob->len += (size_t)n;
        }
        if (ob->len == 0)
            return 0;
    }
}

void grpc_outbuf_free(struct grpc_outbuf *ob)
{
    free(ob->buf);
    memset(ob, 0, sizeof(*ob));
}
