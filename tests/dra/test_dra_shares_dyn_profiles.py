#!/usr/bin/python3
"""Shares of DynamicMIG placements on every other MIG-capable simulator profile (issue 32 on
issue 31), on test_dra_shares_dyn.py's fixture (the real binary with DynamicMIG and
--dra-consumable-capacity, the MPS runner and its stand-in, the fake API server at 1.36.3,
NVML's MIG state read by another process): A100 80GB, A30, H200 and B200 (2 GPUs each,
MIG mode as the profile has it). For every MIG profile of gpu-1 (the second GPU, so that
minors and UUIDs are not gpu-0's), the scheduler stand-in places two 1Gi
shares of it on one placement; both prepared: exactly one MIG device of that GPU instance
profile at that placement's start, named by both records with its daemon
(`share-<16 hex of its UUID's SHA-256>`, CUDA_VISIBLE_DEVICES that UUID); both unprepared:
no MIG device, no daemon, MIG mode back as the GPU had it (off on Hopper and Blackwell,
on for Ampere). The slices pass the fake API server's 1.36 rules at the start.

SharedPlacementXid (the H100): an Xid on the MIG device two shares of a 3g.40gb hold taints
exactly that placement, once, and recovery clears it; the MIG device and daemon stay.

usage: test_dra_shares_dyn_profiles.py <fake-apiserver>"""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_dra_mig as mig  # noqa: E402
import test_dra_shares as shares  # noqa: E402
import test_dra_shares_dyn as dyn  # noqa: E402
from dra_kubelet import HEALTHY, NODE, UNHEALTHY, Kubelet, ref  # noqa: E402
from dra_scheduler import Pool  # noqa: E402

GPU = 1


class Profiles(dyn.DraSharesDyn):
    PROFILE = None  # each subclass's
    test_slice = test_two_claims_share_one_mig_device = test_forged_shares_refused = None
    test_restart_with_two_shares = test_step_above_small_placements = None

    def setUp(self):
        super().setUp()
        with open(self.PROFILE) as f:
            self.uuids = re.findall(r"uuid: (GPU-[0-9a-f-]+)", f.read())

    def test_every_profile_shared(self):
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        prefix = "gpu-%d-mig-" % GPU
        profiles = sorted({d["attributes"]["profile"]["string"] for d in pool.devices
                           if d["name"].startswith(prefix)})
        self.assertTrue(profiles, "no placement of gpu-%d" % GPU)
        mode0 = self.nvml()[GPU]["mode"]
        blocks = 0
        for p in profiles:
            def pick(d, p=p):
                return d["name"].startswith(prefix) and d["attributes"]["profile"]["string"] == p
            alloc, claims = [], []
            for _ in range(2):
                r = pool.allocate_results([(pick, {"memory": "1Gi"})], alloc)
                self.assertIsNotNone(r, (p, alloc))
                alloc += r
                claims.append(self.claim(r, [{"memory": "1Gi"}]))
            dev = alloc[0]["device"]
            self.assertEqual([r["device"] for r in alloc], [dev, dev], p)
            self.assertTrue(pool.by_name[dev]["allowMultipleAllocations"])
            for o in claims:
                res = self.kl.prepare(ref(o), share_id=True)
                self.assertEqual(res[o["metadata"]["uid"]]["error"], "", (p, res))
            gid, start = (int(x) for x in dev.rsplit("-", 2)[1:])
            gpu = self.nvml()[GPU]
            self.assertEqual(gpu["mode"], 1, p)
            self.assertEqual([(m["profileId"], m["start"]) for m in gpu["migs"]], [(gid, start)], p)
            m = gpu["migs"][0]
            for o in claims:
                (d,) = self.records(o)
                self.assertEqual(d["mig"], {"parentUUID": self.uuids[GPU], "migUUID": m["uuid"],
                                            "giId": m["gi"], "ciId": m["ci"]}, p)
                self.assertEqual(d["mpsId"], dyn.mps_id(m["uuid"]), p)
            blocks += 1
            self.assertEqual(len(shares.mps_blocks(self.mps_log)), blocks, p)
            self.assertIn("env CUDA_VISIBLE_DEVICES=" + m["uuid"], shares.mps_blocks(self.mps_log)[-1])
            self.daemon_of(m["uuid"])
            self.assertTrue(self.daemon_up(), p)
            for o in claims:
                self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""}, p)
            blocks += 1
            self.assertDaemonGone(blocks)
            self.assertEqual(self.nvml()[GPU], {"mode": mode0, "migs": []}, p)
            print("%s: %s (memory %s) shared twice on one MIG device, then gone" % (
                os.path.basename(self.PROFILE), dev, pool.by_name[dev]["capacity"]["memory"]["value"]))
        self.assertEqual(self.checkpoint(), {})
        self.assertEqual(os.listdir(self.cdi), [])


