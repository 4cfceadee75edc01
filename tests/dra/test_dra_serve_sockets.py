#!/usr/bin/python3
"""The real binary in DRA mode (as test_dra_serve.py runs it), its two sockets attacked
(issue 30, rows 6, 7 and 8): the driver's directory <plugins>/gpu.nvidia.com briefly a
file, then a directory again (dra.sock is back within a second of the directory, as the
device-plugin socket is); a peer holding 64 health streams on dra.sock (the kubelet's
connection, the one that calls Prepare, is never the one closed to make room, and the
refusal of the others is logged); NotifyRegistrationStatus flipping (the lines it makes
are rate-limited). Threads and fds are as before each attack.

usage: test_dra_serve_sockets.py <fake-apiserver>"""
import ctypes
import os
import socket
import subprocess
import sys
import time
import unittest

import grpc

import test_dra_serve as serve
from test_dra_serve import attacklib, harness
from dra_kubelet import DRIVER, HEALTH, PB, REG, Kubelet, obj, on_node, ref

RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a, b):
    """Swap two paths in one step (renameat2 RENAME_EXCHANGE): the plugin never sees the
    path missing in between, so it cannot make the directory again before we do."""
    AT_FDCWD = -100
    if _libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


def serving(path):
    """A socket at path that accepts a connection."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


# Another process (its own pid, as a real peer): N connections with a health stream each,
# held until killed; says "held H refused R" once all were tried.
HEALTH_PEER = """
import sys, grpc
sock, method, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
held, refused, chans = [], 0, []
for _ in range(n):
    ch = grpc.insecure_channel("unix:" + sock, options=[("grpc.use_local_subchannel_pool", 1)])
    chans.append(ch)
    call = ch.unary_stream(method, request_serializer=lambda m: m,
                           response_deserializer=lambda b: b)(b"", timeout=120)
    try:
        next(call)
        held.append(call)
    except grpc.RpcError:
        refused += 1
