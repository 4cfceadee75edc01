#!/usr/bin/python3
"""Shares of DynamicMIG placements (issue 32 on issue 31) end to end, on test_dra_shares.py's
fixture (the real binary as `serve --dra --dra-consumable-capacity` with
FEATURE_GATES=DynamicMIG=true against the fake API server at v1.36.3, `mps-control-daemon
--dra` with the simulator's nvidia-cuda-mps-control stand-in recording through MOCK_MPS_LOG,
a recording nvidia-smi, the scheduler and kubelet stand-ins) on one simulated H100 80GB with
MIG mode off (sim/profiles/dynamic/h100-1-mig-off.yaml; the MIG state shared with this test
through MOCK_NVML_STATE and read as test_dra_mig.py reads it), and an A100 40GB with MIG on
and no MIG device (dynamic/a100-40gb-mig-empty.yaml):

- the slice: every placement with allowMultipleAllocations, capacity memory (the profile's,
  1Gi..its whole Gi in steps of 1Gi, default all of them) and compute 100, nothing else
  (no multiprocessors), its consumesCounters kept; gpu-0 shared and consuming every counter;
  the slices accepted by the fake API server's 1.36 rules; the scheduler stand-in takes a
  shared device's counters once (its second share lands on the same placement, nothing
  below zero; the full GPU and an overlapping placement find no room);
- two claims, one share each of the 3g.40gb at 0: one MIG device made (one GI), the same
  migUUID in both checkpoint records, one MPS daemon (`share-<16 hex of the MIG UUID's
  SHA-256>`, CUDA_VISIBLE_DEVICES the MIG UUID, no nvidia-smi); each spec its own name,
  the MIG device's parent node and caps, the client limits, the pipe; share_id answered;
  the first unprepare keeps the MIG device and daemon, the last removes both, MIG mode off
  (Hopper); twice, threads and fds of the plugin flat around both rounds;
- forged past the scheduler: a share over the placement's memory ("cannot hold share"), a
  share of the full GPU and of overlapping placements while one is held, TimeSlicing on a
  share, a shared placement given whole: refused, the held MIG device left; a share of a
  disjoint placement makes its own; a claim with a share of the held placement and one
  where someone else's MIG device sits: NVML refuses, the undo leaves the held one; the
  held share unprepared first: the other share's MIG device stays until its own unprepare;
- the plugin SIGKILLed with two shares held: the MIG device and daemon left, the repeated
  Prepares answered from the checkpoint, a third share after the restart finds the same MIG
  device; all unprepared: the MIG device destroyed once, the daemon gone;
- --dra-share-memory-step 16Gi: the 1g.10gb placements (under a step) offered whole, a
  TimeSlicing MigDeviceConfig on one still refused ("made on demand is not supported"); one
  given whole beside a share of a 3g.40gb, each MIG device gone with its own claim;
- the A100: two shares of one placement in one claim: one MIG device, two CDI devices, the
  unprepare destroys it once; MIG mode stays on (Ampere);
- driver r615 (MPS v3), no runner: a first share whose namespace fails (`<ns>.failed`) fails
  at once with its text, its PrepareStarted record and MIG device kept; the retry, the
  runner up, takes that MIG device over (no second GI, one daemon), the unprepare destroys
  it, MIG mode off, no daemon left.

usage: test_dra_shares_dyn.py <fake-apiserver>"""
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "attack"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_dra_mig as mig  # noqa: E402
import test_dra_shares as shares  # noqa: E402
from dra_kubelet import DRIVER, NODE, cdi_errors, ref  # noqa: E402
from dra_scheduler import Pool, quantity  # noqa: E402

GPU0 = shares.UUID0
THREE = "gpu-0-mig-3g40gb-9-0"  # the H100's 3g.40gb at memory slice 0 (slices 0-3)
SEL3 = 'profile == "3g.40gb"'
GI = shares.GI


def mps_id(mig_uuid):
    return "share-" + hashlib.sha256(mig_uuid.encode()).hexdigest()[:16]  # dra-shares.c


def config(kind):
    """A FromClaim opaque config with TimeSlicing sharing, for every request."""
    return {"source": "FromClaim", "requests": [], "opaque": {
        "driver": DRIVER, "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": kind,
                                         "sharing": {"strategy": "TimeSlicing"}}}}


