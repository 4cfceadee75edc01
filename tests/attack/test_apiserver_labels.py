#!/usr/bin/python3
"""Published labels heal (issue 18 A2) against tests/kube's fake API server (TLS + HTTP/2)
and its NodeFeature store (fake-apiserver/nodefeature.go): the plugin's NodeFeature deleted,
its labels altered, NFD's CRD deleted and installed again: each restored within 60 s (the
time measured is printed); at steady state no request but the watch; a peer flipping the
object every 50 ms gets a bounded number of writes and one warning; a peer that puts the
object back itself before a paced restore costs no request. Default timeouts.

usage: test_apiserver_labels.py <fake-apiserver>"""
import json
import os
import re
import sys
import time

import attacklib  # noqa: F401  (puts the integration harness on the path)
import harness

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
import kubetest as kt  # noqa: E402

FAKE = None
NS, NODE = "gpu-operator", "n1"
NAME = "nvidia-features-for-" + NODE
HEAL_S = 60.0          # the bound: back within 60 s
IDLE_S = 10.0          # steady state watched this long for requests
WRITES = ("POST", "PUT", "PATCH", "DELETE")
# cluster-publish.c's restore bucket: RESTORE_BURST at once, then one per RESTORE_PERIOD_S.
RESTORE_BURST, RESTORE_PERIOD_S = 5, 10.0
PUBLISHED = "Published "
FLAP_WARNING = "keep being deleted or changed by someone else"


