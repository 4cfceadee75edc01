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
        # ours (SETTINGS, the connection window = the connection's budget), then the close
        self.assertEqual(types, [h.SETTINGS, h.WINDOW_UPDATE])
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


def served(s):
    """The server's first frame on a fresh connection is its SETTINGS."""
    f = h.read_frame(s, bytearray())
    return f is not None and f[0] == h.SETTINGS


def closed_by_server(s):
    """Read until EOF (a GOAWAY may come first); True if the server hung up."""
    buf = bytearray()
    while (f := h.read_frame(s, buf)) is not None:
        pass
    return True


class ConnectionCap(Base):
    args = ("--max-conn", 4)

    def test_newcomer_evicts_the_idle_longest(self):
        held = []
        for _ in range(4):
            s = self.handshake()
            self.assertTrue(served(s))
            held.append(s)
        # At the cap: the newcomer is served, the connection idle longest goes.
        extra = self.handshake()
        self.assertTrue(served(extra))
        self.assertTrue(closed_by_server(held[0]))
        held[0].close()
        self.assert_alive()  # the channel's connection evicts held[1]
        self.assertTrue(closed_by_server(held[1]))
        held[1].close()
        st = self.srv.stats()
        self.assertEqual(st["connections"], 4)
        self.assertEqual(st["evictions"], 2)
        for s in held[2:] + [extra]:
            s.close()
        self.srv.wait_stats(lambda st: st["connections"] == 1, "held connections freed")

    def test_server_streams_are_never_evicted(self):
        held = []
        for _ in range(4):
            s = self.handshake()
            s.sendall(h.frame(h.HEADERS, h.END_HEADERS, 1, h.request_headers("/test.Echo/Stream")) +
                      h.frame(h.DATA, h.END_STREAM, 1, h.grpc_message(bytes([0, 1]))))
            held.append(s)
        buf = bytearray()
        for s in held:  # each stream is open: its response HEADERS came back
            while (f := h.read_frame(s, buf)) is not None and not (f[0] == h.HEADERS and f[2] == 1):
                pass
            buf.clear()
        extra = h.connect(self.srv.sock)
        try:
            extra.sendall(h.PREFACE + h.settings())
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.assertIsNone(h.read_frame(extra, bytearray()))  # refused: nothing to evict
        extra.close()
        for s in held:  # every held connection is still served
            s.sendall(h.frame(h.PING, 0, 0, b"stillhere"[:8]))
            while (f := h.read_frame(s, buf)) is not None and not (f[0] == h.PING and f[1] & h.ACK):
                pass
            self.assertIsNotNone(f, "a connection with a server stream was closed")
            buf.clear()
        for s in held:
            s.close()
        # The channel may have been refused too while the cap was full: let it retry.
        self.assertEqual(self.srv.unary("Unary", b"back", wait_for_ready=True), b"back")
        self.srv.wait_stats(lambda st: st["connections"] <= 1 and st["closed"] == 4,
                            "streams closed")


class RequestDeadline(Base):
    """The one value the test waits on is shortened; AttackSlowloris in
    tests/attack/test_peers.py runs the same path at the default."""
    args = ("--request-ms", 300)

    def test_headers_without_end_headers_close_the_connection(self):
        s = self.handshake()
        s.sendall(h.frame(h.HEADERS, 0, 1, h.request_headers("/test.Echo/Unary")))
        self.assertTrue(closed_by_server(s))
        s.close()
        st = self.srv.wait_stats(lambda st: st["connections"] <= 1, "slowloris closed")
        self.assertEqual(st["deadline_resets"], 1)
        self.assert_alive()

    def test_unfinished_body_is_reset_and_its_buffer_freed(self):
        s = self.handshake()
        s.sendall(h.frame(h.HEADERS, h.END_HEADERS, 1, h.request_headers("/test.Echo/Unary")) +
                  h.frame(h.DATA, 0, 1, b"\x00\x00\x01\x00\x00" + b"x" * 1000))
        self.srv.wait_stats(lambda st: st["held"] > 0, "body buffered")
        buf, seen = bytearray(), []
        while (f := h.read_frame(s, buf)) is not None:
            if f[2] == 1:
                seen.append((f[0], bool(f[1] & h.END_STREAM)))
        s.close()
        # trailers-only status (DEADLINE_EXCEEDED), RST, then the connection, left with
        # nothing but an expired request, is closed
        self.assertEqual(seen, [(h.HEADERS, True), (h.RST_STREAM, False)])
        st = self.srv.stats()
        self.assertEqual(st["held"], 0)
        self.assertEqual(st["deadline_resets"], 1)

    def test_live_stream_keeps_the_connection(self):
        s = self.handshake()
        s.sendall(h.frame(h.HEADERS, h.END_HEADERS, 1, h.request_headers("/test.Echo/Stream")) +
                  h.frame(h.DATA, h.END_STREAM, 1, h.grpc_message(bytes([0, 1]))) +
                  h.frame(h.HEADERS, h.END_HEADERS, 3, h.request_headers("/test.Echo/Unary")) +
                  h.frame(h.DATA, 0, 3, b"\x00\x00\x00\x00\x10"))
        buf = bytearray()
        while (f := h.read_frame(s, buf)) is not None:
            if f[2] == 3 and f[0] == h.RST_STREAM:
                break
        self.assertIsNotNone(f, "closed instead of resetting stream 3")
        self.assertEqual(self.srv.stats()["opened"], 1)
        self.assertEqual(self.srv.stats()["closed"], 0)  # the server stream lives on
        s.close()


