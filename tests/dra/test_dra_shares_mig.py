#!/usr/bin/python3
"""Shares of static MIG devices (issue 32 item 3) end to end, on test_dra_shares.py's fixture
(the real binary as `serve --dra --dra-consumable-capacity` against the fake API server at
v1.36.3, `mps-control-daemon --dra` with the simulator's nvidia-cuda-mps-control stand-in
recording through MOCK_MPS_LOG, a recording nvidia-smi, the scheduler and kubelet
stand-ins) on four simulated A100 40GB, two of them with MIG devices
(sim/profiles/a100-mig-mixed.yaml):

- the slice: gpu-2's 3g.20gb MIG device with allowMultipleAllocations, memory 20096Mi
  (1Gi..19Gi in steps of 1Gi, default 19Gi) and compute 100, no other capacity; the two
  1c.2g.10gb compute instances of one GPU instance (its memory theirs together) not shared;
  the full GPUs shared as before;
- two shares of the MIG device (8Gi, 10Gi at 20 %) prepared: their own CDI names and
  share_id, each spec with the MIG device's parent node and its two nvidia-caps, the
  daemon's pipe and shm, the client limits and the hook naming the MIG UUID; one daemon
  (`share-<16 hex of the MIG UUID's SHA-256>`) with CUDA_VISIBLE_DEVICES the MIG UUID and
  no compute mode set (nvidia-smi never runs: NVIDIA's MIG MPS path leaves MIG alone);
- a 2Gi share: no room in the scheduler; forged past it, refused by Prepare with GPU
  shares' message naming the MIG device's numbers;
- the plugin SIGKILLed and restarted: the two answered from the checkpoint, the daemon left
  running, the forged one still refused;
- the first unprepared: the daemon stays; the second: it quits and its directory goes.

usage: test_dra_shares_mig.py <fake-apiserver>"""
import hashlib
import json
import os
import signal
import sys
import uuid

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_dra_shares as shares  # noqa: E402
from dra_kubelet import DRIVER, cdi_errors, ref  # noqa: E402
from dra_scheduler import Pool  # noqa: E402

MIG = "MIG-3a3a3a3a-0000-0000-0000-000000000001"  # gpu-2's 3g.20gb
DEVICE = "gpu-2-mig-3g20gb-9-4"
MPS_ID = "share-" + hashlib.sha256(MIG.encode()).hexdigest()[:16]  # dra-shares.c
SELECT = 'uuid == "%s"' % MIG


