#!/usr/bin/python3
"""Health scope on MIG (mixed strategy): an Xid attributed to a GPU/compute instance
marks exactly that MIG device; an unattributed Xid on a MIG-enabled GPU marks every MIG
device of that GPU and nothing else; resources a change did not touch get no update."""
import json
import os

import harness

PROFILE = os.path.join(harness.SOURCE, "sim", "profiles", "compat-a100-mixed")  # + ".yaml"
GPU2 = "GPU-c0a7a100-0000-0000-0000-000000000002"


class MigHealth(harness.PluginTestCase):
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

    def test_untouched_resources_not_resent(self):
        """A health change re-sends the list of the resource it changed and of no other
        (the reference sends nothing to the others). Each resource in turn gets an Xid
        on its first device; when its own update arrives, every earlier message on that
        stream has arrived too, so the count since the start is exact: one."""
        self.render(PROFILE)
        listing = self.run_plugin(["--mig-strategy", "mixed", "--sysfs-root", self.sys_root,
                                   "--proc-root", self.proc_root, "list", "--output", "json"])
        self.assertEqual(listing.returncode, 0, listing.stderr)
        resources = {r["resource"]: [d["id"] for d in r["devices"]]
                     for r in json.loads(listing.stdout)["resources"]}
        self.assertGreaterEqual(len(resources), 3, resources)

        self.start_kubelet()
        start = self.kubelet.events.mark()
        self.start_plugin(["--mig-strategy", "mixed"])
        everyone = {i for ids in resources.values() for i in ids}
        self.wait_health(start, lambda h: everyone <= set(h) and all(
            v == "Healthy" for v in h.values()), "every device advertised Healthy")
        mark = self.kubelet.events.mark()

        def lists(resource):
            return [e for e in self.kubelet.events.lines[mark:]
                    if e.get("event") == "devices" and e.get("resource") == resource]

        for name, ids in sorted(resources.items()):
            target = ids[0]
            self.inject("xid %s 48" % target)
            self.kubelet.events.wait_for(
                lambda e, n=name, t=target: e.get("event") == "devices" and e.get("resource") == n and any(
                    d["id"] == t and d["health"] == "Unhealthy" for d in e["devices"]),
                mark, what="%s Unhealthy on %s" % (target, name))
            got = lists(name)
            self.assertEqual(len(got), 1, "%s got %d lists for one change of its own:\n%s" % (
                name, len(got), "\n".join(json.dumps(e["devices"]) for e in got)))


if __name__ == "__main__":
    harness.main()
