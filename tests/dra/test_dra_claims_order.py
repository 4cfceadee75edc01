"""Prepare and Unprepare of one claim UID are ordered (issue 30 row 2): the later call wins,
whichever order the answers come in. dra-claims-probe on the real API client, as
test_dra_claims.py drives it; the claim's GET is held by stopping the fake API server
(the client queues it until the server is back) while the other call arrives.

An Unprepare that answered success leaves no spec, no record and no staged file behind,
also when a Prepare of the same UID was still waiting for its GET: that Prepare fails
("unprepared while its claim was being fetched"), and the GPU is free for the next
claim. A Prepare that comes after the Unprepare is the later call: it prepares. The
engine's fds and threads are as before.

usage: test_dra_claims_order.py <dra-claims-probe> <fake-apiserver>"""
import copy
import json
import os
import sys
import time
import unittest

import test_dra_claims as base
from test_dra_claims import obj, ref


class Order(base.Claims):
    def usage(self):
        pid = self.p.p.pid
        return len(os.listdir("/proc/%d/fd" % pid)), len(os.listdir("/proc/%d/task" % pid))

    def files(self):
        return sorted(os.listdir(self.cdi)) if os.path.isdir(self.cdi) else []

    def spec_name(self, o):
        return "k8s.gpu.nvidia.com-claim_%s.yaml" % o["metadata"]["uid"]

    def held_prepare(self, call, o):
        """Prepare o as call `call` with the API server stopped: returned once its GET
        waits (its spec file staged meanwhile)."""
        staged = "." + self.spec_name(o) + "."
        before = len([f for f in self.files() if f.startswith(staged)])
        self.p.send("prepare %s %s" % (call, ref(o)))
        deadline = time.monotonic() + 5
        while len([f for f in self.files() if f.startswith(staged)]) <= before:
            self.assertLess(time.monotonic(), deadline, "no spec file staged during the GET")
            time.sleep(0.01)

    def answer(self, call):
        return json.loads(self.p.expect(r"^done %s (.*)$" % call, timeout=20).group(1))

    def other_claim_of_the_same_gpu(self, o):
        n = copy.deepcopy(o)
        n["metadata"].update(name="next-pod-gpu", uid="bbbbbbbb-0000-0000-0000-000000000001")
        return self.load(n)

    def warm(self):
        """Connected to the API server (a first GET answered), nothing recorded."""
        w = self.load(obj("resourceclaim-two-gpus-allocated"))
        self.assertNotIn("error", self.prepare(ref(w))[0])
        self.assertEqual(self.call("unprepare", ref(w))[0], {"uid": w["metadata"]["uid"], "devices": []})

    def test_unprepare_while_the_get_waits_wins(self):
        o = self.load(obj("resourceclaim-from-template-allocated"))
        uid = o["metadata"]["uid"]
        self.warm()
        before = self.usage()
        self.cmd("stop")
        self.held_prepare("p", o)
        # The kubelet gives up on the pod meanwhile: its Unprepare answers success ...
        self.assertEqual(self.call("unprepare", ref(o)), [{"uid": uid, "devices": []}])
        self.cmd("start")
        # ... and the Prepare that was waiting (answered after it) fails; nothing of it stays.
        res = self.answer("p")
        self.assertEqual(self.error(res), "error preparing devices for claim %s/%s:%s: unprepared "
                         "while its claim was being fetched" % (o["metadata"]["namespace"],
                                                                o["metadata"]["name"], uid))
        time.sleep(0.3)  # a GET answered late would have prepared by now
        self.assertEqual(self.files(), [])
        self.assertEqual(self.checkpoint()["preparedClaims"], {})
        # The GPU is free: the next pod's claim of it prepares.
        n = self.other_claim_of_the_same_gpu(o)
        res = self.prepare(ref(n))
        self.assertNotIn("error", res[0], res)
        self.assertEqual([d["device"] for d in res[0]["devices"]], ["gpu-1"])
        self.assertEqual(self.call("unprepare", ref(n))[0], {"uid": n["metadata"]["uid"], "devices": []})
        self.assertEqual(self.files(), [])
        self.assertEqual(self.usage(), before)

    def test_every_waiting_prepare_of_the_uid_loses(self):
        o = self.load(obj("resourceclaim-from-template-allocated"))
        uid = o["metadata"]["uid"]
        self.warm()
        before = self.usage()
        self.cmd("stop")
        self.held_prepare("p1", o)
        self.held_prepare("p2", o)
        self.assertEqual(self.call("unprepare", ref(o)), [{"uid": uid, "devices": []}])
        self.cmd("start")
        for c in ("p1", "p2"):
            self.assertIn("unprepared while its claim was being fetched", self.error(self.answer(c)))
        time.sleep(0.3)
        self.assertEqual(self.files(), [])
        self.assertEqual(self.checkpoint()["preparedClaims"], {})
        self.warm()  # connected again: no GET was sent since the server came back
        self.assertEqual(self.usage(), before)

    def test_prepare_after_the_unprepare_wins(self):
        o = self.load(obj("resourceclaim-from-template-allocated"))
        uid = o["metadata"]["uid"]
        self.warm()
        self.cmd("stop")
        self.held_prepare("p1", o)
        self.assertEqual(self.call("unprepare", ref(o)), [{"uid": uid, "devices": []}])
        # The kubelet prepares it again (the later call): that one prepares.
        self.held_prepare("p2", o)
        self.cmd("start")
        self.assertIn("unprepared while its claim was being fetched", self.error(self.answer("p1")))
        res = self.answer("p2")
        self.assertNotIn("error", res[0], res)
        self.assertEqual(self.files(), [self.spec_name(o)])
        self.assertEqual(self.checkpoint()["preparedClaims"][uid]["checkpointState"], "PrepareCompleted")
        # And the unprepare after it removes it.
        self.assertEqual(self.call("unprepare", ref(o)), [{"uid": uid, "devices": []}])
        self.assertEqual(self.files(), [])
        self.assertEqual(self.checkpoint()["preparedClaims"], {})

    def test_prepare_while_the_reset_runs_is_refused_then_prepares(self):
        """The other order: an Unprepare resetting the GPU is in flight when a Prepare of the
        claim comes; the Prepare is refused (the kubelet retries), the Unprepare's success
        leaves nothing, and the retry prepares."""
        ts = copy.deepcopy(obj("resourceclaim-opaque-config-allocated"))
        ts["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-5"  # 1 s tool
        self.load(ts)
        uid = ts["metadata"]["uid"]
        self.p.send("prepare s " + ref(ts))
        self.p.expect(r"^applied 5 TimeSlicing Long$")
        self.assertNotIn("error", self.answer("s")[0])
        self.p.send("unprepare u " + ref(ts))
        self.p.expect(r"^reset 5 TimeSlicing$")
        self.assertIn("it is being unprepared (its GPUs reset); try again",
                      self.error(self.prepare(ref(ts))))
        self.assertEqual(self.answer("u"), [{"uid": uid, "devices": []}])
        self.assertEqual(self.files(), [])
        self.assertEqual(self.checkpoint()["preparedClaims"], {})
        self.p.send("prepare r " + ref(ts))
        self.p.expect(r"^applied 5 TimeSlicing Long$")
        self.assertNotIn("error", self.answer("r")[0])
        self.assertEqual(self.files(), [self.spec_name(ts)])


def load_tests(loader, tests, pattern):
    """Only the cases above (the base class's are test_dra_claims.py's)."""
    return unittest.TestSuite(Order(n) for n in sorted(vars(Order)) if n.startswith("test_"))


if __name__ == "__main__":
    base.PROBE, base.FAKE = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    unittest.main(verbosity=2)