class DraSharesMig(shares.DraShares):
    PROFILE = os.path.join(harness.SOURCE, "sim", "profiles", "a100-mig-mixed.yaml")
    # the H100's cases are test_dra_shares.py's
    test_ten_shares_restart_two_in_a_claim = test_plugins_dir_of_36_bytes = test_flat = None

    def setUp(self):
        super().setUp()
        self.daemon_dir = os.path.join(self.mps, MPS_ID)

    def test_slice(self):
        self.start_dra()
        devs = {d["name"]: d for s in self.slices().values() for d in s["spec"].get("devices") or []}
        d = devs[DEVICE]
        self.assertIs(d["allowMultipleAllocations"], True)
        self.assertEqual((d["attributes"]["type"], d["attributes"]["uuid"]), ({"string": "mig"}, {"string": MIG}))
        self.assertEqual(d["capacity"], {
            "memory": {"value": "20096Mi", "requestPolicy": {
                "default": "19Gi", "validRange": {"min": "1Gi", "max": "19Gi", "step": "1Gi"}}},
            "compute": {"value": "100", "requestPolicy": {
                "default": "10", "validRange": {"min": "1", "max": "100", "step": "1"}}}})
        narrow = [n for n in devs if n.startswith("gpu-2-mig-1c2g10gb-")]
        self.assertEqual(len(narrow), 2)
        for n in narrow:
            self.assertNotIn("allowMultipleAllocations", devs[n])
            self.assertIn("multiprocessors", devs[n]["capacity"])
        self.assertIs(devs["gpu-0"]["allowMultipleAllocations"], True)
        self.assertNotIn("gpu-2", devs)

    def test_two_shares_of_a_mig_device(self):
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        alloc, claims = [], []
        for asked in ({"memory": "8Gi"}, {"memory": "10Gi", "compute": "20"}):
            r = pool.allocate_results([(SELECT, asked)], alloc)
            self.assertEqual([x["device"] for x in r], [DEVICE])
            alloc += r
            claims.append(self.claim(r, [asked]))
        self.assertEqual(alloc[1]["consumedCapacity"], {"memory": "10Gi", "compute": "20"})
        self.assertIsNone(pool.allocate_results([(SELECT, {"memory": "2Gi"})], alloc))
        answers = {}
        for o in claims:
            answers.update(self.kl.prepare(ref(o), share_id=True))
            self.assertShares(answers, o)
        self.assertNotEqual(alloc[0]["shareID"], alloc[1]["shareID"])

        # One daemon, the MIG device's; no compute mode (nothing of nvidia-smi).
        pipe, logd = os.path.join(self.daemon_dir, "pipe"), os.path.join(self.daemon_dir, "log")
        self.assertEqual(shares.mps_blocks(self.mps_log), [[
            "nvidia-cuda-mps-control -d", "env CUDA_MPS_PIPE_DIRECTORY=" + pipe,
            "env CUDA_MPS_LOG_DIRECTORY=" + logd, "env CUDA_VISIBLE_DEVICES=" + MIG, "exit 0"]])
        self.assertEqual(self.smi_calls(), [])
        self.assertTrue(self.daemon_up())
        self.assertEqual([n for n in os.listdir(self.mps) if not n.startswith(".")], [MPS_ID])
        with open(os.path.join(self.daemon_dir, "desired.json")) as f:
            self.assertEqual(json.load(f), {"version": 1, "id": MPS_ID, "devices": [MIG],
                                            "multiUser": False, "pinnedDeviceMemoryLimitMiB": {}})

        # Each share's spec: the MIG device (parent node, GI and CI capabilities), MPS.
        hook = os.path.join(self.plugins, DRIVER, "bin", shares.HOOK)
        for o, a, mib, pct in zip(claims, alloc, (8192, 10240), (10, 20)):
            uid = o["metadata"]["uid"]
            spec = self.spec(uid)
            self.assertEqual(cdi_errors(spec), [], spec)
            self.assertEqual([d["name"] for d in spec["devices"]], ["%s-%s-%s" % (uid, DEVICE, a["shareID"])])
            edits = [spec.get("containerEdits", {})] + [d["containerEdits"] for d in spec["devices"]]
            env = [kv for e in edits for kv in e.get("env", [])]
            for kv in ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%dM" % mib,
                       "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d" % pct,
                       "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"):
                self.assertEqual(env.count(kv), 1, (kv, env))
            nodes = [n["path"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]]
            self.assertIn("/dev/nvidia2", nodes)
            self.assertEqual(len([n for n in nodes if n.startswith("/dev/nvidia-caps/nvidia-cap")]), 2, nodes)
            mounts = [(m["hostPath"], m["containerPath"]) for e in edits for m in e.get("mounts", [])]
            self.assertIn((pipe, "/tmp/nvidia-mps"), mounts)
            self.assertIn((os.path.join(self.daemon_dir, "shm"), "/dev/shm"), mounts)
            self.assertEqual(spec["devices"][0]["containerEdits"]["hooks"][0]["args"],
                             [shares.HOOK, "share-memory-limit", "--gpu", MIG, "--bytes", str(mib * shares.MI)])
            self.assertEqual(spec["devices"][0]["containerEdits"]["hooks"][0]["path"], hook)

        # A third forged past the scheduler: 20480 MiB of the MIG device's 20096.
        sid = str(uuid.uuid4())
        forged = self.claim([{"device": DEVICE, "shareID": sid,
                              "consumedCapacity": {"memory": "2Gi", "compute": "10"}}], [{"memory": "2Gi"}])
        fuid = forged["metadata"]["uid"]
        self.assertIn("device %s cannot hold share %s: its shares would take 20480 MiB of its 20096 MiB "
                      "and 40%% of its SMs" % (DEVICE, sid), self.kl.prepare(ref(forged))[fuid]["error"])
        self.assertFalse(os.path.exists(os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % fuid)))

        # The plugin SIGKILLed and started again: the shares (MigDeviceConfig records) are
        # answered from the checkpoint, the daemon left be, the forged one still refused.
        before = shares.mps_blocks(self.mps_log)
        self.plugin.signal(signal.SIGKILL)
        self.plugin.wait_exit()
        self.kl.close()
        self.start_dra()
        self.assertEqual(self.kl.prepare(*[ref(o) for o in claims], share_id=True), answers)
        self.assertIn("its shares would take 20480 MiB of its 20096 MiB",
                      self.kl.prepare(ref(forged))[fuid]["error"])
        self.assertEqual(shares.mps_blocks(self.mps_log), before)
        self.assertTrue(self.daemon_up())

        # Unprepared: the first leaves the daemon be, the last stops it.
        uid0, uid1 = (o["metadata"]["uid"] for o in claims)
        self.assertEqual(self.kl.unprepare(ref(claims[0])), {uid0: ""})
        self.assertTrue(self.daemon_up())
        self.assertEqual(len(shares.mps_blocks(self.mps_log)), 1)
        self.assertEqual(self.kl.unprepare(ref(claims[1])), {uid1: ""})
        blocks = shares.mps_blocks(self.mps_log)
        self.assertEqual(len(blocks), 2, blocks)
        self.assertIn("stdin quit", blocks[1])
        self.assertEqual(blocks[1][-1], "exit 0")
        self.assertEqual(self.smi_calls(), [])
        self.assertFalse(os.path.exists(self.daemon_dir))
        self.assertFalse(self.daemon_up())
        self.assertEqual(os.listdir(self.cdi), [])


if __name__ == "__main__":
    shares.FAKE = sys.argv.pop(1)
    harness.main()
