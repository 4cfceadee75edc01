#!/usr/bin/python3
"""Events survive outages (issue 18 A3): tests/kube's fake API server (TLS + HTTP/2)
stores Events and fails them on command. A GPU that fails (Xid 48) while the API server
is gone, while RBAC forbids Events, or while every connection is dropped, has its
GPUUnhealthy Event stored afterwards. Default timeouts and retry policy; the figures
measured are printed.

The outage lasts the issue's 60 s: past the retry backoff's 30 s cap, so the Event has
waited at the cap at least once. The bound of the queue (10,000 Events while down) is
cluster-unit's: the plugin itself cannot raise that many (the spam filter lets 25 through,
then one per 5 minutes).

usage: test_apiserver_events.py <fake-apiserver>"""
import os
import sys
import time

import attacklib  # noqa: F401  (puts the integration harness on the path)
import harness  # noqa: E402
from harness import RESOURCE  # noqa: E402

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
import kubetest as kt  # noqa: E402

FAKE = None
OUTAGE_S = 60        # the figure
RBAC_GAP_S = 20
# After the server is back: the retry backoff's cap (30 s) and the API client's
# reconnect, with a margin for a busy machine.
DELIVERY_S = 60


class EventsSurviveOutages(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        if not FAKE or not os.path.exists(FAKE):
            self.skipTest("fake API server not built")
        self.render("t4")
        self.uuids = [g["uuid"] for g in harness.load_profile("t4")]
        self.srv, self.kubeconfig, self.configs = kt.fake_apiserver(
            self, FAKE, {"default": "version: v1\n"})
        self.cmd("add n1")
        self.start_kubelet()
        self.start_plugin(["--kubeconfig", self.kubeconfig, "--node-name", "n1",
                           "--config-dir", self.configs, "--events=true", "-v", "0"],
                          extra_env={"GDP_SYSFS_ROOT": self.sys_root})
        self.kubelet.registered()
        # Events work: the config applied at start is stored.
        self.wait_event(lambda e: e["reason"] == "ConfigApplied", kt.WAIT)

    def cmd(self, line, timeout=kt.WAIT):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0], timeout=timeout)

    def stored(self):
        """The Events the fake API server holds."""
        self.srv.send("events")
        out = []
        while True:
            m = self.srv.expect(r"^(ok events|event (\S+) (\S+) (\S+) (\d+) (.*))$")
            if m.group(1) == "ok events":
                return out
            out.append({"name": m.group(2), "type": m.group(3), "reason": m.group(4),
                        "count": int(m.group(5)), "message": m.group(6)})

    def wait_event(self, pred, timeout):
        end = time.monotonic() + timeout
        while True:
            hits = [e for e in self.stored() if pred(e)]
            if hits:
                return hits
            if time.monotonic() > end:
                raise AssertionError("no such Event in %.0f s; stored: %s; plugin: %s" %
                                     (timeout, self.stored(),
                                      self.plugin.stderr.text()[-3000:]))
            time.sleep(0.5)

    def unhealthy(self, gpu):
        return lambda e: (e["reason"] == "GPUUnhealthy" and e["type"] == "Warning" and
                          self.uuids[gpu] in e["message"] and "Xid 48" in e["message"])

    def xid_while(self, gpu, fault_s, begin, end):
        """Xid 48 on `gpu` while the fault (begin/end commands) lasts fault_s: the
        GPUUnhealthy Event is not stored during it, and is after. Returns the seconds
        from the end of the fault to the Event."""
        mark = self.plugin.stderr.mark()
        self.cmd(begin)
        t0 = time.monotonic()
        self.inject("xid %s 48" % self.uuids[gpu])
        self.plugin.wait_log("is Unhealthy", mark)
        time.sleep(max(0.0, fault_s - (time.monotonic() - t0)))
        self.cmd(end)
        t1 = time.monotonic()
        self.assertEqual([e for e in self.stored() if self.unhealthy(gpu)(e)], [],
                         "stored during the fault?")
        hits = self.wait_event(self.unhealthy(gpu), DELIVERY_S)
        took = time.monotonic() - t1
        self.assertEqual(len(hits), 1, hits)
        self.assertTrue(self.plugin.alive())
        dropped = self.plugin.stderr.count(lambda l: "dropped" in l and "Event" in l, mark)
        self.assertEqual(dropped, 0, self.plugin.stderr.text()[-3000:])
        return took, hits[0]

    def test_xid_during_outage(self):
        """The API server's listener closed for 60 s (every connection with it)."""
        took, ev = self.xid_while(1, OUTAGE_S, "stop", "start")
        print("Xid 48 during a %d s API outage: GPUUnhealthy stored %.1f s after the "
              "server came back (%s)" % (OUTAGE_S, took, ev["name"]))
        # The device plugin served throughout.
        self.kubelet.call({"cmd": "wait-devices", "resource": RESOURCE, "count": 0})

    def test_xid_during_rbac_gap(self):
        """Every Event request answered 403 for 20 s (RBAC granted late or revoked)."""
        mark = self.plugin.stderr.mark()
        took, ev = self.xid_while(2, RBAC_GAP_S, "events-fail 403", "events-fail off")
        said = self.plugin.stderr.count(lambda l: "forbidden" in l.lower(), mark)
        print("Xid 48 during a %d s RBAC gap: GPUUnhealthy stored %.1f s after it ended; "
              "lines naming the 403: %d" % (RBAC_GAP_S, took, said))
        self.assertLessEqual(said, 1, self.plugin.stderr.text()[-3000:])

    def test_xid_while_connections_drop(self):
        """Every Event request unanswered, its connection closed, for 20 s."""
        took, _ = self.xid_while(3, RBAC_GAP_S, "events-fail drop", "events-fail off")
        print("Xid 48 while every Event request's connection is dropped for %d s: "
              "GPUUnhealthy stored %.1f s after" % (RBAC_GAP_S, took))


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        FAKE = sys.argv.pop(1)
    harness.main()
