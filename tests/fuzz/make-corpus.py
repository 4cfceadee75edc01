"""Regenerate corpus/grpc-server/ (seed inputs for fuzz-grpc-server).
usage: /usr/bin/python3 make-corpus.py   (run from this directory)"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "grpc"))
import grpctest as h  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "grpc-server")
START = h.PREFACE + h.settings()


def req(path, body, sid=1, ctype="application/grpc", method="POST", end_headers=True):
    hdrs = h.hpack([(":method", method), (":scheme", "http"), (":path", path),
                    (":authority", "/var/lib/kubelet/device-plugins/x.sock"),
                    ("content-type", ctype), ("te", "trailers")])
    flags = h.END_HEADERS if end_headers else 0
    return h.frame(h.HEADERS, flags, sid, hdrs) + h.frame(h.DATA, h.END_STREAM, sid, body)


msg = h.grpc_message
cases = {
    "unary": START + req("/test.Echo/Unary", msg(b"hello")),
    "unary-empty-body": START + req("/test.Echo/Unary", b""),
    "fail": START + req("/test.Echo/Fail", msg(b"x")),
    "stream-finish": START + req("/test.Echo/Stream", msg(b"b")),
    "stream-open-then-rst": START + req("/test.Echo/Stream", msg(b"a")) +
    h.frame(h.RST_STREAM, 0, 1, struct.pack(">I", 8)),
    "stream-refused": START + req("/test.Echo/Stream", msg(b"x")),
    "unknown": START + req("/nope/Nope", msg(b"")),
    "two-messages": START + req("/test.Echo/Unary", msg(b"a") + msg(b"b")),
    "compressed": START + req("/test.Echo/Unary", b"\x01" + msg(b"a")[1:]),
    "oversize": START + req("/test.Echo/Unary", b"\x00\x7f\xff\xff\xff"),
    "truncated": START + req("/test.Echo/Unary", b"\x00\x00\x00\x00\x09ab"),
    "text-plain": START + req("/test.Echo/Unary", msg(b"a"), ctype="text/plain"),
    "get": START + req("/test.Echo/Unary", msg(b"a"), method="GET"),
    "continuation": START + req("/test.Echo/Unary", msg(b"a"), end_headers=False),
    "missing-path": START + h.frame(h.HEADERS, h.END_HEADERS | h.END_STREAM, 1,
                                    h.hpack([(":method", "POST"),
                                             ("content-type", "application/grpc")])),
    "dup-path": START + h.frame(h.HEADERS, h.END_HEADERS | h.END_STREAM, 1,
                                h.hpack([(":method", "POST"), (":path", "/test.Echo/Unary"),
                                         (":path", "/x"), ("content-type", "application/grpc")])),
    "client-trailers": START + h.frame(h.HEADERS, h.END_HEADERS, 1,
                                       h.request_headers("/test.Echo/Unary")) +
    h.frame(h.DATA, 0, 1, msg(b"abc")) +
    h.frame(h.HEADERS, h.END_HEADERS | h.END_STREAM, 1, h.hpack([("x-t", "1")])),
    "small-window": h.PREFACE + h.settings(initial_window_size=3) +
    req("/test.Echo/Stream", msg(b"b" * 100)) +
    h.frame(h.WINDOW_UPDATE, 0, 1, struct.pack(">I", 50)),
    "ping-settings": START + h.frame(h.PING, 0, 0, b"12345678") +
    h.frame(h.SETTINGS, h.ACK, 0),
    "many-streams": START + b"".join(req("/test.Echo/Unary", msg(b"%d" % i), sid=i)
                                     for i in range(1, 60, 2)),
    "rapid-reset": START + b"".join(
        h.frame(h.HEADERS, h.END_HEADERS, i, h.request_headers("/test.Echo/Unary")) +
        h.frame(h.RST_STREAM, 0, i, struct.pack(">I", 8)) for i in range(1, 200, 2)),
    "preface-only": h.PREFACE,
    "garbage": bytes(range(256)) * 4,
    "preface-garbage": h.PREFACE + b"\xff" * 40,
}

os.makedirs(OUT, exist_ok=True)
for name, data in cases.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print("%d inputs in %s" % (len(cases), OUT))