print("held %d refused %d" % (len(held), refused), flush=True)
__import__("time").sleep(120)
"""


class ServeSockets(serve.DraServe):
    def test_driver_dir_briefly_a_file(self):
        p = self.start_dra()
        self.kl.register()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        self.assertPrepared(self.kl.prepare(ref(one)), one, ["gpu-1"], ["gpu"])
        self.assertEqual(self.kl.unprepare(ref(one)), {one["metadata"]["uid"]: ""})
        self.kl.close()
        before = attacklib.Snapshot(p.pid)
        d = os.path.join(self.plugins, DRIVER)
        sock = os.path.join(d, "dra.sock")
        aside, fresh = d + ".aside", d + ".fresh"
        with open(aside, "w") as f:
            f.write("not a directory\n")
        exchange(d, aside)  # d is a file now; the old directory (and socket) at aside
        mark = len(p.stderr.lines)
        time.sleep(0.5)  # the plugin has seen it (it tries to serve again, and cannot)
        self.assertFalse(serving(sock))
        os.mkdir(fresh)
        exchange(d, fresh)  # a directory again, empty
        t0 = time.monotonic()
        while not serving(sock) and time.monotonic() - t0 < harness.TIMEOUT:
            time.sleep(0.005)
        took = time.monotonic() - t0
        print("dra.sock back %.3f s after its directory" % took)
        self.assertTrue(serving(sock), "dra.sock not served again in %.0f s; log:\n%s" % (
            took, "\n".join(map(str, p.stderr.lines[mark:]))[-3000:]))
        self.assertLess(took, 5.0)  # the "within a second", with a margin for load
        # The kubelet, still registered, calls the socket its registration names.
        kl = Kubelet(self.registrar)
        self.addCleanup(kl.close)
        kl.register()
        two = self.load(on_node(obj("resourceclaim-two-gpus-allocated")))
        self.assertPrepared(kl.prepare(ref(two)), two, ["gpu-2", "gpu-3"], ["gpus", "gpus"])
        self.assertEqual(kl.unprepare(ref(two)), {two["metadata"]["uid"]: ""})
        kl.close()
        attacklib.assert_flat(self, before, attacklib.settled(p.pid, before), what="dir a file")

    def test_health_streams_do_not_evict_the_kubelet(self):
        p = self.start_dra()
        self.kl.register()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        two = self.load(on_node(obj("resourceclaim-two-gpus-allocated")))
        self.assertPrepared(self.kl.prepare(ref(one)), one, ["gpu-1"], ["gpu"])
        before = attacklib.Snapshot(p.pid)
        sock = os.path.join(self.plugins, DRIVER, "dra.sock")
        held, refused, chans = [], 0, []
        try:
            for _ in range(64):
                # A channel of its own (no shared subchannel): one connection each.
                ch = grpc.insecure_channel("unix:" + sock,
                                           options=[("grpc.use_local_subchannel_pool", 1)])
                chans.append(ch)
                call = ch.unary_stream(HEALTH,
                                       request_serializer=PB["NodeWatchResourcesRequest"].SerializeToString,
                                       response_deserializer=PB["NodeWatchResourcesResponse"].FromString)(
                    PB["NodeWatchResourcesRequest"](), timeout=60)
                try:
                    next(call)  # the list sent at open: the stream is held
                    held.append(call)
                except grpc.RpcError:
                    refused += 1
            print("health streams held: %d, refused: %d" % (len(held), refused))
            # While they are held, the kubelet's Prepare is answered on its connection.
            self.assertPrepared(self.kl.prepare(ref(two), timeout=10), two,
                                ["gpu-2", "gpu-3"], ["gpus", "gpus"])
            self.assertEqual(self.kl.unprepare(ref(one), ref(two)),
                             {one["metadata"]["uid"]: "", two["metadata"]["uid"]: ""})
            self.assertGreaterEqual(refused, 1)
            p.wait_log("refusing a new one")
        finally:
            for c in held:
                c.cancel()
            for ch in chans:
                ch.close()
        attacklib.assert_flat(self, before, attacklib.settled(p.pid, before), what="64 health streams")

    def test_health_streams_before_the_kubelets_first_call(self):
        """The kubelet connects at its registration and calls Prepare later: a peer process
        opening 64 health streams meanwhile must not close the kubelet's idle connection to
        make room (it did: the idle-longest without a stream), or the first Prepare finds
        the connection gone and no room for a new one."""
        p = self.start_dra()
        self.kl.register()
        grpc.channel_ready_future(self.kl.dra).result(timeout=10)  # connected, no call yet
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        sock = os.path.join(self.plugins, DRIVER, "dra.sock")
        peer = subprocess.Popen([sys.executable, "-c", HEALTH_PEER, sock, HEALTH, "64"],
                                stdout=subprocess.PIPE, text=True)
        try:
            line = peer.stdout.readline()
            print(line.strip())
            held, refused = (int(w) for w in line.split()[1::2])
            self.assertEqual(held + refused, 64, line)
            self.assertGreaterEqual(refused, 1, line)
            p.wait_log("refusing a new one")
            self.assertPrepared(self.kl.prepare(ref(one), timeout=10), one, ["gpu-1"], ["gpu"])
            self.assertEqual(self.kl.unprepare(ref(one)), {one["metadata"]["uid"]: ""})
        finally:
            peer.kill()
            peer.wait()

    def test_registration_status_flipping_is_rate_limited(self):
        p = self.start_dra()
        self.kl.register()
        before = attacklib.Snapshot(p.pid)
        mark = len(p.stderr.lines)
        ch = grpc.insecure_channel("unix:" + self.kl.reg_path)
        try:
            notify = ch.unary_unary(REG + "NotifyRegistrationStatus",
                                    request_serializer=PB["RegistrationStatus"].SerializeToString,
                                    response_deserializer=PB["RegistrationStatusResponse"].FromString)
            n = 2000
            for i in range(n):
                notify(PB["RegistrationStatus"](plugin_registered=i % 2 == 1,
                                                error="" if i % 2 else "flip %d" % i), timeout=5)
        finally:
            ch.close()
        lines = [str(x) for x in p.stderr.lines[mark:]
                 if "registered with the kubelet" in str(x) or "refused driver" in str(x)]
        print("%d calls, %d lines" % (n, len(lines)))
        self.assertLessEqual(len(lines), 20, "\n".join(lines[:30]))
        attacklib.assert_flat(self, before, attacklib.settled(p.pid, before),
                              what="registration flipping")
        # The last call registered: a Prepare is served as before.
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        self.assertPrepared(self.kl.prepare(ref(one)), one, ["gpu-1"], ["gpu"])


def load_tests(loader, tests, pattern):
    """Only the cases above (the base class's are test_dra_serve.py's)."""
    return unittest.TestSuite(ServeSockets(n) for n in sorted(vars(ServeSockets)) if n.startswith("test_"))


if __name__ == "__main__":
    serve.FAKE = sys.argv.pop(1)
    harness.main()
