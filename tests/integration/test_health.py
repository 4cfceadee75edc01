#!/usr/bin/python3
"""Xid events injected through the simulator reach ListAndWatch."""
import harness
from harness import RESOURCE


class Xid(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.start_all("a100")
        self.uuids = [g["uuid"] for g in harness.load_profile("a100")]

    def wait_unhealthy(self, uuid, start):
        def pred(e):
            return (e.get("event") == "devices" and e.get("resource") == RESOURCE and
                    any(d["id"] == uuid and d["health"] == "Unhealthy" for d in e["devices"]))
        return self.kubelet.events.wait_for(pred, start, what="%s Unhealthy" % uuid)[1]

    def test_critical_xid_marks_unhealthy(self):
        start = self.kubelet.events.mark()
        self.inject("xid %s 48" % self.uuids[2])
        ev = self.wait_unhealthy(self.uuids[2], start)
        health = {d["id"]: d["health"] for d in ev["devices"]}
        self.assertEqual(len(health), 8)
        for u in self.uuids:
            self.assertEqual(health[u], "Unhealthy" if u == self.uuids[2] else "Healthy", u)
        # Still allocatable as far as the plugin is concerned, and still serving.
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE, "containers": [[self.uuids[0]]]})
        self.assertNotIn("error", r, r)

    def test_ignored_xids_do_not(self):
        start = self.kubelet.events.mark()
        # The ignored ones go first, on other GPUs; once the critical one (sent last)
        # shows up, the plugin has seen all of them.
        for i, code in enumerate((13, 31, 43, 45, 68, 109)):
            self.inject("xid %s %d" % (self.uuids[i], code))
        self.inject("xid %s 48" % self.uuids[7])
        ev = self.wait_unhealthy(self.uuids[7], start)
        health = {d["id"]: d["health"] for d in ev["devices"]}
        for u in self.uuids[:7]:
            self.assertEqual(health[u], "Healthy", "%s went Unhealthy on an ignored Xid" % u)
        # No list in between marked any of them either.
        for e in self.kubelet.events.lines[start:]:
            if e.get("event") == "devices":
                for d in e["devices"]:
                    if d["id"] in self.uuids[:7]:
                        self.assertEqual(d["health"], "Healthy", e)


if __name__ == "__main__":
    harness.main()
