#!/usr/bin/python3
"""DynamicMIG and a vGPU guest (as test_dra_mig.py runs the real binary): on
sim/profiles/dynamic/h100-vgpu-guest.yaml, GPU 1 answers nvmlDeviceGetVirtualizationMode
with VGPU. As NVIDIA's driver does (dynamic-mig-mps-capacity.md §1.2), the plugin says
"vGPU guest detected — skipping DynamicMIG" once for it and publishes it plain: the full
GPU with capacity memory only, no consumesCounters, no placement, no counter set. GPU 0
is carved as usual. A claim for the guest's GPU is prepared whole, with nothing carved on
it, beside a MIG device made on GPU 0.

usage: test_dra_mig_vgpu.py <fake-apiserver>"""
import sys
import unittest

import test_dra_mig as mig
from test_dra_mig import NODE, UP_TO_DATE, harness
from dra_kubelet import ref

GUEST = "GPU-0d100009-0000-4000-8000-000000000001"
SKIP = "vGPU guest detected — skipping DynamicMIG"


class DraMigVgpu(mig.DraMig):
    def test_vgpu_guest_published_plain(self):
        self.host("h100-vgpu-guest")
        self.start_dra()
        self.assertEqual(self.plugin.stderr.count(lambda x: SKIP in x), 1)
        self.assertEqual(self.plugin.stderr.count(lambda x: "GPU 1 (%s): %s" % (GUEST, SKIP) in x), 1)

        slices = self.slices()
        self.assertEqual(len(slices), 3, sorted(slices))  # the counters, then a slice per GPU
        for s in slices.values():
            self.assertEqual(s["spec"]["pool"]["resourceSliceCount"], 3)
            self.assertEqual(s["spec"]["nodeName"], NODE)
        sets = [c["name"] for s in slices.values() for c in s["spec"].get("sharedCounters") or []]
        self.assertEqual(sets, ["gpu-0-counter-set"])
        devs = {d["name"]: d for s in slices.values() for d in s["spec"].get("devices") or []}
        self.assertEqual(len(devs), 26 + 1, sorted(devs))
        self.assertEqual([n for n in devs if n.startswith("gpu-1")], ["gpu-1"])
        guest = devs["gpu-1"]
        self.assertEqual(guest["attributes"]["uuid"], {"string": GUEST})
        self.assertEqual(guest["attributes"]["type"], {"string": "gpu"})
        self.assertNotIn("consumesCounters", guest)
        self.assertEqual(list(guest["capacity"]), ["memory"])
        self.assertEqual(devs["gpu-0"]["consumesCounters"][0]["counterSet"], "gpu-0-counter-set")
        self.assertTrue(all(d["consumesCounters"][0]["counterSet"] == "gpu-0-counter-set"
                            for n, d in devs.items() if "-mig-" in n))

        pool = self.pool()
        self.assertIsNone(pool.allocate(['profile == "1g.10gb" && parentUUID == "%s"' % GUEST]))
        self.kl.register()
        whole = self.claim(*pool.allocate(['type == "gpu" && uuid == "%s"' % GUEST]))
        self.assertEqual(whole["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-1")
        self.prepare_ok(whole)
        part = self.claim(*pool.allocate(['profile == "1g.10gb"'], ["gpu-1"]))
        res = self.prepare_ok(part)
        state = self.nvml()
        self.assertEqual(state[1], {"mode": 0, "migs": []})  # the guest: never carved
        self.assertEqual(len(state[0]["migs"]), 1)
        self.assertMigPrepared(res, part, self.live(0), gpu=0)
        for o in (part, whole):
            self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}] * 2)
        self.plugin.wait_log(UP_TO_DATE)
        # nothing else logged for the guest after the first discovery
        self.assertEqual(self.plugin.stderr.count(lambda x: SKIP in x), 1)


def load_tests(loader, tests, pattern):
    """Only the cases above (the base class's are test_dra_mig.py's)."""
    return unittest.TestSuite(DraMigVgpu(n) for n in sorted(vars(DraMigVgpu)) if n.startswith("test_"))


if __name__ == "__main__":
    mig.FAKE = sys.argv.pop(1)
    harness.main()
