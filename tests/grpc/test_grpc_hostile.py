"""Hostile input against the gRPC server, over raw sockets and hand-made HTTP/2 frames.
After each case the server must still answer a normal grpcio client.

usage: test_grpc_hostile.py <grpc-test-server>"""
import os
import struct
import sys
import unittest

import grpctest as h

BINARY = None


class Base(unittest.TestCase):
    args = ()

    def setUp(self):
        self.srv = h.Server(BINARY, *self.args)

    def tearDown(self):
        self.assertEqual(self.srv.stop(), 0)

    def assert_alive(self):
        self.assertEqual(self.srv.unary("Unary", b"alive"), b"alive")

    def handshake(self, **settings):
        s = h.connect(self.srv.sock)
        s.sendall(h.PREFACE + h.settings(**settings))
        return s


class Hostile(Base):
    def test_garbage_without_preface(self):
        s = h.connect(self.srv.sock)
        s.sendall(os.urandom(4096))
        h.wait_closed(s)
        s.close()
        self.assert_alive()

    def test_garbage_after_preface(self):
        s = h.connect(self.srv.sock)
        s.sendall(h.PREFACE + b"\xff" * 64 + os.urandom(1024))
        buf, types = bytearray(), []
        while (f := h.read_frame(s, buf)) is not None:
            types.append(f[0])
        s.close()
        self.assertIn(h.GOAWAY, types)
        self.assert_alive()

    def test_rapid_reset(self):
        s = self.handshake()
        burst = b"".join(
            h.frame(h.HEADERS, h.END_HEADERS, sid, h.request_headers("/test.Echo/Unary")) +
            h.frame(h.RST_STREAM, 0, sid, struct.pack(">I", 8))
            for sid in range(1, 2 * 20000, 2))
        try:
            s.sendall(burst)
        except (BrokenPipeError, ConnectionResetError):
            pass  # nghttp2's reset-rate limit closed the connection: fine
        s.close()
        self.assert_alive()
        self.assertEqual(self.srv.stats()["opened"], 0)

    def test_oversize_reply_then_reset_in_order(self):
        # Declared 4 GiB - 1, body never sent: the status must come before RST_STREAM.
        s = self.handshake()
        s.sendall(h.frame(h.HEADERS, h.END_HEADERS, 1, h.request_headers("/test.Echo/Unary")) +
                  h.frame(h.DATA, 0, 1, b"\x00\xff\xff\xff\xff"))
        buf, order = bytearray(), []
        while (f := h.read_frame(s, buf)) is not None:
            ftype, flags, sid, _ = f
            if sid == 1 and ftype == h.HEADERS:
                order.append("headers-end" if flags & h.END_STREAM else "headers")
            if sid == 1 and ftype == h.RST_STREAM:
                order.append("rst")
                break
        s.close()
        self.assertEqual(order, ["headers-end", "rst"])
        self.assert_alive()


class HandshakeTimeout(Base):
    args = ("--handshake-ms", 200, "--idle-ms", 400)

    def test_silent_connection_closed(self):
        s = h.connect(self.srv.sock)
        buf, types = bytearray(), []
        while (f := h.read_frame(s, buf)) is not None:
            types.append(f[0])
        s.close()
        self.assertEqual(types, [h.SETTINGS])  # ours, then the close
        self.assert_alive()

    def test_idle_connection_gets_goaway(self):
        s = self.handshake()
        buf, types = bytearray(), []
        while (f := h.read_frame(s, buf)) is not None:
            types.append(f[0])
            if f[0] == h.SETTINGS and not f[1] & h.ACK:
                s.sendall(h.frame(h.SETTINGS, h.ACK, 0))
        s.close()
        self.assertEqual(types[-1], h.GOAWAY)
        self.assert_alive()


class ConnectionCap(Base):
    args = ("--max-conn", 4)

    def test_more_connections_than_the_cap(self):
        self.assert_alive()  # the channel holds one of the four slots
        held = []
        for _ in range(3):
            s = self.handshake()
            buf = bytearray()
            self.assertEqual(h.read_frame(s, buf)[0], h.SETTINGS)  # accepted and served
            held.append(s)
        extra = h.connect(self.srv.sock)
        try:
            extra.sendall(h.PREFACE + h.settings())
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.assertIsNone(h.read_frame(extra, bytearray()))  # closed on accept
        extra.close()
        self.assertEqual(self.srv.stats()["connections"], 4)
        for s in held:
            s.close()
        self.srv.wait_stats(lambda st: st["connections"] == 1, "held connections freed")


class StalledReader(Base):
    def test_queue_stays_bounded(self):
        count, size = 10000, 100
        s = self.handshake()
        s.sendall(h.frame(h.HEADERS, h.END_HEADERS, 1, h.request_headers("/test.Echo/Flood")) +
                  h.frame(h.DATA, h.END_STREAM, 1,
                          h.grpc_message(struct.pack(">II", count, size))))
        # Never read, never grant window: the server must merge, not queue.
        st = self.srv.wait_stats(lambda st: st["flood_done"] == 1, "all updates sent")
        framed = size + 5
        self.assertLessEqual(st["queued"], 2 * framed)
        # Max over the run also counts the Stats replies themselves (< 200 bytes).
        self.assertLess(st["queued_max"], 2 * framed + 400)
        self.assert_alive()

        # Now read everything: far fewer than 10000 messages, the last one is the newest.
        s.sendall(h.frame(h.WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)) +
                  h.frame(h.WINDOW_UPDATE, 0, 1, struct.pack(">I", 1 << 30)))
        buf, body, ended = bytearray(), b"", False
        while not ended:
            f = h.read_frame(s, buf)
            self.assertIsNotNone(f, "connection closed before the trailers")
            ftype, flags, sid, payload = f
            if ftype == h.SETTINGS and not flags & h.ACK:
                s.sendall(h.frame(h.SETTINGS, h.ACK, 0))
            if sid == 1 and ftype == h.DATA:
                body += payload
            if sid == 1 and ftype == h.HEADERS and flags & h.END_STREAM:
                ended = True
        s.close()
        msgs = []
        while body:
            n = int.from_bytes(body[1:5], "big")
            msgs.append(body[5:5 + n])
            body = body[5 + n:]
        self.assertLess(len(msgs), count)
        self.assertTrue(all(len(m) == size for m in msgs))
        self.assertEqual(msgs[-1][:8], b"%08d" % (count - 1))
        seqs = [int(m[:8]) for m in msgs]
        self.assertEqual(seqs, sorted(seqs))


if __name__ == "__main__":
    BINARY = sys.argv.pop(1)
    unittest.main(verbosity=2)
