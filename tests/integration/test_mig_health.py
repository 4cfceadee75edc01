#!/usr/bin/python3
"""Health scope on MIG (mixed strategy): an Xid attributed to a GPU/compute instance
marks exactly that MIG device; an unattributed Xid on a MIG-enabled GPU marks every MIG
device of that GPU and nothing else."""
import json
import os

import harness

PROFILE = os.path.join(harness.SOURCE, "sim", "profiles", "compat-a100-mixed")  # + ".yaml"
GPU2 = "GPU-c0a7a100-0000-0000-0000-000000000002"


class MigHealth(harness.PluginTestCase):
    def health_by_id(self, start):
        """Latest {id: health} over every resource, from the events since start."""
        latest = {}
        for e in self.kubelet.events.lines[start:]:
            if e.get("event") == "devices":
                latest[e["resource"]] = {d["id"]: d["health"] for d in e["devices"]}
        return {i: h for devs in latest.values() for i, h in devs.items()}

    def wait_health(self, start, pred, what):
        def match(_e):
            return pred(self.health_by_id(start))
        self.kubelet.events.wait_for(match, start, what=what)
        return self.health_by_id(start)

    def test_attribution(self):
        self.render(PROFILE)
        listing = self.run_plugin(["--mig-strategy", "mixed", "--sysfs-root", self.sys_root,
                                   "--proc-root", self.proc_root, "list", "--output", "json"])
        self.assertEqual(listing.returncode, 0, listing.stderr)
        devices = [d for r in json.loads(listing.stdout)["resources"] for d in r["devices"]]
        migs_gpu2 = [d["uuid"] for d in devices if d["gpu"] == GPU2]
        others = [d["uuid"] for d in devices if d["gpu"] != GPU2]
        self.assertEqual(len(migs_gpu2), 4, devices)   # 4g.20gb + 3 x 1g.5gb
        self.assertTrue(all(u.startswith("MIG-") for u in migs_gpu2))
        one_g = [d["uuid"] for d in devices if d["gpu"] == GPU2 and d.get("migProfile") == "1g.5gb"]
        self.assertEqual(len(one_g), 3, devices)

        self.start_kubelet()
        start = self.kubelet.events.mark()
        self.start_plugin(["--mig-strategy", "mixed"])
        everyone = set(migs_gpu2) | set(others)
        self.wait_health(start, lambda h: everyone <= set(h) and all(
            v == "Healthy" for v in h.values()), "every device advertised Healthy")

        # Attributed: the simulator attributes an Xid on a MIG UUID to its GI/CI.
        target = one_g[1]
        self.inject("xid %s 48" % target)
        h = self.wait_health(start, lambda h: h.get(target) == "Unhealthy", "%s Unhealthy" % target)
        self.assertEqual({u for u, v in h.items() if v == "Unhealthy"}, {target}, h)

        # Unattributed, on the MIG-enabled parent: all of its MIG devices, nothing else.
        self.inject("xid %s 48" % GPU2)
        h = self.wait_health(start, lambda h: all(h.get(u) == "Unhealthy" for u in migs_gpu2),
                             "every MIG device of %s Unhealthy" % GPU2)
        self.assertTrue(all(h[u] == "Healthy" for u in others), h)


if __name__ == "__main__":
    harness.main()
