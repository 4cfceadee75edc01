#!/usr/bin/python3
"""Hostile peers on the metrics listener (--metrics-address): slowloris heads at the
default 10 s request deadline, 10k connection attempts, oversized heads, garbage bytes,
request bodies, and a pipelining peer that never reads its answers. In each, a fresh
scrape is answered, the kubelet's gRPC side keeps serving (Allocate, its ListAndWatch
stream never ends), the listener's log stays bounded, and threads and fds are flat and
RSS under the manifests' limit once the peers are gone. All at the listener's defaults
(16 connections, 8 KiB heads, 10 s per request); timings are printed, not asserted."""
import os
import resource
import socket
import sys
import time

import attacklib
import harness
from harness import RESOURCE, TIMEOUT

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from metricsclient import get, logged_port, read_all, scrape  # noqa: E402

# Listener warning lines an attack may cost: the listener says a repeated warning at most
# once per WARN_INTERVAL_S (src/http/http.c, WARN_INTERVAL_MS), so the bound grows with
# how long the attack ran (under ASan on a busy machine 10k connections take ~2 min), plus
# the first line of each kind at the start.
LOG_BOUND = 10
WARN_INTERVAL_S = 10.0
DEADLINE_S = 10.0     # the listener's default request deadline (src/http/http.h)
MAX_HEAD = 8192