class Budget(Base):
    """Small budgets so the arithmetic is visible: max message 64 KiB, 80 KiB per
    connection, 200 KiB per process."""
    KIB = 1024
    args = ("--max-message", 64 * 1024, "--conn-buffer", 80 * 1024,
            "--process-buffer", 200 * 1024)

    def park(self, s, sid, declared, sent):
        """A unary request whose body stops short of its declared length (in DATA
        frames of at most 16 KiB, the default SETTINGS_MAX_FRAME_SIZE)."""
        body = b"\x00" + declared.to_bytes(4, "big") + b"p" * sent
        out = h.frame(h.HEADERS, h.END_HEADERS, sid, h.request_headers("/test.Echo/Unary"))
        for i in range(0, len(body), 16384):
            out += h.frame(h.DATA, 0, sid, body[i:i + 16384])
        try:
            s.sendall(out)
        except (BrokenPipeError, ConnectionResetError):
            pass  # cut off for overrunning the connection window: fine

    def test_declared_length_is_not_allocated(self):
        s = self.handshake()
        self.park(s, 1, 64 * 1024, 10)
        st = self.srv.wait_stats(lambda st: st["held"] > 0, "body buffered")
        self.assertEqual(st["held"], 16 * 1024)  # grows with what arrives
        s.close()
        self.srv.wait_stats(lambda st: st["held"] == 0, "buffer freed with the connection")

    def test_one_connection_many_bodies(self):
        # 4 x 17 KiB stays inside the connection window (80 KiB) but their buffers
        # (32 KiB each) do not fit in the connection's budget: the oldest go.
        s = self.handshake()
        for i in range(4):
            self.park(s, 1 + 2 * i, 60 * 1024, 17 * 1024)
        st = self.srv.wait_stats(lambda st: st["budget_resets"] >= 2, "oldest bodies dropped")
        self.assertLessEqual(st["held_max"], 80 * 1024)
        # 10 x 30 KiB overruns the window: the connection is cut off, never buffered.
        s2 = self.handshake()
        for i in range(10):
            self.park(s2, 1 + 2 * i, 60 * 1024, 30 * 1024)
        self.assertTrue(closed_by_server(s2))
        st = self.srv.stats()
        self.assertLessEqual(st["held_max"], 200 * 1024)
        # a new whole request on another connection is served
        self.assertEqual(self.srv.unary("Unary", b"z" * 60000), b"z" * 60000)
        s.close()

    def test_many_connections_oldest_loses(self):
        socks = []
        for _ in range(8):
            s = self.handshake()
            self.park(s, 1, 60 * 1024, 50 * 1024)
            socks.append(s)
            self.srv.wait_stats(lambda st: st["held"] > 0, "body buffered")
        st = self.srv.stats()
        self.assertLessEqual(st["held_max"], 200 * 1024)
        self.assertGreaterEqual(st["budget_resets"], 4)
        # the oldest holder got the status and a reset; the newest is still parked
        buf, types = bytearray(), []
        while (f := h.read_frame(socks[0], buf)) is not None and f[0] != h.RST_STREAM:
            types.append(f[0])
        self.assertIn(h.HEADERS, types)
        self.assertEqual(self.srv.unary("Unary", b"q" * 60000), b"q" * 60000)
        for s in socks:
            s.close()
        self.srv.wait_stats(lambda st: st["held"] == 0, "buffers freed")


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