class DraSharesDyn(shares.DraShares):
    # test_dra_shares.py's cases are its own (they run there without DynamicMIG)
    test_ten_shares_restart_two_in_a_claim = test_plugins_dir_of_36_bytes = test_flat = None

    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.tmp, "nvml-state")
        self.ckpt_path = os.path.join(self.plugins, DRIVER, "checkpoint.json")
        with open(self.PROFILE) as f:
            self.gpu_uuid = re.search(r"uuid: (GPU-[0-9a-f-]+)", f.read()).group(1)

    def nvml_env(self):
        return {"MOCK_NVML_CONFIG": self.PROFILE, "MOCK_NVML_STATE": self.state,
                "MOCK_NVML_PROC_ROOT": self.proc_root, "MOCK_NVML_DEV_ROOT": os.path.join(self.dev_root, "dev")}

    def start_dra(self, *extra):
        args = list(extra) + [
            "--dra", "--dra-consumable-capacity", "--node-name", NODE, "--kubeconfig", self.kubeconfig,
            "--kubelet-registrar-directory-path", self.registrar,
            "--kubelet-plugins-directory-path", self.plugins, "--cdi-root", self.cdi]
        p = self.start_plugin(args, extra_env=dict(self.nvml_env(), FEATURE_GATES="DynamicMIG=true"))
        p.wait_log(shares.UP_TO_DATE)
        self.kl.register()
        return p

    def kill_plugin(self):
        self.plugin.signal(signal.SIGKILL)
        self.plugin.wait_exit()
        self.kl.close()

    # -- NVML's MIG state, as another process sees it (test_dra_mig.py's probe)
    def nvml(self, **cmd):
        """[{mode, migs: [{uuid, gi, ci, profileId, start, size}]}] per GPU, after cmd (op
        "create": gpu, index, start, size: someone else's MIG device)."""
        env = dict(os.environ, LD_LIBRARY_PATH=harness.SIM_DIR, **self.nvml_env(), **mig.asan_preload())
        env.pop("MOCK_NVML_CONTROL", None)
        cmd = json.dumps(dict(cmd, op=cmd.get("op", "list")))
        r = subprocess.run([sys.executable, "-c", mig.NVML_PROBE, cmd],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def live(self):
        """{(GI profile id, start): mig} of gpu-0."""
        return {(m["profileId"], m["start"]): m for m in self.nvml()[0]["migs"]}

    def checkpoint(self):
        with open(self.ckpt_path) as f:
            return json.load(f)["preparedClaims"]

    def records(self, o):
        """The checkpoint's device entries of claim o."""
        return self.checkpoint()[o["metadata"]["uid"]]["devices"]

    def daemon_of(self, mig_uuid):
        """The MPS daemon of a MIG device: its directory becomes the fixture's."""
        self.daemon_dir = os.path.join(self.mps, mps_id(mig_uuid))
        return self.daemon_dir

    def share(self, pool, alloc, asked, sel=SEL3, device=THREE):
        """One claim of one share, as the scheduler places it beside alloc (extended)."""
        r = pool.allocate_results([(sel, asked)], alloc)
        self.assertIsNotNone(r, (asked, alloc))
        self.assertEqual([x["device"] for x in r], [device])
        alloc += r
        return self.claim(r, [asked])

    def forged(self, device, memory="8Gi", share=True, cfg=None):
        """A claim of one result forged past the scheduler (a share unless share=False)."""
        r = {"device": device}
        if share:
            r.update(shareID=str(uuid.uuid4()), consumedCapacity={"memory": memory, "compute": "10"})
        o = self.claim([r], [{"memory": memory}])
        if cfg:
            o["spec"]["devices"]["config"] = [{k: v for k, v in cfg.items() if k != "source"}]
            o["status"]["allocation"]["devices"]["config"] = [cfg]  # what the plugin reads
            self.load(o)
        return o

    def assertMigShareSpec(self, o, res, mig_uuid, nodes, mib, pct):
        """o's spec: one CDI device per share, the MIG device's nodes, the client limits, the
        daemon's pipe and shm, the hook naming the MIG UUID."""
        self.assertShares(res, o)
        uid = o["metadata"]["uid"]
        spec = self.spec(uid)
        self.assertEqual(cdi_errors(spec), [], spec)
        results = o["status"]["allocation"]["devices"]["results"]
        self.assertEqual([d["name"] for d in spec["devices"]],
                         ["%s-%s-%s" % (uid, r["device"], r["shareID"]) for r in results])
        edits = [spec.get("containerEdits", {})] + [d["containerEdits"] for d in spec["devices"]]
        env = [kv for e in edits for kv in e.get("env", [])]
        for kv in ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%dM" % mib,
                   "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d" % pct):
            self.assertEqual(env.count(kv), 1, (kv, env))
        for d, r in zip(spec["devices"], results):
            e = d["containerEdits"]
            self.assertEqual([n["path"] for n in e["deviceNodes"]], nodes, d)
            self.assertEqual(e["hooks"][0]["args"], [shares.HOOK, "share-memory-limit", "--gpu", mig_uuid,
                                                     "--bytes", str(quantity(r["consumedCapacity"]["memory"]))])
            # each share's device: the daemon's pipe and shm (dra-mps.c: per CDI device)
            self.assertEqual(e["env"].count("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"), 1, e)
            self.assertEqual([(m["hostPath"], m["containerPath"]) for m in e["mounts"]],
                             [(os.path.join(self.daemon_dir, "shm"), "/dev/shm"),
                              (os.path.join(self.daemon_dir, "pipe"), "/tmp/nvidia-mps")])

    def assertOneMig(self, claims, key, devices=(THREE,)):
        """One MIG device live at key, the one every share of claims records, with its
        daemon: its UUID."""
        live = self.live()
        self.assertEqual(sorted(live), [key])
        m = live[key]
        recs = [d for o in claims for d in self.records(o) if d["device"] in devices]
        self.assertEqual(len(recs), sum(len(o["status"]["allocation"]["devices"]["results"]) for o in claims))
        for d in recs:
            self.assertEqual(d["mig"], {"parentUUID": self.gpu_uuid, "migUUID": m["uuid"],
                                        "giId": m["gi"], "ciId": m["ci"]})
            self.assertEqual((d["sharing"], d["mpsId"]), ("MPS", mps_id(m["uuid"])))
            self.assertIn(d["share"]["id"], [r["shareID"] for o in claims
                                             for r in o["status"]["allocation"]["devices"]["results"]])
        return m

    @staticmethod
    def mig_nodes(m, gpu=0):
        return ["/dev/nvidia%d" % gpu, "/dev/nvidia-caps/nvidia-cap%d" % (3 + gpu * 135 + m["gi"] * 9),
                "/dev/nvidia-caps/nvidia-cap%d" % (3 + gpu * 135 + m["gi"] * 9 + 1 + m["ci"])]

    def assertOneDaemon(self, mig_uuid, blocks=1):
        d = self.daemon_of(mig_uuid)
        b = shares.mps_blocks(self.mps_log)
        self.assertEqual(len(b), blocks, b)
        self.assertEqual(b[-1], ["nvidia-cuda-mps-control -d",
                                 "env CUDA_MPS_PIPE_DIRECTORY=" + os.path.join(d, "pipe"),
                                 "env CUDA_MPS_LOG_DIRECTORY=" + os.path.join(d, "log"),
                                 "env CUDA_VISIBLE_DEVICES=" + mig_uuid, "exit 0"])
        self.assertEqual(self.smi_calls(), [])  # MIG: no compute mode
        self.assertTrue(self.daemon_up())
        self.assertEqual([n for n in os.listdir(self.mps) if not n.startswith(".")], [mps_id(mig_uuid)])
        with open(os.path.join(d, "desired.json")) as f:
            self.assertEqual(json.load(f)["devices"], [mig_uuid])

    def assertDaemonGone(self, blocks):
        b = shares.mps_blocks(self.mps_log)
        self.assertEqual(len(b), blocks, b)
        self.assertIn("stdin quit", b[-1])
        self.assertEqual(b[-1][-1], "exit 0")
        self.assertFalse(os.path.exists(self.daemon_dir))
        self.assertFalse(self.daemon_up())

    # ---------------------------------------------------------------------------------

    def test_slice(self):
        self.start_dra()
        slices = self.slices()
        self.assertEqual(len(slices), 2, sorted(slices))  # 1.36: counters-only, then devices
        sets = [c for s in slices.values() for c in s["spec"].get("sharedCounters") or []]
        self.assertEqual([c["name"] for c in sets], ["gpu-0-counter-set"])
        counters = sets[0]["counters"]
        devs = {d["name"]: d for s in slices.values() for d in s["spec"].get("devices") or []}
        expect = ["gpu-0"] + [mig.dev_name(0, p, gid, st) for p, gid, starts, *_ in mig.H100 for st in starts]
        self.assertEqual(sorted(devs), sorted(expect))
        compute = {"value": "100", "requestPolicy": {"default": "10", "validRange": {
            "min": "1", "max": "100", "step": "1"}}}
        g = devs["gpu-0"]
        self.assertIs(g["allowMultipleAllocations"], True)
        self.assertEqual(g["attributes"]["uuid"], {"string": GPU0})
        self.assertEqual(g["capacity"], {"memory": {"value": "80Gi", "requestPolicy": {
            "default": "80Gi", "validRange": {"min": "1Gi", "max": "80Gi", "step": "1Gi"}}},
            "compute": compute})
        self.assertEqual(g["consumesCounters"], [{"counterSet": "gpu-0-counter-set", "counters": counters}])
        for p, gid, starts, size, sm, ce, dec, jpeg, ofa in mig.H100:
            for st in starts:
                name = mig.dev_name(0, p, gid, st)
                d = devs[name]
                self.assertIs(d.get("allowMultipleAllocations"), True, name)
                a = d["attributes"]
                self.assertEqual((a["type"], a["profile"], a["parentUUID"]),
                                 ({"string": "mig"}, {"string": p}, {"string": GPU0}))
                self.assertNotIn("uuid", a)
                use = d["consumesCounters"]
                self.assertEqual([u["counterSet"] for u in use], ["gpu-0-counter-set"])
                c = {k: v["value"] for k, v in use[0]["counters"].items()}
                mem = c.pop("memory")
                w = {"multiprocessors": str(sm), "copy-engines": str(ce), "decoders": str(dec),
                     "encoders": "0", "jpeg-engines": str(jpeg), "ofa-engines": str(ofa)}
                w.update({"memory-slice-%d" % i: "1" for i in range(st, st + size)})
                self.assertEqual(c, w, name)
                # the profile's memory in whole MiB, shared in Gi steps up to all of it
                self.assertRegex(mem, r"^\d+(Mi|Gi)$")
                whole = "%dGi" % (quantity(mem) // GI)
                self.assertEqual(d["capacity"], {"memory": {"value": mem, "requestPolicy": {
                    "default": whole, "validRange": {"min": "1Gi", "max": whole, "step": "1Gi"}}},
                    "compute": compute}, name)
        self.assertEqual(devs[THREE]["capacity"]["memory"]["value"], "40448Mi")
        # accepted by the fake API server (the 1.36 rules), as posted and posted again
        for name, o in sorted(slices.items()):
            o = json.loads(json.dumps(o))
            o["metadata"] = {"name": "copy-" + name}
            o["spec"]["pool"]["name"] = "copy"
            status, body = mig.kt_request(self.kubeconfig, "POST", "/apis/resource.k8s.io/v1/resourceslices", o)
            self.assertEqual(status, 201, body)
        # the scheduler: a shared device's counters taken once
        pool = Pool(list(slices.values()))
        alloc = []
        self.share(pool, alloc, {"memory": "8Gi"})
        left = pool.available(alloc)["gpu-0-counter-set"]
        self.share(pool, alloc, {"memory": "30Gi", "compute": "50"})
        self.assertEqual(pool.available(alloc)["gpu-0-counter-set"], left)
        self.assertEqual([left["memory-slice-%d" % i] for i in range(8)], [0] * 4 + [1] * 4)
        self.assertEqual(left["multiprocessors"], 132 - 60)
        self.assertIsNone(pool.allocate_results([('type == "gpu"', {"memory": "1Gi"})], alloc))
        self.assertEqual([r["device"] for r in pool.allocate_results([('profile == "1g.10gb"', {})], alloc)],
                         ["gpu-0-mig-1g10gb-19-4"])
        # 8Gi + 30Gi of 39Gi: a 2Gi share goes to the 3g.40gb at 4
        self.assertEqual([r["device"] for r in pool.allocate_results([(SEL3, {"memory": "2Gi"})], alloc)],
                         ["gpu-0-mig-3g40gb-9-4"])
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])  # nothing carved by publishing

    def test_two_claims_share_one_mig_device(self):
        def rounds(pool):
            for rnd in range(2):
                self.two_shares_round(pool, rnd)
        self.flat_around(rounds, "shares of DynamicMIG placements")

    def two_shares_round(self, pool, rnd):
        alloc = []
        one = self.share(pool, alloc, {"memory": "8Gi"})
        two = self.share(pool, alloc, {"memory": "10Gi", "compute": "20"})
        self.assertEqual(alloc[1]["consumedCapacity"], {"memory": "10Gi", "compute": "20"})
        self.assertNotEqual(alloc[0]["shareID"], alloc[1]["shareID"])
        answers = self.kl.prepare(ref(one), share_id=True)
        m = self.assertOneMig([one], (9, 0))
        self.assertEqual(self.nvml()[0]["mode"], 1)
        self.assertOneDaemon(m["uuid"], blocks=1 + 2 * rnd)
        answers.update(self.kl.prepare(ref(two), share_id=True))
        self.assertEqual(self.assertOneMig([one, two], (9, 0)), m)  # found, not made again
        self.assertOneDaemon(m["uuid"], blocks=1 + 2 * rnd)
        for o, mib, pct in ((one, 8192, 10), (two, 10240, 20)):
            self.assertMigShareSpec(o, answers, m["uuid"], self.mig_nodes(m), mib, pct)
        # the first unprepared: the MIG device and its daemon stay
        self.assertEqual(self.kl.unprepare(ref(one)), {one["metadata"]["uid"]: ""})
        self.assertEqual(self.live(), {(9, 0): m})
        self.assertOneDaemon(m["uuid"], blocks=1 + 2 * rnd)
        self.assertFalse(os.path.exists(os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml"
                                                     % one["metadata"]["uid"])))
        # the last: the daemon stopped, the MIG device destroyed, MIG mode off (Hopper)
        self.assertEqual(self.kl.unprepare(ref(two)), {two["metadata"]["uid"]: ""})
        self.assertDaemonGone(blocks=2 + 2 * rnd)
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertEqual(os.listdir(self.cdi), [])
        self.assertEqual(self.checkpoint(), {})

    def test_forged_shares_refused(self):
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        alloc = []
        held = self.share(pool, alloc, {"memory": "8Gi"})
        self.assertShares(self.kl.prepare(ref(held), share_id=True), held)
        m = self.assertOneMig([held], (9, 0))
        self.daemon_of(m["uuid"])
        hname = "default/%s" % held["metadata"]["name"]

        def refused(o, *needles):
            uid = o["metadata"]["uid"]
            res = self.kl.prepare(ref(o))[uid]
            for n in needles:
                self.assertIn(n, res["error"])
            self.assertEqual(res["devices"], [])
            self.assertFalse(os.path.exists(os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)))
            self.assertEqual(self.live(), {(9, 0): m})  # the held one left, nothing made
            self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
            self.assertEqual(self.live(), {(9, 0): m})

        # over the placement's memory: 8Gi + 32Gi of 40448 MiB
        big = self.forged(THREE, "32Gi")
        sid = big["status"]["allocation"]["devices"]["results"][0]["shareID"]
        refused(big, "device %s cannot hold share %s: its shares would take 40960 MiB of its 40448 MiB "
                "and 20%% of its SMs" % (THREE, sid))
        # the full GPU (shared too) and placements over slices 0-3, while a share is held
        for dev in ("gpu-0", "gpu-0-mig-1g10gb-19-0", "gpu-0-mig-2g20gb-14-2", "gpu-0-mig-4g40gb-5-0",
                    "gpu-0-mig-7g80gb-0-0", "gpu-0-mig-1g20gb-15-2"):
            refused(self.forged(dev, "1Gi"), "device %s is already prepared for claim %s" % (dev, hname))
        # TimeSlicing on a share (MPS is how shares share); a shared placement given whole
        refused(self.forged("gpu-0-mig-1g10gb-19-4", "1Gi", cfg=config("MigDeviceConfig")),
                "a device offered as shares is shared through MPS, TimeSlicing cannot apply to a share")
        refused(self.forged("gpu-0-mig-1g10gb-19-4", share=False),
                "device gpu-0-mig-1g10gb-19-4 is offered as shares: its allocation carries no shareID")
        # a share of a disjoint placement: its own MIG device and daemon, and only it goes
        other = self.share(pool, alloc, {"memory": "2Gi"}, 'profile == "1g.10gb"', "gpu-0-mig-1g10gb-19-4")
        self.assertShares(self.kl.prepare(ref(other), share_id=True), other)
        live = self.live()
        self.assertEqual(sorted(live), [(9, 0), (19, 4)])
        self.assertEqual(live[(9, 0)], m)
        self.assertEqual(self.records(other)[0]["mig"]["migUUID"], live[(19, 4)]["uuid"])
        self.assertEqual(self.records(other)[0]["mpsId"], mps_id(live[(19, 4)]["uuid"]))
        self.assertEqual(self.kl.unprepare(ref(other)), {other["metadata"]["uid"]: ""})
        self.assertEqual(self.live(), {(9, 0): m})
        self.assertTrue(self.daemon_up())
        # a share of the held placement and one where NVML refuses (someone else's MIG
        # device there): the undo leaves the held one (another claim's) and its daemon
        foreign = self.nvml(op="create", gpu=0, index=0, start=5, size=1)[0]["migs"]
        foreign = [f for f in foreign if f["start"] == 5]
        o = self.claim([{"device": d, "shareID": str(uuid.uuid4()), "consumedCapacity": {"memory": "1Gi"}}
                        for d in (THREE, "gpu-0-mig-1g10gb-19-5")], [{"memory": "1Gi"}] * 2)
        res = self.kl.prepare(ref(o))[o["metadata"]["uid"]]
        self.assertIn("error creating MIG device 'gpu-0-mig-1g10gb-19-5'", res["error"])
        self.assertEqual(self.live(), {(9, 0): m, (19, 5): foreign[0]})
        self.assertTrue(self.daemon_up())
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})
        self.assertEqual(self.live(), {(9, 0): m, (19, 5): foreign[0]})
        # the over-capacity one fits once its room is there (8Gi + 31Gi)
        fits = self.forged(THREE, "31Gi")
        self.assertShares(self.kl.prepare(ref(fits), share_id=True), fits)
        self.assertEqual(self.live(), {(9, 0): m, (19, 5): foreign[0]})
        self.assertEqual(self.records(fits)[0]["mig"]["migUUID"], m["uuid"])
        # the held one's unprepare leaves it to the other share; that one's destroys it
        self.assertEqual(self.kl.unprepare(ref(held)), {held["metadata"]["uid"]: ""})
        self.assertEqual(self.live(), {(9, 0): m, (19, 5): foreign[0]})
        self.assertTrue(self.daemon_up())
        self.assertEqual(self.kl.unprepare(ref(fits)), {fits["metadata"]["uid"]: ""})
        self.assertEqual(self.nvml(), [{"mode": 1, "migs": foreign}])  # MIG mode on: the foreign one
        self.assertFalse(os.path.exists(self.daemon_dir))
        self.assertEqual(os.listdir(self.cdi), [])

    def test_restart_with_two_shares(self):
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        alloc = []
        claims = [self.share(pool, alloc, a) for a in ({"memory": "8Gi"}, {"memory": "16Gi", "compute": "30"})]
        answers = self.kl.prepare(*[ref(o) for o in claims], share_id=True)  # one call: both
        for o in claims:
            self.assertShares(answers, o)
        m = self.assertOneMig(claims, (9, 0))
        self.assertOneDaemon(m["uuid"])
        before = shares.mps_blocks(self.mps_log)

        # SIGKILLed: the MIG device and the daemon left; answered from the checkpoint
        self.kill_plugin()
        self.assertEqual(self.live(), {(9, 0): m})
        self.start_dra()
        self.assertEqual(self.live(), {(9, 0): m})  # not swept at start: claims hold it
        self.assertEqual(self.kl.prepare(*[ref(o) for o in claims], share_id=True), answers)
        self.assertEqual(shares.mps_blocks(self.mps_log), before)
        self.assertTrue(self.daemon_up())
        # a third share after the restart finds the same MIG device and daemon
        third = self.share(pool, alloc, {"memory": "4Gi"})
        res = self.kl.prepare(ref(third), share_id=True)
        self.assertMigShareSpec(third, res, m["uuid"], self.mig_nodes(m), 4096, 10)
        claims.append(third)
        self.assertEqual(self.assertOneMig(claims, (9, 0)), m)
        self.assertEqual(shares.mps_blocks(self.mps_log), before)
        # unprepared one by one: the MIG device goes with the last
        for i, o in enumerate(claims):
            self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})
            if i < len(claims) - 1:
                self.assertEqual(self.live(), {(9, 0): m})
                self.assertTrue(self.daemon_up())
        self.assertDaemonGone(blocks=2)
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertEqual(os.listdir(self.cdi), [])

    def test_step_above_small_placements(self):
        """--dra-share-memory-step 16Gi: the 1g.10gb placements (under a step) offered whole
        as before (their multiprocessors, no allowMultipleAllocations), a TimeSlicing config
        on one still refused; one given whole beside a share of a 3g.40gb: two MIG devices,
        each destroyed by its own claim's unprepare."""
        self.start_runner()
        self.start_dra("--dra-share-memory-step", "16Gi")
        pool = Pool(list(self.slices().values()))
        small, big = pool.by_name["gpu-0-mig-1g10gb-19-4"], pool.by_name[THREE]
        self.assertNotIn("allowMultipleAllocations", small)
        self.assertIn("multiprocessors", small["capacity"])
        self.assertIs(big["allowMultipleAllocations"], True)
        self.assertEqual(big["capacity"]["memory"]["requestPolicy"]["validRange"],
                         {"min": "16Gi", "max": "32Gi", "step": "16Gi"})
        o = self.forged("gpu-0-mig-1g10gb-19-4", share=False, cfg=config("MigDeviceConfig"))
        res = self.kl.prepare(ref(o))[o["metadata"]["uid"]]
        self.assertIn("a sharing config on a MIG device made on demand is not supported", res["error"])
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})
        alloc = []
        sh = self.share(pool, alloc, {"memory": "16Gi"})
        r = pool.allocate_results(['profile == "1g.10gb"'], alloc)
        self.assertEqual(r, [{"device": "gpu-0-mig-1g10gb-19-4"}])
        whole = self.claim(r, [{}])
        self.assertShares(self.kl.prepare(ref(sh), share_id=True), sh)
        m = self.assertOneMig([sh], (9, 0))
        res = self.kl.prepare(ref(whole))
        self.assertEqual(res[whole["metadata"]["uid"]]["error"], "", res)
        self.assertEqual(sorted(self.live()), [(9, 0), (19, 4)])
        self.assertNotIn("share", self.records(whole)[0])
        self.assertEqual(self.kl.unprepare(ref(whole)), {whole["metadata"]["uid"]: ""})
        self.assertEqual(self.live(), {(9, 0): m})
        self.assertEqual(self.kl.unprepare(ref(sh)), {sh["metadata"]["uid"]: ""})
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])