class SharedPlacementXid(dyn.DraSharesDyn):
    """An Xid NVML attributes to the MIG device two shares hold: exactly their placement is
    UNHEALTHY and tainted, once, and recovery clears it; the shares' MIG device and daemon
    stay. The runner reads a control FIFO of its own (the simulator's has one reader per
    process that loads it, and the runner loads it too)."""
    test_slice = test_two_claims_share_one_mig_device = test_forged_shares_refused = None
    test_restart_with_two_shares = test_step_above_small_placements = None

    def runner_env(self):
        return dict(self.nvml_env(), MOCK_NVML_CONTROL=os.path.join(self.tmp, "runner.ctl"))

    def nvml_env(self):
        return dict(super().nvml_env(), **mig.FAST_HEALTH)

    def test_xid_on_a_shared_placement(self):
        self.cmd("rs-taints on")
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        alloc = []
        claims = [self.share(pool, alloc, {"memory": "8Gi"}) for _ in range(2)]
        for o in claims:
            self.assertEqual(self.kl.prepare(ref(o))[o["metadata"]["uid"]]["error"], "")
        (m,) = self.live().values()
        w = self.kl.watch_health()
        Kubelet.wait_health(w, lambda h: len(h) == 26 and set(h.values()) == {HEALTHY}, "26 healthy")
        start = len(w["msgs"])
        self.inject("xid %s 94" % m["uuid"])
        h = Kubelet.wait_health(w, lambda h: h.get((NODE, dyn.THREE)) == UNHEALTHY,
                                dyn.THREE + " UNHEALTHY", start)
        self.assertEqual({k: v for k, v in h.items() if v != HEALTHY}, {(NODE, dyn.THREE): UNHEALTHY})
        deadline = time.monotonic() + harness.TIMEOUT
        while True:
            devs = {d["name"]: d for sl in self.slices().values() for d in sl["spec"].get("devices") or []}
            if "taints" in devs.get(dyn.THREE, {}) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual([(t["key"], t.get("value"), t["effect"]) for t in devs[dyn.THREE].get("taints", [])],
                         [("gpu.nvidia.com/xid", "94", "NoSchedule")])
        self.assertEqual([n for n, d in devs.items() if "taints" in d], [dyn.THREE])
        self.assertIs(devs[dyn.THREE]["allowMultipleAllocations"], True)
        Kubelet.wait_health(w, lambda h: h.get((NODE, dyn.THREE)) == HEALTHY, dyn.THREE + " HEALTHY again",
                            len(w["msgs"]))
        self.assertEqual(list(self.live().values()), [m])  # the shares' MIG device left alone
        self.daemon_of(m["uuid"])
        self.assertTrue(self.daemon_up())
        self.assertEqual(self.kl.unprepare(*[ref(o) for o in claims]), {o["metadata"]["uid"]: "" for o in claims})
        self.assertEqual(self.nvml()[0], {"mode": 0, "migs": []})


for _name in ("a100-80gb", "a30", "h200", "b200"):
    _cls = type("Shares_" + re.sub(r"\W", "_", _name), (Profiles,),
                {"PROFILE": os.path.join(mig.DYNAMIC, _name + ".yaml")})
    globals()[_cls.__name__] = _cls
del Profiles, _name, _cls  # only the subclasses run (the loader takes every test class it sees)


if __name__ == "__main__":
    shares.FAKE = sys.argv.pop(1)
    harness.main()