def closed_by_server(s, timeout):
    """True once the server closed s (EOF or reset), reading whatever it answered."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


class HttpAttack(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
        self.peers = []
        self.addCleanup(self.close_peers)
        self.start_all("a100", ["--metrics-address", "127.0.0.1:0"])
        self.port = logged_port(self.plugin)
        self.uuids = [g["uuid"] for g in harness.load_profile("a100")]
        scrape(self.port)  # first scrape: its one-time allocations are in the baseline
        self.before = attacklib.Snapshot(self.plugin.pid)
        self.log_mark = self.plugin.stderr.mark()
        self.t_mark = time.monotonic()

    def close_peers(self):
        for p in self.peers:
            p.close()
        self.peers = []

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT)
        self.peers.append(s)
        return s

    def served(self, what):
        """A fresh scrape is answered and the kubelet side is intact."""
        t0 = time.monotonic()
        s = scrape(self.port)
        sys.stderr.write("%s: fresh scrape answered in %.1f ms\n" % (
            what, (time.monotonic() - t0) * 1e3))
        self.assertIn("gpu_device_plugin_build_info", s.families)
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE,
                               "containers": [[self.uuids[0]]]})
        self.assertNotIn("error", r, r)
        self.assertEqual(self.kubelet.count("stream-ended"), 0, self.failure_context())
        snap = attacklib.Snapshot(self.plugin.pid)
        sys.stderr.write("%s: under attack %r\n" % (what, snap))
        if not snap.sanitized:
            self.assertLess(snap.rss, attacklib.MANIFEST_MEMORY_LIMIT, what)

    def flat_after(self, what):
        self.close_peers()
        after = attacklib.settled(self.plugin.pid, self.before, TIMEOUT)
        sys.stderr.write("%s: before %r\n%s: after  %r\n" % (what, self.before, what, after))
        attacklib.assert_flat(self, self.before, after, what=what)
        lines = self.plugin.stderr.count(lambda l: "metrics listener" in l and l[:1] in "WE",
                                         self.log_mark)
        bound = LOG_BOUND + int((time.monotonic() - self.t_mark) / WARN_INTERVAL_S)
        sys.stderr.write("%s: %d listener warning lines (bound %d)\n" % (what, lines, bound))
        self.assertLessEqual(lines, bound, self.plugin.stderr.text()[-3000:])

    # ---------------------------------------------------------------- scenarios

    def test_slowloris_at_the_default_deadline(self):
        for _ in range(40):  # more than the cap (16): the oldest heads make room
            self.connect().sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        self.served("slowloris x40")
        # every head still unfinished is dropped at the default deadline
        t0 = time.monotonic()
        for i, s in enumerate(self.peers):
            if not closed_by_server(s, DEADLINE_S + TIMEOUT):
                self.fail("slowloris connection %d still open" % i)
        sys.stderr.write("slowloris x40: all closed %.1f s after the last head byte\n" % (
            time.monotonic() - t0))
        self.flat_after("slowloris x40")

    def test_ten_thousand_connection_attempts(self):
        t0 = time.monotonic()
        for batch in range(20):
            held = []
            for _ in range(500):
                try:
                    held.append(socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT))
                except OSError:
                    pass  # a full accept queue may refuse: that is the point
            for s in held[::3]:
                try:
                    s.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
                except OSError:
                    pass
            for s in held:
                s.close()
        sys.stderr.write("10k connections: %.1f s\n" % (time.monotonic() - t0))
        self.served("10k connections")
        self.flat_after("10k connections")

    def test_oversized_heads(self):
        # one header line longer than the limit, sent at once
        s = self.connect()
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * (4 * MAX_HEAD) + b"\r\n\r\n")
        self.assertTrue(read_all(s).startswith(b"HTTP/1.1 431 "))
        # many small headers, a byte short of the limit each time they are sent
        s = self.connect()
        try:
            for i in range(2000):
                s.sendall(b"X-H%d: v\r\n" % i if i else b"GET / HTTP/1.1\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.assertTrue(closed_by_server(s, TIMEOUT))
        # a URL longer than the listener keeps
        s = self.connect()
        s.sendall(b"GET /" + b"u" * 4000 + b" HTTP/1.1\r\n\r\n")
        self.assertTrue(read_all(s).startswith(b"HTTP/1.1 414 "))
        # a head just under the limit is still answered
        pad = MAX_HEAD - 200
        s = self.connect()
        s.sendall(b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"p" * pad + b"\r\nConnection: close\r\n\r\n")
        self.assertTrue(read_all(s).startswith(b"HTTP/1.1 200 "))
        self.served("oversized heads")
        self.flat_after("oversized heads")

    def test_garbage_and_bodies(self):
        cases = [
            (bytes(range(256)) * 4, b"HTTP/1.1 400 "),
            (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64, b"HTTP/1.1 400 "),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"HTTP/1.1 400 "),
            (b"GET /metrics HTTP/9.9\r\n\r\n", b"HTTP/1.1 505 "),
            (b"POST /metrics HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\n" + b"x" * 1000,
             b"HTTP/1.1 405 "),
            (b"GET /metrics HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", b"HTTP/1.1 413 "),
            (b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
             b"HTTP/1.1 413 "),
            (b"GET /healthz HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
             b"HTTP/1.1 200 "),
            (b"\r\n\r\n\r\n", None),
        ]
        for data, want in cases:
            s = self.connect()
            try:
                s.sendall(data)
                if want is None:
                    s.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass
            got = read_all(s)
            if want is not None:
                self.assertTrue(got.startswith(want), (data[:60], got[:80]))
        self.served("garbage and bodies")
        self.flat_after("garbage and bodies")

    def test_pipelining_peer_that_never_reads(self):
        s = self.connect()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        req = b"GET /metrics HTTP/1.1\r\n\r\n" * 200
        s.settimeout(2)
        sent = 0
        try:
            for _ in range(2000):
                sent += s.send(req)
        except (socket.timeout, BlockingIOError, BrokenPipeError, ConnectionResetError):
            pass
        sys.stderr.write("never reads: %d request bytes accepted\n" % sent)
        self.served("never reads")
        # the answer it does not read holds its request past the deadline: closed
        self.assertTrue(closed_by_server(s, DEADLINE_S + TIMEOUT))
        self.flat_after("never reads")

    def test_probes_keep_answering_while_attacked(self):
        for _ in range(16):
            self.connect().sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        for path, want in (("/healthz", 200), ("/readyz", 200)):
            self.assertEqual(get(self.port, path)[0], want, path)
        self.served("probes under slowloris")
        self.flat_after("probes under slowloris")


if __name__ == "__main__":
    harness.main()
