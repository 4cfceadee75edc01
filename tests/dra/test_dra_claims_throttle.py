"""No claim fails for a cause inside the plugin (issue 30 row 3): the claims' GETs wait in
the API client's own rate limit (client-go's QPS and burst), and that wait is not the
server's time. dra-claims-probe on the real API client, as test_dra_claims.py drives it,
with a small rate limit and a short request timeout so that the queue is long against
the timeout.

A GET's request timeout counts from when it is sent: many claims in one call, or many
one-claim calls at once, all get the server's answer however long they queued. A GET
that waits in the limiter past its wait bound fails saying so, not "Connection timed
out". A 429 Too Many Requests is sent again after its Retry-After, and is the answer
only when that would pass the wait bound. The probe's fds and threads are as before.

usage: test_dra_claims_throttle.py <dra-claims-probe> <fake-apiserver>"""
import json
import os
import sys
import time
import unittest

import test_dra_claims as base
from test_dra_claims import obj, ref

NOT_FOUND = "claim not found in the API server"
THROTTLED = "getting the claim: never sent: it waited in this client's own rate limit"
DEADLINE = "until the kubelet's deadline for the call was near"


class Throttle(base.Claims):
    # 20 GETs a second after a burst of 2, each with 500 ms to be answered once sent.
    kube = ["--kube-qps", "20", "--kube-burst", "2", "--kube-timeout-ms", "500"]

    def start(self, cdi=None):
        p = base.kt.LineProc([base.PROBE, "--kubeconfig", self.kubeconfig,
                              "--cdi-root", cdi or self.cdi, "--plugin-dir", self.plugin,
                              "--boot-id-file", self.boot] + self.kube)
        p.expect(r"^ready$")
        self.probes.append(p)
        return p

    def usage(self):
        """fds and threads, after one GET opened the API client's connection."""
        if not getattr(self, "_warm", False):
            self._warm = True
            self.assertIn(NOT_FOUND, self.error(self.prepare("ns/warm/u-warm")))
            self.gets()
        pid = self.p.p.pid
        return len(os.listdir("/proc/%d/fd" % pid)), len(os.listdir("/proc/%d/task" % pid))

    def errors(self, res):
        return [r.get("error", "") for r in res]

    def test_many_claims_in_one_call_wait_their_turn(self):
        before = self.usage()
        self.n += 1
        # 60 GETs: the last is sent about 2.9 s after the first, 6 request timeouts later.
        self.p.send("prepare-gen c%d 60" % self.n)
        res = json.loads(self.p.expect(r"^done c%d (.*)$" % self.n, timeout=60).group(1))
        self.assertEqual(len(res), 60)
        for i, e in enumerate(self.errors(res)):
            self.assertIn(NOT_FOUND, e, i)
        self.assertEqual(len(self.gets()), 60)
        self.assertEqual(self.usage(), before)

    def test_many_one_claim_calls_at_once_wait_their_turn(self):
        before = self.usage()
        first = self.n + 1
        for i in range(50):
            self.n += 1
            self.p.send("prepare c%d ns/c%d/u-%d" % (self.n, i, i))
        for n in range(first, self.n + 1):
            res = json.loads(self.p.expect(r"^done c%d (.*)$" % n, timeout=60).group(1))
            self.assertEqual(len(res), 1)
            self.assertIn(NOT_FOUND, res[0].get("error", ""), n)
        self.assertEqual(len(self.gets()), 50)
        self.assertEqual(self.usage(), before)

    def test_past_the_wait_bound_the_failure_names_the_rate_limit(self):
        # 1 GET a second, and at most 1.5 s in the queue: the first two are answered, the
        # last ones never leave the client.
        self.kube = ["--kube-qps", "1", "--kube-burst", "1", "--kube-timeout-ms", "500",
                     "--kube-max-wait-ms", "1500"]
        self.restart()
        self.n += 1
        self.p.send("prepare-gen c%d 6" % self.n)
        res = json.loads(self.p.expect(r"^done c%d (.*)$" % self.n, timeout=60).group(1))
        errs = self.errors(res)
        self.assertTrue(all(NOT_FOUND in e or THROTTLED in e for e in errs), errs)
        self.assertIn(NOT_FOUND, errs[0])
        self.assertIn(THROTTLED, errs[-1])
        self.assertFalse(any("timed out" in e for e in errs), errs)
        self.assertEqual(len(self.gets()), sum(NOT_FOUND in e for e in errs))

    def test_the_kubelets_deadline_is_the_bound(self):
        # 1 GET a second, 5 s to answer one once sent, the client's own wait bound its
        # default (120 s): the kubelet's deadline of 2.5 s is the one that counts. Three
        # GETs go (at 0, 1 and 2 s); the others fail before that deadline (a tenth of it
        # left for the answer) naming it, not past it, and not at the 5 s request timeout.
        self.kube = ["--kube-qps", "1", "--kube-burst", "1", "--kube-timeout-ms", "5000"]
        self.restart()
        self.n += 1
        t = time.monotonic()
        self.p.send("prepare-gen c%d 6 2500" % self.n)
        res = json.loads(self.p.expect(r"^done c%d (.*)$" % self.n, timeout=60).group(1))
        took = time.monotonic() - t
        errs = self.errors(res)
        self.assertTrue(all(NOT_FOUND in e or (THROTTLED in e and DEADLINE in e) for e in errs),
                        errs)
        self.assertIn(NOT_FOUND, errs[0])
        self.assertIn(DEADLINE, errs[-1])
        self.assertGreater(took, 2.0)
        self.assertLess(took, 2.5)
        self.assertEqual(len(self.gets()), sum(NOT_FOUND in e for e in errs))

    def test_429_is_sent_again_after_its_retry_after(self):
        o = self.load(obj("resourceclaim-from-template-allocated"))
        md = o["metadata"]
        self.cmd("rc-429 %s %s 2 1" % (md["namespace"], md["name"]))
        t = time.monotonic()
        res = self.prepare(ref(o))
        self.assertGreaterEqual(time.monotonic() - t, 1.9)  # two Retry-After: 1
        self.assertEqual(len(res), 1)
        self.assertEqual(res[0].get("error", ""), "")
        self.assertNotEqual(res[0]["devices"], [])
        self.assertEqual(len(self.gets()), 3)

    def test_429_past_the_wait_bound_is_the_answer(self):
        self.kube = self.kube + ["--kube-max-wait-ms", "3000"]
        self.restart()
        o = self.load(obj("resourceclaim-from-template-allocated"))
        md = o["metadata"]
        self.cmd("rc-429 %s %s 5 10" % (md["namespace"], md["name"]))  # Retry-After: 10 s
        t = time.monotonic()
        e = self.error(self.prepare(ref(o)))
        self.assertLess(time.monotonic() - t, 8)  # not after the Retry-After
        self.assertIn("getting the claim: HTTP 429: Too many requests", e)
        self.assertEqual(len(self.gets()), 1)


def load_tests(loader, tests, pattern):
    """Only the cases above (the base class's are test_dra_claims.py's)."""
    return unittest.TestSuite(Throttle(n) for n in sorted(vars(Throttle)) if n.startswith("test_"))


if __name__ == "__main__":
    base.PROBE, base.FAKE = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    unittest.main(verbosity=2)
