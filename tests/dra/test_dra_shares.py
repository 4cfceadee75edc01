#!/usr/bin/python3
"""GPU shares (consumable capacity, issue 32 items 3-5) end to end: the real binary as the DRA
plugin (`serve --dra --dra-consumable-capacity`) on one simulated H100 80GB
(sim/profiles/dynamic/h100-1-mig-off.yaml) against the fake API server at v1.36.3, claims
allocated by the scheduler stand-in (dra_scheduler.py: consumable capacity, a shareID per
share) and prepared through the kubelet stand-in (dra_kubelet.py); the MPS control daemons
run by the real binary as `mps-control-daemon --dra`, with the simulator's
nvidia-cuda-mps-control stand-in (from a rendered driver root, recording through
MOCK_MPS_LOG) and a recording nvidia-smi on its PATH; the share hook installed by the plugin
at start (the build's gpu-device-plugin-cdi-hook, beside the binary).

- the slice: gpu-0 with allowMultipleAllocations, memory 80Gi (requestPolicy: default the
  whole GPU, 1Gi..80Gi in steps of 1Gi) and compute 100 (default 10, 1..100);
- ten claims asking 8Gi each, each a distinct shareID, all prepared (one call each); the
  eleventh finds no room in the scheduler; one forged past it (an eleventh share in the
  API server) refused by Prepare naming the numbers; the MPS log shows one daemon
  (`share-<16 hex>`) started, EXCLUSIVE_PROCESS set once; a share's CDI spec (name with the
  shareID, the client limits, the daemon's pipe and shm, the hooks) and share_id in the
  answer;
- the plugin SIGKILLed with ten shares prepared: the daemon runs on (no quit), repeated
  Prepares answered from the checkpoint, the forged share still refused;
- two shares of gpu-0 in one claim: two CDI devices, their limits summed;
- all unprepared: quit, compute mode DEFAULT, the daemon's directory gone;
- threads, fds and RSS flat around two rounds of ten shares.

usage: test_dra_shares.py <fake-apiserver>"""
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "attack"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attacklib  # noqa: E402
from kubetest import scratch  # noqa: E402
from dra_kubelet import FakeApi, CDI_KIND, DRIVER, NODE, Kubelet, cdi_errors, obj, on_node, ref  # noqa: E402
from dra_scheduler import Pool  # noqa: E402
from test_dra_mps import MpsRunner  # noqa: E402

FAKE = None
PROFILE = os.path.join(harness.SOURCE, "sim", "profiles", "dynamic", "h100-1-mig-off.yaml")
UUID0 = "GPU-0d100000-0000-4000-8000-000000000000"
MPS_ID = "share-" + hashlib.sha256(UUID0.encode()).hexdigest()[:16]  # dra-shares.c
HOOK = "gpu-device-plugin-cdi-hook"
GI, MI = 1 << 30, 1 << 20
UP_TO_DATE = "ResourceSlices of node %s are up to date" % NODE
SMI = """#!/bin/sh
# Records how it was called and answers 0.
{ printf 'nvidia-smi'; for a in "$@"; do printf ' %%s' "$a"; done; echo; } >> %s
"""
MPS_WRAP = """#!/bin/sh
# The simulator's stand-in, recording (the runner passes it only the MPS variables and PATH).
MOCK_MPS_LOG=%s exec %s "$@"
"""


def mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def mps_blocks(path):
    """MOCK_MPS_LOG as a list of blocks (lists of lines), one per invocation."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    out, cur = [], []
    for line in lines:
        if line.startswith("nvidia-cuda-mps-control"):
            cur = [line]
            out.append(cur)
        elif cur:
            cur.append(line)
    return out


class DraShares(MpsRunner, FakeApi, harness.PluginTestCase):
    PROFILE = PROFILE  # the node (test_dra_shares_mig.py's is another)

    def setUp(self):
        super().setUp()
        self.start_fake_api(FAKE, "v1.36.3")
        # short: <plugins>/gpu.nvidia.com/mps/share-<16 hex>/pipe/control within 108 bytes
        socks = scratch.socket_dir("gs-")
        self.addCleanup(scratch.remove, socks)
        self.registrar = os.path.join(socks, "reg")
        self.plugins = os.path.join(socks, "plugins")
        self.mps = os.path.join(self.plugins, DRIVER, "mps")
        self.daemon_dir = os.path.join(self.mps, MPS_ID)
        self.addCleanup(self.unmount_all)  # before the directories go (LIFO)
        self.addCleanup(self.kill_daemons)
        self.cdi = os.path.join(self.tmp, "cdi")
        # the host, and a driver root for the MPS stand-in
        self.driver = os.path.join(self.tmp, "driver")
        r = subprocess.run([harness.SIM_RENDER, "--profile", self.PROFILE, "--sysfs-root", self.sys_root,
                            "--proc-root", self.proc_root, "--dev-root", os.path.join(self.dev_root, "dev"),
                            "--driver-root", self.driver], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        os.mkfifo(self.ctl, 0o600)
        self.mps_log = os.path.join(self.tmp, "mps.log")
        self.smi_log = os.path.join(self.tmp, "smi.log")
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        for tool, text in (("nvidia-smi", SMI % self.smi_log),
                           ("nvidia-cuda-mps-control", MPS_WRAP % (
                               self.mps_log, os.path.join(self.driver, "usr", "bin", "nvidia-cuda-mps-control")))):
            path = os.path.join(self.bin, tool)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, stat.S_IRWXU)
        self.kl = Kubelet(self.registrar)
        self.addCleanup(self.kl.close)
        self.runner = None
        self.n = 0

    def unmount_all(self):
        with open("/proc/self/mounts") as f:
            for line in f:
                if line.split()[1].startswith(self.mps):
                    os.system("umount -l %s" % line.split()[1])

    def kill_daemons(self):
        """A stand-in daemon a failed test left running (its pid file)."""
        pid = os.path.join(self.daemon_dir, "pipe", "nvidia-cuda-mps-control.pid")
        try:
            with open(pid) as f:
                os.kill(int(f.read()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


    # -- the two processes
    def nvml_env(self):
        return {"MOCK_NVML_CONFIG": self.PROFILE}

    def start_dra(self):
        args = ["--dra", "--dra-consumable-capacity", "--node-name", NODE,
                "--kubeconfig", self.kubeconfig, "--kubelet-registrar-directory-path", self.registrar,
                "--kubelet-plugins-directory-path", self.plugins, "--cdi-root", self.cdi]
        p = self.start_plugin(args, extra_env=self.nvml_env())
        p.wait_log(UP_TO_DATE)
        self.kl.register()
        return p

    def runner_env(self):
        return self.nvml_env()

    def smi_calls(self):
        try:
            with open(self.smi_log) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def daemon_up(self):
        """Whether the stand-in daemon answers on its pipe directory."""
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(os.path.join(self.daemon_dir, "pipe", "control"))
            return True
        except OSError:
            return False
        finally:
            s.close()

    # -- claims
    def claim(self, results, asked):
        """A real allocated claim moved to this node, its results the scheduler's (device,
        shareID, consumedCapacity), its requests asking `asked` (capacity.requests)."""
        self.n += 1
        o = on_node(obj("resourceclaim-from-template-allocated"), name="share-%d" % self.n,
                    uid="5aa5e000-0000-4000-8000-%012d" % self.n)
        req = o["spec"]["devices"]["requests"][0]
        base = o["status"]["allocation"]["devices"]["results"][0]
        reqs, res = [], []
        for i, (r, a) in enumerate(zip(results, asked)):
            name = "gpu" if len(results) == 1 else "gpu-%d" % i
            q = json.loads(json.dumps(req))
            q["name"] = name
            q["exactly"]["capacity"] = {"requests": a}
            reqs.append(q)
            res.append(dict(base, request=name, **r))
        o["spec"]["devices"]["requests"] = reqs
        o["status"]["allocation"]["devices"]["results"] = res
        return self.load(o)

    def spec(self, uid):
        with open(os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)) as f:
            return json.load(f)

    def assertShares(self, res, o):
        """Prepared: one device per share, its CDI ID with the shareID, share_id echoed."""
        uid = o["metadata"]["uid"]
        self.assertEqual(res[uid]["error"], "", res)
        self.assertEqual(res[uid]["devices"], [
            (NODE, r["device"], [r["request"]],
             ["%s=%s-%s-%s" % (CDI_KIND, uid, r["device"], r["shareID"])], r["shareID"])
            for r in o["status"]["allocation"]["devices"]["results"]])

    def share_ten(self, pool):
        """Ten claims of 8Gi each, as the scheduler places them; the eleventh finds no room."""
        alloc, claims = [], []
        for _ in range(10):
            r = pool.allocate_results([('type == "gpu"', {"memory": "8Gi"})], alloc)
            self.assertEqual(len(r), 1, alloc)
            self.assertEqual((r[0]["device"], r[0]["consumedCapacity"]),
                             ("gpu-0", {"memory": "8Gi", "compute": "10"}))
            alloc += r
            claims.append(self.claim(r, [{"memory": "8Gi"}]))
        self.assertEqual(len({a["shareID"] for a in alloc}), 10)
        self.assertIsNone(pool.allocate_results([('type == "gpu"', {"memory": "8Gi"})], alloc))
        self.assertIsNone(pool.allocate_results([('type == "gpu"', {"memory": "1Gi"})], alloc))
        return alloc, claims

    # ---------------------------------------------------------------------------------

    def test_slice(self):
        self.start_dra()
        slices = self.slices()
        devs = [d for s in slices.values() for d in s["spec"].get("devices") or []]
        self.assertEqual([d["name"] for d in devs], ["gpu-0"])
        d = devs[0]
        self.assertIs(d["allowMultipleAllocations"], True)
        self.assertEqual(d["attributes"]["uuid"], {"string": UUID0})
        self.assertEqual(d["capacity"], {
            "memory": {"value": "80Gi", "requestPolicy": {
                "default": "80Gi", "validRange": {"min": "1Gi", "max": "80Gi", "step": "1Gi"}}},
            "compute": {"value": "100", "requestPolicy": {
                "default": "10", "validRange": {"min": "1", "max": "100", "step": "1"}}}})
        self.assertNotIn("consumesCounters", d)
        # the hook installed beside the plugin's state, a copy of the build's
        hook = os.path.join(self.plugins, DRIVER, "bin", HOOK)
        st = os.stat(hook)
        self.assertEqual(st.st_mode & 0o7777, 0o755)
        with open(hook, "rb") as a, open(os.path.join(os.path.dirname(harness.PLUGIN), HOOK), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_ten_shares_restart_two_in_a_claim(self):
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        alloc, claims = self.share_ten(pool)
        took = []
        answers = {}
        for o in claims:
            t = time.monotonic()
            res = self.kl.prepare(ref(o), share_id=True)
            took.append((time.monotonic() - t) * 1e3)
            self.assertShares(res, o)
            answers.update(res)
        print("\n10 shares prepared, one call each: first %.1f ms (the daemon started), then "
              "p50 %.1f ms, max %.1f ms" % (took[0], sorted(took[1:])[4], max(took[1:])))

        # One daemon for the GPU, EXCLUSIVE_PROCESS once; no daemon-wide limits.
        pipe, logd = os.path.join(self.daemon_dir, "pipe"), os.path.join(self.daemon_dir, "log")
        self.assertEqual(mps_blocks(self.mps_log), [[
            "nvidia-cuda-mps-control -d", "env CUDA_MPS_PIPE_DIRECTORY=" + pipe,
            "env CUDA_MPS_LOG_DIRECTORY=" + logd, "env CUDA_VISIBLE_DEVICES=" + UUID0, "exit 0"]])
        self.assertEqual(self.smi_calls(), ["nvidia-smi -i %s -c EXCLUSIVE_PROCESS" % UUID0])
        self.assertTrue(self.daemon_up())
        self.assertTrue(mounted(os.path.join(self.daemon_dir, "shm")))
        self.assertEqual([n for n in os.listdir(self.mps) if not n.startswith(".")], [MPS_ID])
        with open(os.path.join(self.daemon_dir, "desired.json")) as f:
            self.assertEqual(json.load(f), {"version": 1, "id": MPS_ID, "devices": [UUID0],
                                            "multiUser": False, "pinnedDeviceMemoryLimitMiB": {}})

        # A share's spec.
        o, share = claims[0], alloc[0]["shareID"]
        uid = o["metadata"]["uid"]
        spec = self.spec(uid)
        self.assertEqual(cdi_errors(spec), [], spec)
        self.assertEqual([d["name"] for d in spec["devices"]], ["%s-gpu-0-%s" % (uid, share)])
        edits = [spec.get("containerEdits", {})] + [d["containerEdits"] for d in spec["devices"]]
        env = [kv for e in edits for kv in e.get("env", [])]
        for kv in ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=10",
                   "CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"):
            self.assertEqual(env.count(kv), 1, (kv, env))
        opts = ["rw", "nosuid", "nodev", "bind"]
        mounts = [m for e in edits for m in e.get("mounts", [])]
        self.assertIn({"hostPath": os.path.join(self.daemon_dir, "shm"), "containerPath": "/dev/shm",
                       "options": opts}, mounts)
        self.assertIn({"hostPath": pipe, "containerPath": "/tmp/nvidia-mps", "options": opts}, mounts)
        hook = os.path.join(self.plugins, DRIVER, "bin", HOOK)
        self.assertEqual(spec["devices"][0]["containerEdits"]["hooks"], [
            {"hookName": "createRuntime", "path": hook, "timeout": 30,
             "args": [HOOK, "share-memory-limit", "--gpu", UUID0, "--bytes", str(8 * GI)]},
            {"hookName": "poststop", "path": hook, "timeout": 30,
             "args": [HOOK, "share-memory-limit", "--gpu", UUID0, "--reset"]}])
        self.assertIn("/dev/nvidia0", [n["path"] for e in edits for n in e.get("deviceNodes", [])])

        # The eleventh, forged past the scheduler: refused naming the numbers, no spec.
        forged = self.claim([{"device": "gpu-0", "shareID": str(uuid.uuid4()),
                              "consumedCapacity": {"memory": "8Gi", "compute": "10"}}], [{"memory": "8Gi"}])
        fuid, fsid = forged["metadata"]["uid"], forged["status"]["allocation"]["devices"]["results"][0]["shareID"]
        refused = ("device gpu-0 cannot hold share %s: its shares would take 90112 MiB of its 81920 MiB "
                   "and 110%% of its SMs" % fsid)
        err = self.kl.prepare(ref(forged))[fuid]["error"]
        self.assertIn(refused, err)
        self.assertFalse(os.path.exists(os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % fuid)))
        # ... and one that asks for more than a share may be (off the grid)
        odd = self.claim([{"device": "gpu-0", "shareID": str(uuid.uuid4()),
                           "consumedCapacity": {"memory": "1000Mi"}}], [{"memory": "1000Mi"}])
        err = self.kl.prepare(ref(odd))[odd["metadata"]["uid"]]["error"]
        self.assertIn("memory 1048576000 bytes is not what the device offers", err)

        # The plugin SIGKILLed and started again: the daemon runs on, the repeated Prepares
        # are answered from the checkpoint, the forged share still refused.
        mps_before, smi_before = mps_blocks(self.mps_log), self.smi_calls()
        self.plugin.signal(signal.SIGKILL)
        self.plugin.wait_exit()
        self.kl.close()
        self.start_dra()
        again = self.kl.prepare(*[ref(o) for o in claims], share_id=True)
        self.assertEqual(again, answers)
        self.assertIn(refused, self.kl.prepare(ref(forged))[fuid]["error"])
        time.sleep(0.3)
        self.assertEqual(mps_blocks(self.mps_log), mps_before)
        self.assertEqual(self.smi_calls(), smi_before)
        self.assertTrue(self.daemon_up())

        # Two unprepared (the daemon stays: eight shares left); two shares of gpu-0 in one
        # claim where they were: two CDI devices, the limits summed, the smaller percentage.
        gone = claims[:2]
        self.assertEqual(self.kl.unprepare(*[ref(o) for o in gone]),
                         {o["metadata"]["uid"]: "" for o in gone})
        self.assertTrue(self.daemon_up())
        self.assertEqual(len(mps_blocks(self.mps_log)), 1)
        alloc, claims = alloc[2:], claims[2:]
        asked = [{"memory": "4Gi", "compute": "5"}, {"memory": "12Gi"}]
        r = pool.allocate_results([('type == "gpu"', a) for a in asked], alloc)
        self.assertEqual([(x["device"], x["consumedCapacity"]) for x in r],
                         [("gpu-0", {"memory": "4Gi", "compute": "5"}),
                          ("gpu-0", {"memory": "12Gi", "compute": "10"})])
        both = self.claim(r, asked)
        res = self.kl.prepare(ref(both), share_id=True)
        self.assertShares(res, both)
        buid = both["metadata"]["uid"]
        spec = self.spec(buid)
        self.assertEqual([d["name"] for d in spec["devices"]],
                         ["%s-gpu-0-%s" % (buid, x["shareID"]) for x in r])
        env = spec["containerEdits"]["env"]
        self.assertIn("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=16384M", env)
        self.assertIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=5", env)
        self.assertEqual([d["containerEdits"]["hooks"][0]["args"][-1] for d in spec["devices"]],
                         [str(4 * GI), str(12 * GI)])
        claims.append(both)
        alloc += r
        self.assertIsNone(pool.allocate_results([('type == "gpu"', {"memory": "1Gi"})], alloc))

        # All unprepared: quit, DEFAULT, the directory gone.
        self.assertEqual(self.kl.unprepare(*[ref(o) for o in claims]),
                         {o["metadata"]["uid"]: "" for o in claims})
        blocks = mps_blocks(self.mps_log)
        self.assertEqual(len(blocks), 2, blocks)
        self.assertEqual(blocks[1][0], "nvidia-cuda-mps-control")
        self.assertIn("stdin quit", blocks[1])
        self.assertEqual(blocks[1][-1], "exit 0")
        self.assertEqual(self.smi_calls(), ["nvidia-smi -i %s -c EXCLUSIVE_PROCESS" % UUID0,
                                            "nvidia-smi -i %s -c DEFAULT" % UUID0])
        self.assertFalse(os.path.exists(self.daemon_dir))
        self.assertFalse(self.daemon_up())
        self.assertEqual(os.listdir(self.cdi), [])
        # the forged one fits now that nothing is held (a share of 8Gi), and goes again
        self.assertEqual(self.kl.prepare(ref(forged))[fuid]["error"], "")
        self.assertEqual(self.kl.unprepare(ref(forged)), {fuid: ""})
        self.assertFalse(os.path.exists(self.daemon_dir))

    def test_plugins_dir_of_36_bytes(self):
        """A plugins directory of 36 bytes (k0s's /var/lib/k0s/kubelet/plugins is 28,
        MicroK8s's 45): the shared GPU's daemon id is short ("share-" and 16 hex digits), so
        its socket <plugins>/gpu.nvidia.com/mps/<id>/pipe/control fits a Unix socket address
        (the GPU's UUID in the id, 47 bytes, left 27 for the directory: every share's
        Prepare failed "not yet ready")."""
        socks = scratch.socket_dir("gs-")
        self.addCleanup(scratch.remove, socks)
        self.plugins = os.path.join(socks, "kubelet-plugins-dir")  # 36 bytes here
        self.assertLessEqual(len(self.plugins), 78)
        self.mps = os.path.join(self.plugins, DRIVER, "mps")
        self.daemon_dir = os.path.join(self.mps, MPS_ID)
        self.addCleanup(self.unmount_all)
        self.addCleanup(self.kill_daemons)
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        r = pool.allocate_results([('type == "gpu"', {"memory": "8Gi"})])
        o = self.claim(r, [{"memory": "8Gi"}])
        res = self.kl.prepare(ref(o))
        self.assertEqual(res[o["metadata"]["uid"]]["error"], "", res)
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})

    def flat_around(self, rounds, what):
        """Threads and fds of the plugin as before, and RSS within 1 MiB, around rounds()
        (the runner and the plugin started, the kubelet's channel connected before and
        registered again after); rounds gets the scheduler stand-in's pool."""
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        self.kl.prepare()  # the channel connected
        before = attacklib.Snapshot(self.plugin.pid)
        print("\nbefore: %s" % before)
        rounds(pool)
        self.kl.close()
        self.kl.register()
        self.kl.prepare()
        after = attacklib.settled(self.plugin.pid, before)
        print("after: %s" % after)
        attacklib.assert_flat(self, before, after, what=what)
        if not after.sanitized:  # a sanitizer's quarantine holds what is freed
            self.assertLess(after.rss - before.rss, 1 << 20, "RSS grew by 1 MiB or more")

    def test_flat(self):
        """Threads, fds and RSS of the plugin flat around two rounds of ten shares."""
        def rounds(pool):
            for _ in range(2):
                _, claims = self.share_ten(pool)
                for o in claims:
                    self.assertEqual(self.kl.prepare(ref(o))[o["metadata"]["uid"]]["error"], "")
                self.assertEqual(self.kl.unprepare(*[ref(o) for o in claims]),
                                 {o["metadata"]["uid"]: "" for o in claims})
                self.assertFalse(os.path.exists(self.daemon_dir))
        self.flat_around(rounds, "GPU shares lifecycle")
        self.assertEqual(len([b for b in mps_blocks(self.mps_log) if b[0].endswith(" -d")]), 2)


class DraSharesV3(DraShares):
    """Driver r615 (the H100 profile with 615.44.01): each share its own MPS v3 namespace in
    the GPU's daemon (-p 3, server "shares"), its limits set on the namespace; the spec
    mounts only the namespace's directory; a client raising its own percentage still gets
    the namespace's; an Unprepare deletes its namespace, the last one stops the daemon."""

    # the 550 cases above are not repeated here
    test_slice = test_ten_shares_restart_two_in_a_claim = test_plugins_dir_of_36_bytes = None
    test_flat = None

    def setUp(self):
        super().setUp()
        with open(PROFILE) as f:
            text = f.read().replace("550.163.01", "615.44.01")
        self.profile = os.path.join(self.tmp, "h100-r615.yaml")
        with open(self.profile, "w") as f:
            f.write(text)

    def nvml_env(self):
        return {"MOCK_NVML_CONFIG": self.profile}

    def ns_of(self, o):
        r = o["status"]["allocation"]["devices"]["results"][0]
        key = "%s/%s" % (o["metadata"]["uid"], r["shareID"])
        return "s" + hashlib.sha256(key.encode()).hexdigest()[:16]  # dra-shares.c

    def probe(self, ns, nbytes):
        """alloc-probe through the namespace's directory, its own percentage raised to 100."""
        probe = os.path.join(harness.BUILD, "tests", "cdi-hook", "alloc-probe")
        dbg = os.path.join(self.tmp, "cuda-%s.log" % ns)
        # the namespace's directory under a short name, as a container sees it at
        # /tmp/nvidia-mps: its socket's host path may not fit sun_path (a long $TMPDIR)
        pipe = os.path.join(scratch.socket_dir("ns-"), "p")
        os.symlink(os.path.join(self.daemon_dir, "pipe", "shares", ns), pipe)
        env = dict(os.environ, LD_LIBRARY_PATH=harness.SIM_DIR + ":" + os.path.join(harness.BUILD, "sim", "cuda"),
                   MOCK_NVML_CONFIG=self.profile,
                   MOCK_DRIVER_DEV_ROOT=os.path.join(self.dev_root, "dev"), MOCK_CUDA_MPS_DEBUG=dbg,
                   CUDA_MPS_PIPE_DIRECTORY=pipe,
                   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="100")
        r = subprocess.run([probe, str(nbytes)], capture_output=True, text=True, env=env)
        with open(dbg) as f:
            return r.returncode, r.stdout, f.read()

    def test_two_shares_of_one_device_in_one_claim(self):
        """One claim, two shares of one GPU (two requests): two CDI devices, each mounting
        its own share's namespace (not both the first's)."""
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        asked = [{"memory": "8Gi"}, {"memory": "16Gi", "compute": "30"}]
        r = pool.allocate_results([('type == "gpu"', a) for a in asked], [])
        self.assertEqual({x["device"] for x in r}, {"gpu-0"}, r)
        o = self.claim(r, asked)
        self.assertShares(self.kl.prepare(ref(o), share_id=True), o)
        uid = o["metadata"]["uid"]
        spec = self.spec(uid)
        pipes = {}
        for d in spec["devices"]:
            pipes[d["name"]] = [m["hostPath"] for m in d["containerEdits"].get("mounts", [])
                                if m["containerPath"] == "/tmp/nvidia-mps"]
        want = {}
        for x in r:
            ns = "s" + hashlib.sha256(("%s/%s" % (uid, x["shareID"])).encode()).hexdigest()[:16]
            want["%s-%s-%s" % (uid, x["device"], x["shareID"])] = [
                os.path.join(self.daemon_dir, "pipe", "shares", ns)]
        self.assertEqual(pipes, want)
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})

    def test_two_shares_two_namespaces(self):
        self.start_runner()
        self.start_dra()
        pool = Pool(list(self.slices().values()))
        alloc, claims = [], []
        for asked in ({"memory": "8Gi"}, {"memory": "16Gi", "compute": "30"}):
            r = pool.allocate_results([('type == "gpu"', asked)], alloc)
            alloc += r
            claims.append(self.claim(r, [asked]))
        for o in claims:
            self.assertShares(self.kl.prepare(ref(o), share_id=True), o)
        ns = [self.ns_of(o) for o in claims]
        blocks = mps_blocks(self.mps_log)
        self.assertEqual(blocks[0][0], "nvidia-cuda-mps-control -d -p 3")
        sent = [line[len("stdin "):] for b in blocks for line in b if line.startswith("stdin ")]
        self.assertEqual(sent[:2], ["server create shares --allowed-devices=" + UUID0,
                                    "server list shares --format=csv,noheader"])
        for n, (mib, pct) in zip(ns, ((8192, 10), (16384, 30))):
            self.assertEqual([c for c in sent if " %s " % n in c or c.endswith(" " + n)], [
                "namespace create %s --server=shares" % n,
                "namespace list %s --server=shares --format=csv,noheader" % n,
                "namespace set %s --server=shares --pinned-memory-limit=%dM "
                "--active-thread-percentage=%d" % (n, mib, pct),
                "namespace list %s --server=shares --format=csv,noheader" % n])
        self.assertTrue(all(b[-1] == "exit 0" for b in blocks[1:]), blocks)
        with open(os.path.join(self.daemon_dir, "desired.json")) as f:
            self.assertEqual(json.load(f)["protocol"], 3)
        # the spec: only the namespace's directory, at /tmp/nvidia-mps
        spec = self.spec(claims[0]["metadata"]["uid"])
        edits = [spec.get("containerEdits", {})] + [d["containerEdits"] for d in spec["devices"]]
        pipes = [m["hostPath"] for e in edits for m in e.get("mounts", [])
                 if m["containerPath"] == "/tmp/nvidia-mps"]
        self.assertEqual(pipes, [os.path.join(self.daemon_dir, "pipe", "shares", ns[0])])
        # a client: the namespace's percentage whatever its own says, its memory the share's
        rc, out, dbg = self.probe(ns[0], 9 * GI)
        self.assertEqual(rc, 3, out)
        self.assertIn("namespace %s" % ns[0], dbg)
        self.assertIn("pinned %d thread 10.0" % (8 * GI), dbg)
        rc, out, dbg = self.probe(ns[1], 9 * GI)
        self.assertEqual(rc, 0, out)
        self.assertIn("pinned %d thread 30.0" % (16 * GI), dbg)
        # the first unprepared: its namespace deleted, the daemon stays
        uid0 = claims[0]["metadata"]["uid"]
        self.assertEqual(self.kl.unprepare(ref(claims[0])), {uid0: ""})
        sent = [line[len("stdin "):] for b in mps_blocks(self.mps_log) for line in b
                if line.startswith("stdin ")]
        self.assertEqual(sent[-1], "namespace delete %s --server=shares --force" % ns[0])
        self.assertFalse(os.path.exists(os.path.join(self.daemon_dir, "pipe", "shares", ns[0])))
        self.assertTrue(os.path.exists(os.path.join(self.daemon_dir, "pipe", "shares", ns[1], "control")))
        # the last: the daemon stops, its directory goes
        uid1 = claims[1]["metadata"]["uid"]
        self.assertEqual(self.kl.unprepare(ref(claims[1])), {uid1: ""})
        self.assertIn("stdin quit", mps_blocks(self.mps_log)[-1])
        self.assertFalse(os.path.exists(self.daemon_dir))


if __name__ == "__main__":
    FAKE = sys.argv.pop(1)
    harness.main()
