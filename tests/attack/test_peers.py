#!/usr/bin/python3
"""Hostile peers on the plugin's socket (issue 8, items 2, 8 and 9): held idle
connections at the cap, slowloris header blocks, unfinished request bodies on one
connection and across connections, and a process limited to 32 fds. In each, a new
kubelet-style connection (Allocate, then a fresh ListAndWatch) must be served, the
real kubelet's ListAndWatch stream must live on, RSS must stay under the manifests'
limit, the plugin's log must stay bounded, and threads and fds must be flat once the
peers are gone. All at the plugin's default limits and timeouts (docs/operations.md,
"Resource budgets"); the measured latencies are printed, not asserted."""
import os
import subprocess
import sys
import time

import attacklib
import harness
import h2peer
from harness import RESOURCE, TIMEOUT

MIB = 1024 * 1024
LOG_BOUND = 10  # grpc lines a whole attack may cost in the log


class LimitedPlugin(harness.Plugin):
    """The plugin started under `prlimit --nofile=N` (prlimit execs it: same pid)."""

    def __init__(self, nofile, args, env, log):
        self.proc = subprocess.Popen(["prlimit", "--nofile=%d" % nofile, "--", harness.PLUGIN] +
                                     list(args), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, close_fds=True)
        self.stderr = harness.LineReader(self.proc.stderr, tee=log)
        self.stdout = harness.LineReader(self.proc.stdout)
        self.pid = self.proc.pid


class Peers(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.peers = []
        self.addCleanup(self.close_peers)

    def start(self, nofile=None):
        if nofile is None:
            self.start_all("a100")
        else:
            self.render("a100")
            self.start_kubelet()
            p = LimitedPlugin(nofile, self.plugin_args(), self.plugin_env(), self.log)
            self.addCleanup(self._finish_plugin, p)
            self.plugin = p
            self.kubelet.registered()
        self.uuids = [g["uuid"] for g in harness.load_profile("a100")]
        self.sock = self.plugin_socket()
        self.before = attacklib.Snapshot(self.plugin.pid)
        self.log_mark = self.plugin.stderr.mark()

    def close_peers(self):
        for p in self.peers:
            p.close()
        self.peers = []

    def newcomer(self, what, n_ids=1):
        """A new kubelet connection is served: Allocate of n_ids IDs, then a fresh
        ListAndWatch with the whole list."""
        ids = [self.uuids[i % len(self.uuids)] for i in range(n_ids)]
        t_alloc, t_list, visible, n = h2peer.fresh_kubelet(self.sock, ids, TIMEOUT)
        self.assertEqual(set(visible.split(",")), set(ids))
        self.assertEqual(n, len(self.uuids))
        sys.stderr.write("%s: new connection served: Allocate(%d IDs) %.1f ms, first "
                         "ListAndWatch list %.1f ms\n" % (what, n_ids, t_alloc * 1e3, t_list * 1e3))

    def kubelet_intact(self):
        """The real kubelet's ListAndWatch stream never ended; its channel still works."""
        self.assertEqual(self.kubelet.count("stream-ended"), 0, self.failure_context())
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE,
                               "containers": [[self.uuids[0]]]})
        self.assertNotIn("error", r, r)

    def sanitized(self):
        """ASan keeps freed memory in its quarantine and adds shadow memory: its RSS
        is not the product's, so it is reported but not judged."""
        with open("/proc/%d/maps" % self.plugin.pid) as f:
            return "libasan" in f.read()

    def rss_ok(self, what):
        snap = attacklib.Snapshot(self.plugin.pid)
        sys.stderr.write("%s: under attack %r\n" % (what, snap))
        if not self.sanitized():
            self.assertLess(snap.rss, attacklib.MANIFEST_MEMORY_LIMIT, "%s: %r" % (what, snap))

    def grpc_lines(self):
        return self.plugin.stderr.count(lambda l: "grpc" in l and l[:1] in "WE",
                                        self.log_mark)

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.plugin.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def flat_after(self, what):
        """Peers gone: wait for the plugin to notice, then threads and fds are flat."""
        self.close_peers()
        deadline = time.monotonic() + TIMEOUT
        while True:
            after = attacklib.Snapshot(self.plugin.pid)
            if after.n_fds <= self.before.n_fds or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        sys.stderr.write("%s: before %r\n%s: after  %r\n" % (what, self.before, what, after))
        if self.sanitized():
            after.rss = 0
        attacklib.assert_flat(self, self.before, after, what=what)
        lines = self.grpc_lines()
        sys.stderr.write("%s: %d grpc warning lines\n" % (what, lines))
        self.assertLessEqual(lines, LOG_BOUND, self.plugin.stderr.text()[-3000:])

    # ---------------------------------------------------------------- scenarios

    def test_held_idle_connections_at_the_cap(self):
        self.start()
        for _ in range(70):  # more than the cap (64), with the kubelet's one
            self.peers.append(h2peer.idle(self.sock))
        self.newcomer("held idle x70")
        self.kubelet_intact()
        self.rss_ok("held idle x70")
        self.flat_after("held idle x70")

    def test_slowloris_at_the_default_deadline(self):
        self.start()
        for _ in range(64):
            self.peers.append(h2peer.slowloris(self.sock))
        self.newcomer("slowloris x64")
        self.kubelet_intact()
        self.rss_ok("slowloris x64")
        # At the default request deadline (10 s) each unfinished header block costs
        # its connection: every peer still held is closed by the plugin.
        for i, s in enumerate(self.peers):
            if not h2peer.closed_by_server(s, 2 * TIMEOUT):
                self.fail("slowloris connection %d still open" % i)
        self.flat_after("slowloris x64")

    def test_unfinished_bodies_on_one_connection(self):
        self.start()
        holder = h2peer.BodyHolder(self.sock, 100, 4 * MIB)
        self.peers.append(holder)
        sent = holder.push()
        sys.stderr.write("100 x 4 MiB on one connection: the peer got %d bytes in, "
                         "%d streams reset, closed=%s\n" % (sent, len(holder.reset), holder.closed))
        self.rss_ok("bodies, one connection")
        self.newcomer("bodies, one connection", n_ids=10000)
        self.kubelet_intact()
        self.flat_after("bodies, one connection")

    def test_unfinished_bodies_across_connections(self):
        self.start()
        sent = 0
        for _ in range(60):
            holder = h2peer.BodyHolder(self.sock, 1, 4 * MIB)
            self.peers.append(holder)
            sent += holder.push()
        sys.stderr.write("60 connections x 4 MiB: the peers got %d bytes in, %d streams "
                         "reset\n" % (sent, sum(len(p.reset) for p in self.peers)))
        self.rss_ok("bodies, 60 connections")
        self.newcomer("bodies, 60 connections", n_ids=10000)
        self.kubelet_intact()
        self.flat_after("bodies, 60 connections")

    def test_fd_limit_32(self):
        self.start(nofile=32)
        cpu0 = self.cpu_seconds()
        for _ in range(40):  # far more than the fds left
            self.peers.append(h2peer.idle(self.sock))
        self.newcomer("fd limit 32, 40 idle peers")
        self.kubelet_intact()
        self.rss_ok("fd limit 32")
        sys.stderr.write("fd limit 32: plugin CPU %.2f s during the attack\n" %
                         (self.cpu_seconds() - cpu0))
        self.flat_after("fd limit 32")


if __name__ == "__main__":
    harness.main()