class DraSharesDynA100(DraSharesDyn):
    """An A100 40GB, MIG on and empty: two shares of one placement in one claim."""
    PROFILE = os.path.join(mig.DYNAMIC, "a100-40gb-mig-empty.yaml")
    test_slice = test_two_claims_share_one_mig_device = test_forged_shares_refused = None
    test_restart_with_two_shares = test_step_above_small_placements = None

    def test_two_shares_in_one_claim(self):
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        self.assertNotIn("gpu-0", pool.by_name)
        dev = "gpu-0-mig-3g20gb-9-0"
        self.assertIs(pool.by_name[dev]["allowMultipleAllocations"], True)
        asked = [{"memory": "8Gi"}, {"memory": "10Gi", "compute": "20"}]
        r = pool.allocate_results([('profile == "3g.20gb"', a) for a in asked])
        self.assertEqual([x["device"] for x in r], [dev, dev])
        o = self.claim(r, asked)
        res = self.kl.prepare(ref(o), share_id=True)
        m = self.assertOneMig([o], (9, 0), devices=(dev,))
        self.assertEqual(self.nvml()[0]["mode"], 1)
        self.assertOneDaemon(m["uuid"])
        # two CDI devices; the limits summed, the smaller percentage
        self.assertMigShareSpec(o, res, m["uuid"], self.mig_nodes(m), 18432, 10)
        self.assertEqual(self.kl.prepare(ref(o), share_id=True), res)
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})
        self.assertDaemonGone(blocks=2)
        self.assertEqual(self.nvml(), [{"mode": 1, "migs": []}])  # Ampere: MIG mode stays on
        self.assertEqual(os.listdir(self.cdi), [])
        self.assertEqual(self.checkpoint(), {})


