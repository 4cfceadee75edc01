#!/usr/bin/python3
"""What a person running DRA sees (issue 30): the real binary with `--dra` and
`--metrics-address`, against the fake API server and the kubelet stand-ins of
tests/dra/test_dra_serve.py (whose setup this file reuses, not its tests).

- /readyz: 503 until the DRA driver is registered with the kubelet and its ResourceSlices
  are published, the body saying which is missing; 200 after; 503 again while a kubelet
  restart's new registration is pending, and while a deleted slice waits for its paced
  restore. With a split (--dra-device-plugin-gpus) the
  device-plugin side must be registered too.
- The DRA series (docs/metrics.md), parsed by python3-prometheus-client: claims prepared
  and failed, the call histogram, unprepares, slice writes and a refused one, the claims
  prepared now.
- A failed claim is one warning naming namespace/name, UID and cause, once per failed
  claim, rate-limited (core/ratelimit) under a flood.
Threads and fds are counted before and after.

usage: test_dra_metrics.py <fake-apiserver>"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "dra"))
import test_dra_serve  # noqa: E402
from test_dra_serve import DraServe  # noqa: E402
from dra_kubelet import DRIVER, NODE, obj, on_node, ref  # noqa: E402
import attacklib  # noqa: E402  (test_dra_serve put tests/attack on the path)
from metricsclient import get, logged_port, scrape  # noqa: E402

P = "gpu_device_plugin_"
ADDR = ["--metrics-address", "127.0.0.1:0"]
NOT_REGISTERED = "DRA driver %s is not registered with the kubelet yet" % DRIVER
NOT_PUBLISHED = "the ResourceSlices of DRA driver %s are not published yet" % DRIVER
KUBELET_DEADLINE = "until the kubelet's deadline for the call was near"
RESTORING = ("a ResourceSlice of DRA driver %s was deleted or changed by someone else and is "
             "not restored yet (restores are paced)" % DRIVER)
# src/dra/dra-service.h: DRA_CLAIM_LOG_INTERVAL_MS, DRA_CLAIM_LOG_BURST
CLAIM_LOG_WINDOW_S, CLAIM_LOG_BURST = 60.0, 20


class DraMetrics(DraServe):
    """DraServe's fake API server, kubelet stand-in and helpers; only the tests below."""

    def readyz(self):
        status, _, body = get(self.port, "/readyz")
        return status, body

    def wait_ready(self, timeout=3 * harness.TIMEOUT):
        """Polls /readyz until 200: a slice write refused earlier is retried with backoff
        (1 s, 2 s, ...), so the bound is generous; it is a bound, not a measurement."""
        end = time.monotonic() + timeout
        while True:
            status, body = self.readyz()
            if status == 200:
                return body
            if time.monotonic() > end:
                raise AssertionError("/readyz never 200, last: %d %r\n%s" % (
                    status, body, self.failure_context()))
            time.sleep(0.05)

    def start_metrics(self, extra=()):
        p = self.start_plugin(self.dra_args() + ADDR + list(extra),
                              extra_env=test_dra_serve.FAST_HEALTH)
        self.port = logged_port(p)
        return p

    def failed_lines(self, needle):
        """Warnings and errors of the plugin that contain needle."""
        return [line for line in self.plugin.stderr.text().splitlines()
                if line[:1] in ("W", "E") and needle in line]

    # ---------------------------------------------------------------------------------

    def test_readyz_dra_only(self):
        """Not ready until registered and published; ready after; a kubelet restart
        (its registration socket gone) is not ready until the kubelet registers again."""
        self.cmd("rs-fail 1000 500")  # every slice write refused until told otherwise
        p = self.start_metrics()
        p.wait_log("Publishing ResourceSlices failed")
        before = attacklib.Snapshot(p.pid)
        status, body = self.readyz()
        self.assertEqual(status, 503, body)
        self.assertNotIn("no resources to advertise", body)
        self.assertIn(NOT_REGISTERED, body)
        self.assertIn(self.kl.reg_path, body)
        self.assertIn(NOT_PUBLISHED + ": HTTP 500: injected failure", body)

        self.kl.register()
        status, body = self.readyz()
        self.assertEqual(status, 503, body)
        self.assertNotIn(NOT_REGISTERED, body)
        self.assertIn(NOT_PUBLISHED, body)

        self.cmd("rs-fail 0 500")
        self.assertEqual(self.wait_ready(), "ok\n")
        s = scrape(self.port)
        failures = s.value(P + "dra_slice_write_failures_total")
        self.assertGreaterEqual(failures, 1.0)
        self.assertEqual(s.value(P + "dra_slice_writes_total"), failures + 1)

        # The kubelet "restarts": the plugin binds its registration socket again and is
        # not registered until the kubelet's new GetInfo / NotifyRegistrationStatus.
        log = p.stderr.mark()
        os.unlink(self.kl.reg_path)
        self.kl.wait_socket()
        p.wait_log("the kubelet registers us anew", log)
        status, body = self.readyz()
        self.assertEqual((status, body.splitlines()), (503, [
            "%s (it registers through %s)" % (NOT_REGISTERED, self.kl.reg_path)]))
        self.kl.close()
        self.kl.register()
        self.assertEqual(self.readyz(), (200, "ok\n"))
        self.kl.close()
        attacklib.assert_flat(self, before, attacklib.settled(p.pid, before), what="/readyz")

    def test_readyz_not_ready_while_a_deleted_slice_awaits_its_restore(self):
        """Restores are paced (core/heal.h: 5 at once, then one per 10 s): a slice deleted
        a sixth time waits seconds for its restore, and /readyz says so all that while
        (it said 200 then: the last round had converged)."""
        p = self.start_metrics()
        self.kl.register()
        self.assertEqual(self.wait_ready(), "ok\n")
        for _ in range(5):  # the burst: each restored at once
            self.cmd("rs-delete all")
            self.wait_slice(lambda d: len(d) == 8, "8 devices again")
        self.assertEqual(self.wait_ready(), "ok\n")
        self.cmd("rs-delete all")
        p.wait_log("restoring them at most once every 10s")
        t0 = time.monotonic()
        seen = set()
        while not self.slices() and time.monotonic() < t0 + 30:
            seen.add(self.readyz())
            time.sleep(0.05)
        waited = time.monotonic() - t0
        self.assertGreater(waited, 2.0, "restored at once: not paced")
        self.assertEqual({status for status, _ in seen}, {503}, seen)
        self.assertIn((503, RESTORING + "\n"), seen)
        self.assertEqual(self.wait_ready(), "ok\n")

    def test_prepare_waits_for_the_api_until_the_kubelets_deadline_only(self):
        """The claims' GETs wait in the API client's rate limit (here 1 a second) until just
        before the kubelet's deadline (its grpc-timeout, 3 s), not the client's own 120 s
        bound: the claims whose GETs never left fail naming that deadline in the answer
        the kubelet still waits for, each logged once (issue 30 row 3)."""
        p = self.start_metrics(["--kube-api-qps=1", "--kube-api-burst=1"])
        self.kl.register()
        self.wait_ready()
        time.sleep(1.5)  # the bucket's one token back
        refs = [("default", "absent-%d" % i, "u-absent-%d" % i) for i in range(6)]
        t = time.monotonic()
        res = self.kl.prepare(*refs, timeout=3)
        took = time.monotonic() - t
        errs = [res[uid]["error"] for _, _, uid in refs]
        self.assertLess(took, 3.0, errs)
        found = [e for e in errs if "claim not found in the API server" in e]
        late = [e for e in errs if KUBELET_DEADLINE in e]
        self.assertEqual(len(found) + len(late), 6, errs)
        self.assertGreaterEqual(len(found), 1, errs)
        self.assertGreaterEqual(len(late), 1, errs)
        p.wait_log(KUBELET_DEADLINE)

    def test_readyz_split_needs_both_sides(self):
        """--dra-device-plugin-gpus: the device-plugin resource must be registered too.
        The plugin starts before either kubelet stand-in is there."""
        p = self.start_metrics(["--dra-device-plugin-gpus", "0,1"])
        p.wait_log("ResourceSlices of node %s are up to date" % NODE)
        status, body = self.readyz()
        self.assertEqual(status, 503, body)
        self.assertIn("'nvidia.com/gpu' is not registered with the kubelet", body)
        self.assertIn(NOT_REGISTERED, body)
        self.assertNotIn(NOT_PUBLISHED, body)

        self.start_kubelet()
        self.kubelet.registered()
        end = time.monotonic() + harness.TIMEOUT
        while "nvidia.com/gpu" in self.readyz()[1] and time.monotonic() < end:
            time.sleep(0.05)  # the accepted registration reaches the plugin's loop
        self.assertEqual(self.readyz(), (503, "%s (it registers through %s)\n" % (
            NOT_REGISTERED, self.kl.reg_path)))
        self.kl.register()
        self.assertEqual(self.readyz(), (200, "ok\n"))

    def test_prepare_metrics_and_failed_claim_log(self):
        self.cmd("rs-fail 1 500")  # the first slice write is refused, its retry works
        p = self.start_metrics()
        p.wait_log("ResourceSlices of node %s are up to date" % NODE)
        s = scrape(self.port)
        for name, kind in (("dra_prepare", "counter"), ("dra_prepare_errors", "counter"),
                           ("dra_prepare_duration_seconds", "histogram"),
                           ("dra_unprepare", "counter"), ("dra_slice_writes", "counter"),
                           ("dra_slice_write_failures", "counter"),
                           ("dra_claims_prepared", "gauge")):
            self.assertEqual(s.families[P + name].type, kind, name)
            self.assertIn("# HELP %s%s%s " % (P, name, "_total" if kind == "counter" else ""),
                          s.text)
        self.assertEqual(s.value(P + "dra_slice_writes_total"), 2.0)  # POST refused, POST
        self.assertEqual(s.value(P + "dra_slice_write_failures_total"), 1.0)
        self.assertEqual(s.value(P + "dra_prepare_total"), 0.0)
        self.assertEqual(s.value(P + "dra_prepare_duration_seconds_count"), 0.0)
        self.assertEqual(s.value(P + "dra_claims_prepared"), 0.0)

        self.kl.register()
        before = attacklib.Snapshot(p.pid)
        t0 = time.monotonic()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        two = self.load(on_node(obj("resourceclaim-two-gpus-allocated")))
        missing = ("default", "missing", "aaaaaaaa-0000-0000-0000-000000000004")
        res = self.kl.prepare(ref(one), ref(two))
        self.assertEqual([r["error"] for r in res.values()], ["", ""], res)
        self.assertIn("claim not found", self.kl.prepare(missing)[missing[2]]["error"])
        s = scrape(self.port)
        self.assertEqual(s.value(P + "dra_prepare_total"), 3.0)
        self.assertEqual(s.value(P + "dra_prepare_errors_total"), 1.0)
        self.assertEqual(s.value(P + "dra_prepare_duration_seconds_count"), 2.0)  # calls
        self.assertEqual(s.value(P + "dra_prepare_duration_seconds_bucket", le="+Inf"), 2.0)
        self.assertGreater(s.value(P + "dra_prepare_duration_seconds_sum"), 0.0)
        self.assertEqual(s.value(P + "dra_claims_prepared"), 2.0)
        self.assertEqual(s.value(P + "dra_slice_writes_total"), 2.0)  # claims write no slice

        # The failed claim: one warning with namespace/name, UID and cause.
        lines = self.failed_lines(missing[2])
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("NodePrepareResources of claim default/missing (UID %s) failed: " % missing[2],
                      lines[0])
        self.assertIn("claim not found in the API server", lines[0])

        self.assertEqual(self.kl.unprepare(ref(one), ref(two)),
                         {one["metadata"]["uid"]: "", two["metadata"]["uid"]: ""})
        s = scrape(self.port)
        self.assertEqual(s.value(P + "dra_unprepare_total"), 2.0)
        self.assertEqual(s.value(P + "dra_unprepare_errors_total"), 0.0)
        self.assertEqual(s.value(P + "dra_claims_prepared"), 0.0)

        # A flood of claims refused by the request's checks (names longer than any
        # Kubernetes name): every one counted, the lines rate-limited.
        flood = [("default", "n" * 300, "bbbbbbbb-0000-0000-0000-%012d" % i) for i in range(100)]
        res = self.kl.prepare(*flood)
        self.assertTrue(all(r["error"] for r in res.values()), res)
        elapsed = time.monotonic() - t0
        s = scrape(self.port)
        self.assertEqual(s.value(P + "dra_prepare_total"), 103.0)
        self.assertEqual(s.value(P + "dra_prepare_errors_total"), 101.0)
        self.assertEqual(s.value(P + "dra_prepare_duration_seconds_count"), 3.0)
        lines = self.failed_lines("NodePrepareResources of claim ")
        windows = 1 + int(elapsed // CLAIM_LOG_WINDOW_S) + 1  # a window may straddle t0
        self.assertGreaterEqual(len(lines), CLAIM_LOG_BURST, lines)
        self.assertLessEqual(len(lines), CLAIM_LOG_BURST * windows, lines[-3:])
        for c in flood[:CLAIM_LOG_BURST - 1]:
            self.assertEqual(len(self.failed_lines(c[2])), 1, c[2])
        self.kl.close()
        attacklib.assert_flat(self, before, attacklib.settled(p.pid, before), what="prepares")

    def test_metrics_off_dra_still_serves(self):
        """Without --metrics-address nothing listens and claims prepare as before."""
        p = self.start_dra()
        self.kl.register()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        self.assertEqual(self.kl.prepare(ref(one))[one["metadata"]["uid"]]["error"], "")
        self.assertEqual(p.stderr.count(lambda line: "Serving metrics" in line), 0)


def load_tests(loader, tests, pattern):
    """Only this file's tests: DraServe's own run in dra-serve."""
    names = sorted(n for n in DraMetrics.__dict__ if n.startswith("test_"))
    return unittest.TestSuite(DraMetrics(n) for n in names)


if __name__ == "__main__":
    test_dra_serve.FAKE = sys.argv.pop(1)
    harness.main()
