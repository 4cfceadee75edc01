#!/usr/bin/python3
"""The real binary in DRA mode (as test_dra_serve.py runs it) on a node where something
that is not a regular file lies where the checkpoint goes (issue 30, rows 4 and 12): a
FIFO at checkpoint.json at start is moved aside and the start goes on; a FIFO at its
spare, checkpoint.json.old, never blocks the process in open(): the Prepare that saves
is answered, registration and other claims meanwhile, SIGTERM ends the process, and its
threads and fds are as before.

usage: test_dra_serve_files.py <fake-apiserver>"""
import os
import signal
import stat
import sys
import threading
import time
import unittest

import grpc

import test_dra_serve as serve
from test_dra_serve import attacklib, harness
from dra_kubelet import DRIVER, Kubelet, obj, on_node, ref


class ServeFiles(serve.DraServe):
    def path(self, suffix=""):
        return os.path.join(self.plugins, DRIVER, "checkpoint.json" + suffix)

    def test_fifo_at_the_checkpoint_at_start(self):
        os.makedirs(os.path.dirname(self.path()))
        os.mkfifo(self.path())
        p = self.start_dra()  # exited before: "reading checkpoint ...: Invalid argument"
        self.kl.register()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        self.assertPrepared(self.kl.prepare(ref(one)), one, ["gpu-1"], ["gpu"])
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.path(".not-regular")).st_mode))
        moved = [line for line in p.stderr.text().splitlines() if "moved to" in line]
        self.assertEqual(len(moved), 1, moved)
        self.assertIn("checkpoint %s is a FIFO, not a regular file: moved to %s" % (
            self.path(), self.path(".not-regular")), moved[0])

    def test_fifo_at_the_spare_blocks_nothing(self):
        p = self.start_dra()
        self.kl.register()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        two = self.load(on_node(obj("resourceclaim-two-gpus-allocated")))
        self.assertPrepared(self.kl.prepare(ref(one)), one, ["gpu-1"], ["gpu"])  # no spare after it
        before = attacklib.Snapshot(p.pid)
        os.mkfifo(self.path(".old"))
        # The Prepare whose save meets the FIFO, from a thread: it blocked the process before.
        box = {}
        th = threading.Thread(target=lambda: box.update(res=self.kl.prepare(ref(two), timeout=10)))
        th.start()
        # Meanwhile the kubelet registers anew (its own connection, as after its restart).
        reg = Kubelet(self.registrar)
        try:
            self.assertEqual(reg.register().name, DRIVER)
        finally:
            reg.close()
        th.join(harness.TIMEOUT)
        self.assertPrepared(box["res"], two, ["gpu-2", "gpu-3"], ["gpus", "gpus"])
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.path(".old.not-regular")).st_mode))
        p.wait_log("checkpoint %s is a FIFO, not a regular file: moved to %s" % (
            self.path(".old"), self.path(".old.not-regular")))
        self.assertEqual(self.kl.unprepare(ref(one), ref(two)),
                         {one["metadata"]["uid"]: "", two["metadata"]["uid"]: ""})
        attacklib.assert_flat(self, before, attacklib.settled(p.pid, before), what="FIFO at the spare")
        moved = [line for line in p.stderr.text().splitlines() if "moved to" in line]
        self.assertEqual(len(moved), 1, moved)

    def test_sigterm_with_a_fifo_at_the_spare(self):
        p = self.start_dra()
        self.kl.register()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        two = self.load(on_node(obj("resourceclaim-two-gpus-allocated")))
        self.assertPrepared(self.kl.prepare(ref(one)), one, ["gpu-1"], ["gpu"])
        os.mkfifo(self.path(".old"))
        th = threading.Thread(target=self.prepare_quietly, args=(two,))
        th.start()
        time.sleep(0.3)  # its save has met the FIFO (blocked there before), or is about to
        t = time.monotonic()
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_exit(timeout=5), 0, p.stderr.text()[-3000:])
        self.assertLess(time.monotonic() - t, 2.0)
        th.join(harness.TIMEOUT)

    def prepare_quietly(self, o):
        """A Prepare that SIGTERM may cut short (answered or not, either is fine)."""
        try:
            self.kl.prepare(ref(o), timeout=10)
        except grpc.RpcError:
            pass

def load_tests(loader, tests, pattern):
    """Only the cases above (the base class's are test_dra_serve.py's)."""
    return unittest.TestSuite(ServeFiles(n) for n in sorted(vars(ServeFiles)) if n.startswith("test_"))


if __name__ == "__main__":
    serve.FAKE = sys.argv.pop(1)
    harness.main()