class LabelsHeal(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        if not FAKE or not os.path.exists(FAKE):
            self.skipTest("fake API server not built")
        self.render("t4")
        self.srv, self.kubeconfig, _ = kt.fake_apiserver(self, FAKE, {})
        self.cmd("add " + NODE)

    def cmd(self, line, timeout=kt.WAIT):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % re.escape(line.split()[0]), timeout=timeout)

    def start(self):
        self.start_kubelet()
        self.start_plugin(["--kubeconfig", self.kubeconfig, "--node-name", NODE,
                           "--namespace", NS, "--gfd", "--events=false", "-v", "0"],
                          extra_env={"GDP_SYSFS_ROOT": self.sys_root})
        self.kubelet.registered()
        self.plugin.wait_log(PUBLISHED)
        self.want = self.nf()["spec"]["labels"]
        self.assertIn("nvidia.com/gpu.count", self.want)

    def nf(self):
        """The stored NodeFeature (None when absent)."""
        self.srv.send("nf-dump %s %s" % (NS, NAME))
        m = self.srv.expect(r"^nf %s/%s (.*)$" % (NS, NAME))
        self.srv.expect(r"^ok nf-dump$")
        return None if m.group(1) == "absent" else json.loads(m.group(1))

    def requests(self):
        """Every request the server has taken so far, in order (the "ok" of a command comes
        after the "req" lines of the requests it answered before)."""
        self.cmd("bookmark")
        return [l.split()[1:3] for l in self.srv.seen if l.startswith("req ")]

    def writes(self, since):
        return [r for r in self.requests()[since:] if r[0] in WRITES]

    def wait_restored(self, what, timeout=HEAL_S):
        """Seconds until the NodeFeature says self.want again (fails past timeout)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            o = self.nf()
            if o and o.get("spec", {}).get("labels") == self.want:
                took = time.monotonic() - t0
                print("%s: restored in %.2f s" % (what, took))
                return took
            time.sleep(0.2)
        self.fail("%s: not restored within %.0f s; plugin log:\n%s" %
                  (what, timeout, self.plugin.stderr.text()[-3000:]))

    def idle_writes(self, what):
        """No request at all for IDLE_S once nothing changes (the watch stays open)."""
        time.sleep(1.0)
        mark = len(self.requests())
        time.sleep(IDLE_S)
        reqs = self.requests()[mark:]
        print("%s: %d requests in %.0f s of steady state: %s" % (what, len(reqs), IDLE_S, reqs))
        self.assertEqual(reqs, [])

    def test_deleted_is_recreated(self):
        """`kubectl delete nodefeature`: created again (one POST, no other write), then
        quiet."""
        self.start()
        self.idle_writes("after start")
        mark = len(self.requests())
        self.cmd("nf-delete %s %s" % (NS, NAME))
        self.wait_restored("NodeFeature deleted")
        time.sleep(2.0)
        w = self.writes(mark)
        print("writes for one delete: %s" % w)
        self.assertEqual([r[0] for r in w], ["POST"], w)
        self.idle_writes("after the re-creation")

    def test_altered_is_restored(self):
        """Labels changed and one removed by someone else: one PUT puts them back; our own
        write's MODIFIED echo makes no second write."""
        self.start()
        mark = len(self.requests())
        t0 = time.monotonic()
        self.cmd("nf-label %s %s nvidia.com/gpu.count=999" % (NS, NAME))
        self.cmd("nf-label %s %s nvidia.com/gpu.product-" % (NS, NAME))
        self.wait_restored("NodeFeature labels altered")
        time.sleep(2.0)
        w = self.writes(mark)
        print("writes for two alterations in %.2f s: %s" % (time.monotonic() - t0, w))
        self.assertGreaterEqual(len(w), 1)
        self.assertLessEqual(len(w), 2, w)  # one per change seen, at most
        self.assertTrue(all(r[0] == "PUT" for r in w), w)
        self.idle_writes("after the restore")

    def test_flapping_peer_is_bounded(self):
        """A peer rewriting the object every 50 ms for 10 s: restores stay within the
        bucket (not 20 a second), one warning says so; restored once the peer stops."""
        self.start()
        mark = len(self.requests())
        log_mark = self.plugin.stderr.mark()
        flips, period_ms = 200, 50
        t0 = time.monotonic()
        self.cmd("nf-flap %s %s %d %d" % (NS, NAME, period_ms, flips), timeout=60)
        flap_s = time.monotonic() - t0
        during = self.writes(mark)
        bound = RESTORE_BURST + int(flap_s / RESTORE_PERIOD_S) + 1
        self.wait_restored("NodeFeature flapped %d times" % flips)
        warned = self.plugin.stderr.count(lambda l: FLAP_WARNING in l, log_mark)
        print("flapping peer: %d changes in %.1f s; our writes meanwhile %d (bound %d); "
              "warnings %d" % (flips, flap_s, len(during), bound, warned))
        self.assertLessEqual(len(during), bound, during)
        self.assertEqual(warned, 1, self.plugin.stderr.text()[-3000:])
        self.idle_writes("after the peer stopped")

    def test_put_back_by_the_peer(self):
        """The bucket's burst spent, a change is restored only later; the peer puts the
        labels back itself meanwhile: the paced restore has nothing left to do, so not one
        request follows (it used to GET up to 10 s later, in a steady state)."""
        self.start()
        key = "nvidia.com/gpu.count"
        for i in range(RESTORE_BURST):
            self.cmd("nf-label %s %s %s=%d" % (NS, NAME, key, 900 + i))
            self.wait_restored("change %d of %d" % (i + 1, RESTORE_BURST))
        mark = len(self.requests())
        self.cmd("nf-label %s %s %s=999" % (NS, NAME, key))
        time.sleep(1.0)
        self.assertEqual(self.nf()["spec"]["labels"][key], "999", "restored at once: burst?")
        self.cmd("nf-label %s %s %s=%s" % (NS, NAME, key, self.want[key]))
        time.sleep(RESTORE_PERIOD_S + 1.0)
        reqs = self.requests()[mark:]
        print("after the peer put it back: %d requests in %.0f s: %s" %
              (len(reqs), RESTORE_PERIOD_S + 2.0, reqs))
        self.assertEqual(reqs, [])
        self.assertEqual(self.nf()["spec"]["labels"], self.want)

    def test_crd_reinstalled(self):
        """NFD's CRD deleted (the object with it, the API 404) for 20 s, then installed
        again: the object is back within 60 s; the outage is one warning line of the
        delivery and the watch's two (its watch, then its list, 404), not one per retry."""
        self.start()
        time.sleep(2.0)  # the watch open a while: its end is a resume, not "ended at once"
        log_mark = self.plugin.stderr.mark()
        self.cmd("nf-crd off")
        time.sleep(20.0)
        warnings = [l for l in self.plugin.stderr.lines[log_mark:] if l.startswith("W")]
        self.assertIsNone(self.nf())
        mark = len(self.requests())
        self.cmd("nf-crd on")
        self.wait_restored("NodeFeature CRD re-installed after 20 s")
        # The watch, at the end of its backoff (at most 30 s), lists and watches again.
        t0 = time.monotonic()
        while not any(r[0] == "GET" and "watch=1" in r[1] for r in self.requests()[mark:]):
            self.assertLess(time.monotonic() - t0, HEAL_S, self.requests()[mark:])
            time.sleep(0.5)
        print("warning lines during the 20 s outage: %d: %s" % (len(warnings), warnings))
        self.assertGreaterEqual(len(warnings), 1)
        self.assertLessEqual(len(warnings), 3, warnings)
        self.idle_writes("after the CRD came back")


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        FAKE = sys.argv.pop(1)
    harness.main()
