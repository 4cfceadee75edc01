#!/usr/bin/python3
"""The real binary in DRA mode (as test_dra_serve.py runs it): a GPU with a prepared claim
is never served by the device plugin (issue 30 row 1). A claim prepared on GPU 1, then a
restart with --dra-device-plugin-gpus naming GPU 1 (the documented way to move a GPU back
to the device plugin): GPU 1 stays with DRA (not advertised as nvidia.com/gpu, still in
the slice, its claim answered) with one line saying why, also across a SIGHUP; once its
last claim is unprepared it moves, with one line, through the reload machinery: the
device plugin advertises it and the slice drops it. The per-node config of the chart
(the node-set split) goes through the same state build as the flag and a SIGHUP.

usage: test_dra_serve_split.py <fake-apiserver>"""
import os
import signal
import sys
import time
import unittest

import test_dra_serve as serve
from test_dra_serve import harness
from dra_kubelet import obj, on_node, ref

RESOURCE = "nvidia.com/gpu"


class ServeSplit(serve.DraServe):
    def last_devices(self, start):
        """The device plugin's device IDs in its last list since start (waits for one)."""
        self.kubelet.wait("devices", start, resource=RESOURCE)
        time.sleep(0.3)  # a list sent right after it is the one that counts
        lists = [e for e in self.kubelet.events.lines[start:]
                 if e.get("event") == "devices" and e.get("resource") == RESOURCE]
        return sorted(d["id"] for d in lists[-1]["devices"])

    def test_gpu_with_a_prepared_claim_stays_with_dra_until_unprepared(self):
        self.start_kubelet()
        self.start_dra()
        self.kl.register()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))  # gpu-1
        uid = one["metadata"]["uid"]
        res = self.kl.prepare(ref(one))
        self.assertEqual(res[uid]["error"], "", res)

        # Moved back to the device plugin by the flag while the claim still holds GPU 1.
        start = self.kubelet.events.mark()
        p = self.restart_plugin(["--dra-device-plugin-gpus", "0,1"])
        self.assertEqual(self.last_devices(start), [self.uuids[0]])
        self.assertEqual(sorted(self.slice_devices()), ["gpu-%d" % i for i in range(1, 8)])
        _, line = p.wait_log("GPU 1 (%s) stays with DRA" % self.uuids[1])
        self.assertIn("claim", line)
        self.kl.register()
        again = self.kl.prepare(ref(one))  # the kubelet repeats it after the restart
        self.assertEqual(again[uid]["error"], "", again)
        self.assertEqual(again[uid]["devices"], res[uid]["devices"])

        # A SIGHUP rebuilds the state: the same rule.
        mark = p.stderr.mark()
        kmark = self.kubelet.events.mark()
        p.signal(signal.SIGHUP)
        p.wait_log("Reloaded configuration", start=mark)
        p.wait_log("GPU 1 (%s) stays with DRA" % self.uuids[1], start=mark)
        time.sleep(0.3)
        for e in self.kubelet.events.lines[kmark:]:
            if e.get("event") == "devices":
                self.assertNotIn(self.uuids[1], [d["id"] for d in e["devices"]])
        fds, threads = p.fd_count(), len(os.listdir("/proc/%d/task" % p.pid))

        # Its last claim unprepared: it moves, and says so once.
        mark = p.stderr.mark()
        kmark = self.kubelet.events.mark()
        self.assertEqual(self.kl.unprepare(ref(one)), {uid: ""})
        p.wait_log("GPU 1 (%s) moves to the device plugin" % self.uuids[1], start=mark)
        deadline = time.monotonic() + harness.TIMEOUT
        while self.last_devices(kmark) != sorted(self.uuids[:2]):
            self.assertLess(time.monotonic(), deadline, "GPU 1 never advertised")
        self.wait_slice(lambda d: sorted(d) == ["gpu-%d" % i for i in range(2, 8)], "gpu-1 gone")
        self.assertFalse(os.path.exists(self.spec_path(uid)))
        # A claim of it now is not DRA's to prepare.
        two = self.load(on_node(obj("resourceclaim-from-template-allocated"), name="later",
                                uid="cccccccc-0000-0000-0000-000000000001"))
        err = self.kl.prepare(ref(two))[two["metadata"]["uid"]]["error"]
        self.assertIn("device gpu-1 is not a device of node", err)
        self.assertEqual(p.stderr.count(lambda x: "moves to the device plugin" in x, mark), 1)
        self.assertEqual((p.fd_count(), len(os.listdir("/proc/%d/task" % p.pid))), (fds, threads))


def load_tests(loader, tests, pattern):
    """Only the cases above (the base class's are test_dra_serve.py's)."""
    return unittest.TestSuite(ServeSplit(n) for n in sorted(vars(ServeSplit)) if n.startswith("test_"))


if __name__ == "__main__":
    serve.FAKE = sys.argv.pop(1)
    harness.main()