class DraSharesDynV3(DraSharesDyn):
    """Driver r615 (the profile's, as test_dra_shares.py's DraSharesV3 makes it): each share
    of a MIG device its own MPS v3 namespace."""
    test_slice = test_two_claims_share_one_mig_device = test_forged_shares_refused = None
    test_restart_with_two_shares = test_step_above_small_placements = None

    def setUp(self):
        super().setUp()
        with open(self.PROFILE) as f:
            text = f.read()
        self.assertIn('"550.163.01"', text)
        self.profile = os.path.join(self.tmp, "h100-r615.yaml")
        with open(self.profile, "w") as f:
            f.write(text.replace("550.163.01", "615.44.01"))

    def nvml_env(self):
        return dict(super().nvml_env(), MOCK_NVML_CONFIG=self.profile)

    def test_failed_first_share_keeps_its_mig_device(self):
        self.start_dra()  # no runner yet: the namespace made by nobody
        o = self.share(Pool(list(self.slices().values())), [], {"memory": "8Gi"})
        uid = o["metadata"]["uid"]
        sid = o["status"]["allocation"]["devices"]["results"][0]["shareID"]
        ns = "s" + hashlib.sha256(("%s/%s" % (uid, sid)).encode()).hexdigest()[:16]  # dra-shares.c
        out = {}
        t = threading.Thread(target=lambda: out.update(self.kl.prepare(ref(o))), daemon=True)
        t0 = time.monotonic()
        t.start()
        desired = None
        while not desired and time.monotonic() - t0 < harness.TIMEOUT:
            time.sleep(0.02)
            ds = os.listdir(self.mps) if os.path.isdir(self.mps) else []
            desired = [os.path.join(self.mps, d, "ns", ns + ".json") for d in ds]
            desired = [p for p in desired if os.path.exists(p)]
        self.assertEqual(len(desired or []), 1, "namespace %s desired in one daemon" % ns)
        # the runner's answer: the namespace failed (written whole, then renamed)
        failed = desired[0][:-len(".json")] + ".failed"
        with open(failed + ".tmp", "w") as f:
            f.write("namespace set %s failed: out of bubbles" % ns)
        os.rename(failed + ".tmp", failed)
        t.join(harness.TIMEOUT)
        self.assertFalse(t.is_alive())
        self.assertLess(time.monotonic() - t0, 10)  # not the 15 s ready timeout
        self.assertIn("namespace set %s failed: out of bubbles" % ns, out[uid]["error"])
        self.assertEqual(out[uid]["devices"], [])
        # its record kept (the MIG device in it in memory: saved when it completes), the MIG
        # device NVML still has, its daemon's desired state
        self.assertIn(uid, self.checkpoint(), "the failed first share's record undone")
        rec = self.checkpoint()[uid]
        self.assertEqual(rec["checkpointState"], "PrepareStarted")
        self.assertEqual([(d["device"], d["share"]["id"]) for d in rec["devices"]], [(THREE, sid)])
        (m,) = self.live().values()
        self.assertEqual((m["profileId"], m["start"]), (9, 0))
        self.assertEqual(self.nvml()[0]["mode"], 1)
        self.assertEqual(os.path.dirname(os.path.dirname(desired[0])), self.daemon_of(m["uuid"]))
        with open(os.path.join(self.daemon_dir, "desired.json")) as f:
            self.assertEqual(json.load(f)["devices"], [m["uuid"]])
        # the runner up: the retry takes the MIG device over, no second GI, one daemon
        os.unlink(failed)
        self.start_runner()
        self.assertShares(self.kl.prepare(ref(o), share_id=True), o)
        self.assertEqual(self.checkpoint()[uid]["checkpointState"], "PrepareCompleted")
        self.assertEqual(self.assertOneMig([o], (9, 0)), m)
        self.assertTrue(self.daemon_up())
        self.assertTrue(os.path.exists(os.path.join(self.daemon_dir, "ns", ns + ".ready")))
        self.assertEqual([n for n in os.listdir(self.mps) if not n.startswith(".")], [mps_id(m["uuid"])])
        # the unprepare: the daemon stopped, the MIG device destroyed, MIG mode off
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertFalse(os.path.exists(self.daemon_dir))
        self.assertFalse(self.daemon_up())
        self.assertEqual(self.checkpoint(), {})
        self.assertEqual(os.listdir(self.cdi), [])


if __name__ == "__main__":
    shares.FAKE = sys.argv.pop(1)
    harness.main()
