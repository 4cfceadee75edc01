#!/usr/bin/python3
"""DynamicMIG (issue 31) end to end: the real binary, `serve --dra` with
FEATURE_GATES=DynamicMIG=true, on a simulated host whose MIG state is shared with this test
(MOCK_NVML_STATE; the capability files under the rendered --proc-root / --dev-root), against
the fake API server of tests/kube at 1.36.3 (it validates the partitionable fields by the
1.36 rules and serves /version), with the scheduler played by dra_scheduler.py (the 1.36
allocator's first fit over counters) and the kubelet by dra_kubelet.py.

- the pool NVIDIA publishes: split layout at 1.36 (a counters-only slice, then the devices),
  combined at 1.34, placements withdrawn when the API server drops the counters; 8 GPUs in
  9 slices (publish time printed);
- claims the scheduler stand-in allocates prepared: seven 1g.10gb on an H100, the 8th finds
  no fit until one is unprepared; a 3g + 2g + 1g mix; the full GPU neither allocated nor
  prepared while a MIG device is; MIG mode off again after the last;
- all seven 1g.5gb of an A100 prepared and unprepared in random order, the simulator's state
  checked after every step; overlapping placements forged past the scheduler refused;
- restarts: a killed plugin answers from its checkpoint; someone else's MIG device is never
  destroyed; a killed prepare's orphan is destroyed at start;
- threads, fds and RSS flat around the lifecycle.

usage: test_dra_mig.py <fake-apiserver>
       test_dra_mig.py --nvml-probe JSON   (internal: one NVML query/change in this process)"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "attack"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attacklib  # noqa: E402
from kubetest import scratch  # noqa: E402
from dra_kubelet import (FakeApi, CDI_KIND, DRIVER, HEALTHY, NODE, UNHEALTHY, Kubelet, obj,  # noqa: E402
                         on_node, ref)
from dra_scheduler import Pool  # noqa: E402

FAKE = None
DYNAMIC = os.path.join(harness.SOURCE, "sim", "profiles", "dynamic")
UP_TO_DATE = "ResourceSlices of node %s are up to date" % NODE
# A recoverable Xid clears within a second (as test_dra_serve.py)
FAST_HEALTH = {"GDP_HEALTH_QUIET_PERIOD": "200ms", "GDP_HEALTH_MAX_QUIET_PERIOD": "800ms",
               "GDP_HEALTH_FLAP_WINDOW": "1m", "GDP_HEALTH_WAIT_TIMEOUT": "100ms"}

# NVIDIA's H100-80GB placements (dynamic-mig-mps-capacity.md §1.5): profile, GI profile id,
# starts, size, SM, CE, DEC, JPEG, OFA
H100 = [("1g.10gb", 19, range(7), 1, 16, 1, 1, 1, 0), ("1g.10gb+me", 20, range(7), 1, 16, 1, 1, 1, 1),
        ("1g.20gb", 15, (0, 2, 4, 6), 2, 26, 1, 1, 1, 0), ("2g.20gb", 14, (0, 2, 4), 2, 32, 2, 2, 2, 0),
        ("3g.40gb", 9, (0, 4), 4, 60, 3, 3, 3, 0), ("4g.40gb", 5, (0,), 4, 64, 4, 4, 4, 0),
        ("7g.80gb", 0, (0,), 8, 132, 8, 7, 7, 1)]


def dev_name(gpu, profile, gid, start):
    return "gpu-%d-mig-%s-%d-%d" % (gpu, re.sub(r"[^a-z0-9-]", "-", profile.replace(".", "").lower()),
                                     gid, start)


# ---- the simulated NVML, from another process (the library reads its profile once per
# process: one subprocess per query)

NVML_PROBE = r'''
import ctypes, json, os, sys
lib = ctypes.CDLL(os.path.join(os.environ["LD_LIBRARY_PATH"], "libnvidia-ml.so.1"))
U = ctypes.c_uint
def ok(r, what):
    if r != 0:
        raise SystemExit("%s: NVML error %d" % (what, r))
ok(lib.nvmlInit_v2(), "init")
out = {}
cmd = json.loads(sys.argv[1])
n = U()
ok(lib.nvmlDeviceGetCount_v2(ctypes.byref(n)), "count")
gpus = []
for i in range(n.value):
    d = ctypes.c_void_p()
    ok(lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(d)), "handle")
    gpus.append(d)
class GiInfo(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("id", U), ("profileId", U), ("start", U), ("size", U)]
if cmd["op"] == "create":
    d = gpus[cmd["gpu"]]
    cur, pend, status = U(), U(), U()
    ok(lib.nvmlDeviceGetMigMode(d, ctypes.byref(cur), ctypes.byref(pend)), "MIG mode")
    if not cur.value:  # Hopper: at once (Ampere would need a reset)
        ok(lib.nvmlDeviceSetMigMode(d, 1, ctypes.byref(status)), "MIG mode on")
    info = (U * 12)()
    ok(lib.nvmlDeviceGetGpuInstanceProfileInfo(d, cmd["index"], info), "GI profile info")
    pl = (U * 2)(cmd["start"], cmd["size"])
    gi = ctypes.c_void_p()
    ok(lib.nvmlDeviceCreateGpuInstanceWithPlacement(d, info[0], pl, ctypes.byref(gi)), "create GI")
    ci_info = (U * 9)()
    ok(lib.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, cmd.get("ci_index", cmd["index"]), 0, ci_info),
       "CI profile info")
    ci = ctypes.c_void_p()
    ok(lib.nvmlGpuInstanceCreateComputeInstance(gi, ci_info[0], ctypes.byref(ci)), "create CI")
state = []
for i, d in enumerate(gpus):
    cur, pend = U(), U()
    r = lib.nvmlDeviceGetMigMode(d, ctypes.byref(cur), ctypes.byref(pend))
    g = {"mode": cur.value if r == 0 else None, "migs": []}
    mx = U()
    if r == 0 and lib.nvmlDeviceGetMaxMigDeviceCount(d, ctypes.byref(mx)) == 0:
        for k in range(mx.value):
            m = ctypes.c_void_p()
            if lib.nvmlDeviceGetMigDeviceHandleByIndex(d, k, ctypes.byref(m)) != 0:
                continue
            buf = ctypes.create_string_buffer(96)
            gid, cid = U(), U()
            ok(lib.nvmlDeviceGetUUID(m, buf, 96), "uuid")
            ok(lib.nvmlDeviceGetGpuInstanceId(m, ctypes.byref(gid)), "GI id")
            ok(lib.nvmlDeviceGetComputeInstanceId(m, ctypes.byref(cid)), "CI id")
            gi = ctypes.c_void_p()
            ok(lib.nvmlDeviceGetGpuInstanceById(d, gid, ctypes.byref(gi)), "GI by id")
            info = GiInfo()
            ok(lib.nvmlGpuInstanceGetInfo(gi, ctypes.byref(info)), "GI info")
            g["migs"].append({"uuid": buf.value.decode(), "gi": gid.value, "ci": cid.value,
                              "profileId": info.profileId, "start": info.start, "size": info.size})
    state.append(g)
print(json.dumps(state))
'''



def asan_preload():
    """A sanitizer build's simulator needs its runtime first in the Python probe that loads
    it (ASan refuses to start otherwise)."""
    with open(os.path.join(harness.SIM_DIR, "libnvidia-ml.so.1"), "rb") as f:
        if b"libasan" not in f.read():
            return {}
    lib = subprocess.run(["cc", "-print-file-name=libasan.so"], capture_output=True,
                         text=True).stdout.strip()
    return {"LD_PRELOAD": lib, "ASAN_OPTIONS": "detect_leaks=0"}


class DraMig(FakeApi, harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.start_fake_api(FAKE, "v1.36.3")
        socks = scratch.socket_dir("gdp-mig-")
        self.addCleanup(scratch.remove, socks)
        self.registrar = os.path.join(socks, "plugins_registry")
        self.plugins = os.path.join(socks, "plugins")
        self.cdi = os.path.join(self.tmp, "cdi")
        self.state = os.path.join(self.tmp, "nvml-state")
        self.kl = Kubelet(self.registrar)
        self.addCleanup(self.kl.close)
        self.claims = 0

    # -- the host
    def host(self, profile, path=None):
        self.profile_file = path or os.path.join(DYNAMIC, profile + ".yaml")
        r = subprocess.run([harness.SIM_RENDER, "--profile", self.profile_file,
                            "--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                            "--dev-root", os.path.join(self.dev_root, "dev")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        if not os.path.exists(self.ctl):
            os.mkfifo(self.ctl, 0o600)
        self.profile = None

    def nvml_env(self):
        return {"MOCK_NVML_CONFIG": self.profile_file, "MOCK_NVML_STATE": self.state,
                "MOCK_NVML_PROC_ROOT": self.proc_root,
                "MOCK_NVML_DEV_ROOT": os.path.join(self.dev_root, "dev")}

    def nvml(self, **cmd):
        """The host's MIG state as NVML reports it to another process, after cmd (op
        "create": gpu, index (GI profile index), start, size; MIG mode switched on first): [{mode, migs: [{uuid, gi,
        ci, profileId, start, size}]}] per GPU."""
        env = dict(os.environ, LD_LIBRARY_PATH=harness.SIM_DIR, **self.nvml_env(), **asan_preload())
        env.pop("MOCK_NVML_CONTROL", None)
        r = subprocess.run([sys.executable, "-c", NVML_PROBE, json.dumps(dict(cmd, op=cmd.get("op", "list")))],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def live(self, gpu=0):
        """{(GI profile id, start): mig} of one GPU."""
        return {(m["profileId"], m["start"]): m for m in self.nvml()[gpu]["migs"]}

    # -- fake API server

    def pool(self):
        return Pool(list(self.slices().values()))

    # -- the plugin
    def dra_args(self):
        return ["--dra", "--node-name", NODE, "--kubeconfig", self.kubeconfig,
                "--kubelet-registrar-directory-path", self.registrar,
                "--kubelet-plugins-directory-path", self.plugins, "--cdi-root", self.cdi]

    def start_dra(self, wait=UP_TO_DATE):
        env = dict(self.nvml_env(), FEATURE_GATES="DynamicMIG=true",
                   MOCK_NVML_CONTROL_ACK=os.path.join(self.tmp, "nvml.ack"), **FAST_HEALTH)
        p = self.start_plugin(self.dra_args(), extra_env=env)
        if wait:
            p.wait_log(wait)
        return p

    def control(self, line):
        """A control command to the plugin's simulated NVML, returned once applied."""
        ack = os.path.join(self.tmp, "nvml.ack")
        n = 0
        if os.path.exists(ack):
            with open(ack) as f:
                n = f.read().count(line + "\n")
        self.inject(line)
        deadline = time.monotonic() + harness.TIMEOUT
        while True:
            if os.path.exists(ack):
                with open(ack) as f:
                    if f.read().count(line + "\n") > n:
                        return
            self.assertLess(time.monotonic(), deadline, "control command %r not applied" % line)
            time.sleep(0.005)

    def kill_plugin(self):
        self.plugin.signal(signal.SIGKILL)
        self.plugin.wait_exit()
        self.kl.close()

    # -- claims
    def claim(self, *devices):
        """A real allocated claim (resourceclaim-from-template-allocated, or the two-GPU one
        for two devices) moved to this node, its results the devices given."""
        self.claims += 1
        base = "resourceclaim-from-template-allocated" if len(devices) == 1 else \
            "resourceclaim-two-gpus-allocated"
        o = on_node(obj(base), name="mig-claim-%d" % self.claims,
                    uid="aaaaaaaa-0000-4000-8000-%012d" % self.claims)
        results = o["status"]["allocation"]["devices"]["results"]
        self.assertEqual(len(results), len(devices))
        for r, d in zip(results, devices):
            r["device"] = d
        return self.load(o)

    def spec_path(self, uid):
        return os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)

    def assertMigPrepared(self, res, o, live, gpu=0):
        """Prepared: the CDI IDs, and the spec's nodes: the parent's and the two caps nodes
        of the MIG device now live at that placement (minors from the GI/CI ids)."""
        uid = o["metadata"]["uid"]
        self.assertEqual(res[uid]["error"], "", res)
        results = o["status"]["allocation"]["devices"]["results"]
        self.assertEqual(res[uid]["devices"], [
            (NODE, r["device"], [r["request"]], ["%s=%s-%s" % (CDI_KIND, uid, r["device"])])
            for r in results])
        with open(self.spec_path(uid)) as f:
            spec = json.load(f)
        for d, r in zip(spec["devices"], results):
            self.assertEqual(d["name"], "%s-%s" % (uid, r["device"]))
            _, gid, start = r["device"].rsplit("-", 2)
            m = live[(int(gid), int(start))]
            want = ["/dev/nvidia%d" % gpu,
                    "/dev/nvidia-caps/nvidia-cap%d" % (3 + gpu * 135 + m["gi"] * 9),
                    "/dev/nvidia-caps/nvidia-cap%d" % (3 + gpu * 135 + m["gi"] * 9 + 1 + m["ci"])]
            self.assertEqual([n["path"] for n in d["containerEdits"]["deviceNodes"]], want, d)
        return spec

    def prepare_ok(self, o):
        res = self.kl.prepare(ref(o))
        self.assertEqual(res[o["metadata"]["uid"]]["error"], "", res)
        return res

    # ---------------------------------------------------------------------------------

    def test_publish_h100_split(self):
        """1.36: two slices, the counters first; NVIDIA's 26 devices, names, attributes,
        capacities and consumption (§1.5's H100 example)."""
        self.host("h100-1-mig-off")
        self.start_dra()
        self.plugin.wait_log("API server v1.36.3: shared counters in counters-only slices")
        slices = self.slices()
        names = sorted(slices)
        self.assertEqual(len(names), 2, names)
        s0, s1 = slices[names[0]]["spec"], slices[names[1]]["spec"]
        for s in (s0, s1):
            self.assertEqual(s["pool"], {"name": NODE, "generation": 1, "resourceSliceCount": 2})
            self.assertEqual(s["nodeName"], NODE)
        self.assertNotIn("devices", s0)
        self.assertNotIn("sharedCounters", s1)
        self.assertEqual([c["name"] for c in s0["sharedCounters"]], ["gpu-0-counter-set"])
        counters = s0["sharedCounters"][0]["counters"]
        want = {"multiprocessors": "132", "copy-engines": "8", "decoders": "7", "encoders": "0",
                "jpeg-engines": "7", "ofa-engines": "1"}
        want.update({"memory-slice-%d" % i: "1" for i in range(8)})
        mem = counters["memory"]["value"]
        self.assertRegex(mem, r"^\d+Mi$")
        self.assertEqual({k: v["value"] for k, v in counters.items() if k != "memory"}, want)

        devs = s1["devices"]
        names = [d["name"] for d in devs]
        self.assertEqual(names, sorted(names, key=lambda n: n.encode()))
        expect = ["gpu-0"] + [dev_name(0, p, gid, st) for p, gid, starts, *_ in H100 for st in starts]
        self.assertEqual(sorted(names), sorted(expect))
        self.assertEqual(len(devs), 26)
        by = {d["name"]: d for d in devs}
        full = by["gpu-0"]
        self.assertEqual(full["attributes"]["type"], {"string": "gpu"})
        self.assertEqual(full["consumesCounters"], [{"counterSet": "gpu-0-counter-set",
                                                     "counters": counters}])
        self.assertEqual({k: v["value"] for k, v in full["capacity"].items()},
                         {"multiprocessors": "132", "copyEngines": "8", "decoders": "7", "encoders": "0",
                          "jpegEngines": "7", "ofaEngines": "1", "memory": mem})
        uuid = full["attributes"]["uuid"]["string"]
        for p, gid, starts, size, sm, ce, dec, jpeg, ofa in H100:
            for st in starts:
                d = by[dev_name(0, p, gid, st)]
                a = d["attributes"]
                self.assertEqual((a["type"], a["profile"], a["parentUUID"]),
                                 ({"string": "mig"}, {"string": p}, {"string": uuid}))
                self.assertNotIn("uuid", a)
                for k in ("productName", "brand", "architecture", "cudaComputeCapability",
                          "driverVersion", "cudaDriverVersion", "resource.kubernetes.io/pciBusID"):
                    self.assertIn(k, a, d["name"])
                cap = {k: v["value"] for k, v in d["capacity"].items()}
                self.assertEqual({k: v for k, v in cap.items() if k != "memory"},
                                 {"multiprocessors": str(sm), "copyEngines": str(ce),
                                  "decoders": str(dec), "encoders": "0", "jpegEngines": str(jpeg),
                                  "ofaEngines": str(ofa)}, d["name"])
                use = d["consumesCounters"]
                self.assertEqual(len(use), 1)
                self.assertEqual(use[0]["counterSet"], "gpu-0-counter-set")
                c = {k: v["value"] for k, v in use[0]["counters"].items()}
                w = {"multiprocessors": str(sm), "copy-engines": str(ce), "decoders": str(dec),
                     "encoders": "0", "jpeg-engines": str(jpeg), "ofa-engines": str(ofa),
                     "memory": cap["memory"]}
                w.update({"memory-slice-%d" % i: "1" for i in range(st, st + size)})
                self.assertEqual(c, w, d["name"])
        self.pool()  # valid under the scheduler's pool rules
        # nothing carved by publishing
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])

    def test_publish_combined_before_135(self):
        self.cmd("version v1.34.9")
        self.host("h100-1-mig-off")
        self.start_dra()
        self.plugin.wait_log("API server v1.34.9: shared counters in the slice of their devices")
        slices = self.slices()
        self.assertEqual(len(slices), 1, sorted(slices))
        s = next(iter(slices.values()))["spec"]
        self.assertEqual(s["pool"]["resourceSliceCount"], 1)
        self.assertEqual([c["name"] for c in s["sharedCounters"]], ["gpu-0-counter-set"])
        self.assertEqual(len(s["devices"]), 26)
        self.assertEqual(self.pool().allocate(['profile == "1g.10gb"']), ["gpu-0-mig-1g10gb-19-0"])

    def test_combined_layout_refused_at_136(self):
        """The fake API server's 1.35 rule, checked on its own: one slice with both."""
        self.cmd("version v1.34.9")
        self.host("h100-1-mig-off")
        self.start_dra()
        s = next(iter(self.slices().values()))
        self.plugin.signal(signal.SIGTERM)
        self.assertEqual(self.plugin.wait_exit(), 0)
        self.cmd("version v1.36.3")
        self.cmd("rs-delete all")
        s["metadata"] = {"name": "other"}
        r = kt_request(self.kubeconfig, "POST", "/apis/resource.k8s.io/v1/resourceslices", s)
        self.assertEqual(r[0], 422, r)
        self.assertEqual(json.loads(r[1])["message"],
                         'ResourceSlice.resource.k8s.io "other" is invalid: spec: Invalid value: "": '
                         'only one of `sharedCounters` or `devices` is allowed')

    def test_partitionable_off_withdraws_placements(self):
        self.cmd("rs-partitionable off")
        self.host("h100-1-mig-off")
        self.start_dra(wait=None)
        self.plugin.wait_log("The API server drops shared counters (DRAPartitionableDevices is off)")
        self.plugin.wait_log(UP_TO_DATE)
        deadline = time.monotonic() + harness.TIMEOUT
        while True:
            devs = [d for s in self.slices().values() for d in s["spec"].get("devices") or []]
            if [d["name"] for d in devs] == ["gpu-0"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual([d["name"] for d in devs], ["gpu-0"])
        self.assertNotIn("consumesCounters", devs[0])
        for s in self.slices().values():
            self.assertNotIn("sharedCounters", s["spec"])
        errors = [l for l in self.plugin.stderr.text().splitlines() if "drops shared counters" in l]
        self.assertEqual(len(errors), 1, errors)
        # the whole GPU is allocatable as a plain device, and prepared as one
        self.kl.register()
        self.assertEqual(self.pool().allocate(['type == "gpu"']), ["gpu-0"])
        o = self.claim("gpu-0")
        self.prepare_ok(o)
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})

    def test_publish_8_h100(self):
        self.host("h100-8-mig-off")
        t0 = time.monotonic()
        self.start_dra(wait=None)
        self.plugin.wait_log(UP_TO_DATE)
        took = time.monotonic() - t0
        print("\n8xH100 pool published %.1f ms after start (process start included)" % (took * 1000))
        slices = self.slices()
        self.assertEqual(len(slices), 9, sorted(slices))
        pool = self.pool()
        self.assertEqual(len(pool.counters), 8)
        self.assertEqual(len(pool.devices), 8 * 26)
        counters_only = [s for s in slices.values() if "sharedCounters" in s["spec"]]
        self.assertEqual(len(counters_only), 1)
        self.assertEqual(len(counters_only[0]["spec"]["sharedCounters"]), 8)

    def test_ten_gpus(self):
        """10 H100s, past NVIDIA's 8 counter sets in one slice: the sets spread over two
        counters-only slices (8 + 2), every slice valid under the 1.36 rules, the pool valid
        under the scheduler's; a placement of the tenth GPU prepared."""
        bus = ["0000:%02x:00.0" % (0x18 + 0x10 * i) for i in range(10)]
        text = ['system: {driver_version: "550.163.01", cuda_version_major: 12, cuda_version_minor: 4}',
                "device_defaults:", '  name: "NVIDIA H100 80GB HBM3"', "  brand: nvidia",
                "  architecture: hopper", "  compute_capability: {major: 9, minor: 0}",
                "  memory: {total_bytes: 85899345920, reserved_bytes: 536870912}",
                "  pci: {device_id: 0x233010DE, subsystem_id: 0x16C110DE}",
                "  mig: {mode_current: disabled}", "devices:"]
        text += ['  - {uuid: GPU-0d10000a-0000-4000-8000-%012d, pci: {bus_id: "%s"}, minor_number: %d}'
                 % (i, b, i) for i, b in enumerate(bus)]
        text += ["pcie_topology:", "  root_complexes:", "    - numa_node: 0",
                 "      devices: [%s]" % ", ".join('"%s"' % b for b in bus)]
        path = os.path.join(self.tmp, "h100-10.yaml")
        with open(path, "w") as f:
            f.write("\n".join(text) + "\n")
        self.host(None, path)
        self.start_dra()
        slices = self.slices()
        self.assertEqual(len(slices), 12, sorted(slices))
        sets = [len(s["spec"]["sharedCounters"]) for _, s in sorted(slices.items())
                if "sharedCounters" in s["spec"]]
        self.assertEqual(sorted(sets), [2, 8])
        pool = self.pool()
        self.assertEqual(sorted(pool.counters), sorted("gpu-%d-counter-set" % i for i in range(10)))
        self.assertEqual(len(pool.devices), 260)
        self.kl.register()
        devs = pool.allocate(['profile == "1g.10gb" && parentUUID == "GPU-0d10000a-0000-4000-8000-000000000009"'])
        self.assertEqual(devs, ["gpu-9-mig-1g10gb-19-0"])
        o = self.claim(*devs)
        res = self.prepare_ok(o)
        state = self.nvml()
        self.assertEqual([len(g["migs"]) for g in state], [0] * 9 + [1])
        self.assertMigPrepared(res, o, self.live(9), gpu=9)
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})
        self.assertEqual(self.nvml()[9], {"mode": 0, "migs": []})

    def test_ampere_mig_off_is_a_plain_gpu(self):
        """An A100 with MIG mode off takes no part (its switch needs a reset): the full GPU
        as a plain device (no consumesCounters), no placement, no counter set; prepared
        whole, nothing carved."""
        with open(os.path.join(DYNAMIC, "a100-40gb-mig-empty.yaml")) as f:
            text = f.read()
        self.assertIn("mode_current: enabled", text)
        path = os.path.join(self.tmp, "a100-mig-off.yaml")
        with open(path, "w") as f:
            f.write(text.replace("mode_current: enabled", "mode_current: disabled"))
        self.host(None, path)
        self.start_dra()
        devs = [d for s in self.slices().values() for d in s["spec"].get("devices") or []]
        self.assertEqual([d["name"] for d in devs], ["gpu-0"])
        self.assertNotIn("consumesCounters", devs[0])
        for s in self.slices().values():
            self.assertFalse(s["spec"].get("sharedCounters"), s)
        self.kl.register()
        o = self.claim(*self.pool().allocate(['type == "gpu"']))
        self.prepare_ok(o)
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})

    def test_h100_lifecycle(self):
        self.host("h100-1-mig-off")
        self.start_dra()
        self.kl.register()
        pool = self.pool()
        before = attacklib.Snapshot(self.plugin.pid)
        print("\nbefore: %s" % before)
        for rnd in range(2):
            self.h100_round(pool, rnd)
        self.kl.close()
        self.kl.register()
        after = attacklib.settled(self.plugin.pid, before)
        print("after: %s" % after)
        attacklib.assert_flat(self, before, after, what="DynamicMIG lifecycle")

    def h100_round(self, pool, rnd):
        allocated, claims = [], []
        for i in range(7):
            devs = pool.allocate(['profile == "1g.10gb"'], allocated)
            self.assertEqual(devs, ["gpu-0-mig-1g10gb-19-%d" % i])
            allocated += devs
            claims.append(self.claim(*devs))
        t = time.monotonic()
        res = self.kl.prepare(*[ref(o) for o in claims])
        if rnd == 0:
            print("7 claims prepared in one call in %.1f ms" % ((time.monotonic() - t) * 1000))
        live = self.live()
        self.assertEqual(sorted(live), [(19, i) for i in range(7)])
        self.assertEqual(self.nvml()[0]["mode"], 1)
        for o in claims:
            self.assertMigPrepared(res, o, live)
        self.assertIsNone(pool.allocate(['profile == "1g.10gb"'], allocated))  # the 8th waits
        # one deleted: the 8th fits where it was
        gone = claims.pop(3)
        self.assertEqual(self.kl.unprepare(ref(gone)), {gone["metadata"]["uid"]: ""})
        self.assertFalse(os.path.exists(self.spec_path(gone["metadata"]["uid"])))
        allocated.remove("gpu-0-mig-1g10gb-19-3")
        self.assertEqual(sorted(self.live()), [(19, i) for i in range(7) if i != 3])
        devs = pool.allocate(['profile == "1g.10gb"'], allocated)
        self.assertEqual(devs, ["gpu-0-mig-1g10gb-19-3"])
        eighth = self.claim(*devs)
        allocated += devs
        claims.append(eighth)
        res = self.prepare_ok(eighth)
        self.assertMigPrepared(res, eighth, self.live())
        # the full GPU: no fit while any MIG device is allocated; forged, refused
        self.assertIsNone(pool.allocate(['type == "gpu"'], allocated))
        forged = self.claim("gpu-0")
        err = self.kl.prepare(ref(forged))[forged["metadata"]["uid"]]["error"]
        self.assertIn("gpu-0", err)
        self.assertIn("already prepared for claim", err)
        self.assertFalse(os.path.exists(self.spec_path(forged["metadata"]["uid"])))
        self.assertEqual(self.kl.unprepare(*[ref(o) for o in claims]),
                         {o["metadata"]["uid"]: "" for o in claims})
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])  # MIG mode off again (Hopper)
        self.assertEqual(os.listdir(self.cdi), [])

        # a 3g + 2g + 1g mix, one claim each, as the scheduler places them
        allocated, claims = [], []
        for profile, want in (("3g.40gb", "gpu-0-mig-3g40gb-9-0"), ("2g.20gb", "gpu-0-mig-2g20gb-14-4"),
                              ("1g.10gb", "gpu-0-mig-1g10gb-19-6")):
            devs = pool.allocate(['profile == "%s"' % profile], allocated)
            self.assertEqual(devs, [want])
            allocated += devs
            claims.append(self.claim(*devs))
        res = self.kl.prepare(*[ref(o) for o in claims])
        live = self.live()
        self.assertEqual(sorted(live), [(9, 0), (14, 4), (19, 6)])
        for o in claims:
            self.assertMigPrepared(res, o, live)
        self.assertIsNone(pool.allocate(['type == "gpu"'], allocated))
        self.assertIsNone(pool.allocate(['profile == "2g.20gb"'], allocated))
        # a full-GPU claim forged while a MIG claim is prepared: refused
        err = self.kl.prepare(ref(forged))[forged["metadata"]["uid"]]["error"]
        self.assertIn("already prepared for claim", err)
        self.assertEqual(self.kl.unprepare(*[ref(o) for o in claims]),
                         {o["metadata"]["uid"]: "" for o in claims})
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        # with no MIG device left the full GPU fits and prepares (MIG mode stays off)
        self.assertEqual(pool.allocate(['type == "gpu"']), ["gpu-0"])
        self.prepare_ok(forged)
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertIsNone(pool.allocate(['profile == "1g.10gb"'], ["gpu-0"]))
        self.assertEqual(self.kl.unprepare(ref(forged)), {forged["metadata"]["uid"]: ""})
        self.assertEqual(os.listdir(self.cdi), [])

    def test_a100_all_1g_random_order(self):
        """All seven 1g.5gb placements of an A100 (MIG on, no full GPU) prepared and
        unprepared in random order, NVML's state checked after every step."""
        self.host("a100-40gb-mig-empty")
        self.start_dra()
        self.kl.register()
        pool = self.pool()
        self.assertNotIn("gpu-0", pool.by_name)
        seed = int(os.environ.get("GDP_TEST_SEED", random.randrange(1 << 30)))
        print("\nseed %d" % seed)
        rng = random.Random(seed)
        allocated = []
        names = ["gpu-0-mig-1g5gb-19-%d" % i for i in range(7)]
        for n in names:
            self.assertEqual(pool.allocate(['profile == "1g.5gb"'], allocated), [n])
            allocated.append(n)
        self.assertIsNone(pool.allocate(['profile == "1g.5gb"'], allocated))
        claims = {n: self.claim(n) for n in names}
        prepared = set()
        for n in rng.sample(names, 7):
            res = self.prepare_ok(claims[n])
            prepared.add(n)
            live = self.live()
            self.assertEqual(sorted(live), sorted((19, int(p[-1])) for p in prepared))
            self.assertMigPrepared(res, claims[n], live)
            self.assertEqual(self.nvml()[0]["mode"], 1)
        uuids = {m["uuid"] for m in self.live().values()}
        self.assertEqual(len(uuids), 7)
        for n in rng.sample(names, 7):
            self.assertEqual(self.kl.unprepare(ref(claims[n])), {claims[n]["metadata"]["uid"]: ""})
            prepared.discard(n)
            self.assertEqual(sorted(self.live()), sorted((19, int(p[-1])) for p in prepared))
            self.assertFalse(os.path.exists(self.spec_path(claims[n]["metadata"]["uid"])))
        self.assertEqual(self.nvml(), [{"mode": 1, "migs": []}])  # Ampere: MIG mode stays on

        # overlapping choices forged past the scheduler: refused, nothing left
        small = self.claim("gpu-0-mig-1g5gb-19-0")
        self.prepare_ok(small)
        for dev in ("gpu-0-mig-1g10gb-15-0", "gpu-0-mig-7g40gb-0-0", "gpu-0-mig-1g5gb-19-0",
                    "gpu-0-mig-3g20gb-9-0"):
            o = self.claim(dev)
            res = self.kl.prepare(ref(o))
            err = res[o["metadata"]["uid"]]["error"]
            self.assertIn("already prepared for claim default/%s" % small["metadata"]["name"], err)
            self.assertEqual(res[o["metadata"]["uid"]]["devices"], [])
            self.assertFalse(os.path.exists(self.spec_path(o["metadata"]["uid"])))
            self.assertEqual(sorted(self.live()), [(19, 0)])
            self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})
            self.assertEqual(sorted(self.live()), [(19, 0)])
        # two overlapping placements in one claim: refused whole
        both = self.claim("gpu-0-mig-2g10gb-14-2", "gpu-0-mig-1g5gb-19-3")
        res = self.kl.prepare(ref(both))
        self.assertNotEqual(res[both["metadata"]["uid"]]["error"], "")
        self.assertEqual(sorted(self.live()), [(19, 0)])
        # the GPU's own refusal: a placement the scheduler's counters allow but NVML's engines
        # do not is not tested here (the +me limit is in the counters too)
        self.assertEqual(self.kl.unprepare(ref(small), ref(both)),
                         {small["metadata"]["uid"]: "", both["metadata"]["uid"]: ""})
        self.assertEqual(self.nvml(), [{"mode": 1, "migs": []}])
        self.assertEqual(os.listdir(self.cdi), [])

    def test_restarts_foreign_and_orphan(self):
        self.host("h100-1-mig-off")
        self.start_dra()
        self.kl.register()
        one, two = self.claim("gpu-0-mig-1g10gb-19-0"), self.claim("gpu-0-mig-3g40gb-9-4")
        res = self.kl.prepare(ref(one), ref(two))
        live = self.live()
        self.assertMigPrepared(res, one, live)
        self.assertMigPrepared(res, two, live)
        uuids = {k: m["uuid"] for k, m in live.items()}

        # killed with claims prepared: the next one answers from its checkpoint (the claims
        # gone from the API server), the MIG devices untouched
        self.kill_plugin()
        self.start_dra()
        self.kl.register()
        self.cmd("rc-delete default %s" % one["metadata"]["name"])
        self.cmd("rc-delete default %s" % two["metadata"]["name"])
        self.assertEqual(self.kl.prepare(ref(one), ref(two)), res)
        self.assertEqual({k: m["uuid"] for k, m in self.live().items()}, uuids)

        # someone else's MIG device (made through NVML directly): left alone at start and
        # at every unprepare; MIG mode stays on for it
        self.nvml(op="create", gpu=0, index=0, start=2, size=1)
        foreign = self.live()[(19, 2)]["uuid"]
        self.plugin.signal(signal.SIGTERM)
        self.assertEqual(self.plugin.wait_exit(), 0)
        self.kl.close()
        self.start_dra()
        self.plugin.wait_log("MIG device %s (GPU instance" % foreign)
        self.plugin.wait_log("that no claim of this plugin made; leaving it")
        self.kl.register()
        self.assertEqual(self.kl.unprepare(ref(one), ref(two)),
                         {one["metadata"]["uid"]: "", two["metadata"]["uid"]: ""})
        self.assertEqual(self.nvml(), [{"mode": 1, "migs": [self.live()[(19, 2)]]}])
        self.assertEqual(self.live()[(19, 2)]["uuid"], foreign)
        # the scheduler may pick its placement (it does not know): NVML refuses, nothing left
        o = self.claim("gpu-0-mig-1g10gb-19-2")
        res = self.kl.prepare(ref(o))
        self.assertIn("gpu-0-mig-1g10gb-19-2", res[o["metadata"]["uid"]]["error"])
        self.assertEqual(sorted(self.live()), [(19, 2)])
        self.assertFalse(os.path.exists(self.spec_path(o["metadata"]["uid"])))

        # a prepare killed between create and checkpoint: its GI/CI exist, its record says
        # PrepareStarted; the next start destroys it (and leaves the foreign one)
        ok = self.claim("gpu-0-mig-1g10gb-19-0")
        self.prepare_ok(ok)
        self.kill_plugin()
        ckpt_path = os.path.join(self.plugins, DRIVER, "checkpoint.json")
        with open(ckpt_path) as f:
            ckpt = json.load(f)
        rec = ckpt["preparedClaims"][ok["metadata"]["uid"]]
        self.assertEqual(rec["checkpointState"], "PrepareCompleted")
        self.nvml(op="create", gpu=0, index=0, start=5, size=1)
        orphan = self.live()[(19, 5)]["uuid"]
        uid = "aaaaaaaa-0000-4000-8000-0000000000ee"
        dev = "gpu-0-mig-1g10gb-19-5"
        started = json.loads(json.dumps(rec))
        started["checkpointState"] = "PrepareStarted"
        started["name"] = "killed-mid-prepare"
        for d in started["devices"]:
            d["device"] = dev
            d["cdiDeviceID"] = "%s=%s-%s" % (CDI_KIND, uid, dev)
            d.pop("mig", None)
        ckpt["preparedClaims"][uid] = started
        with open(ckpt_path, "w") as f:
            json.dump(ckpt, f)
        self.start_dra()
        self.plugin.wait_log("destroying MIG device %s (%s) of a prepare that never finished" % (orphan, dev))
        self.assertEqual(sorted(self.live()), [(19, 0), (19, 2)])
        self.kl.register()
        # the kubelet's retry of that claim makes its device afresh
        killed = on_node(obj("resourceclaim-from-template-allocated"), name="killed-mid-prepare", uid=uid)
        killed["status"]["allocation"]["devices"]["results"][0]["device"] = dev
        self.load(killed)
        res = self.prepare_ok(killed)
        live = self.live()
        self.assertMigPrepared(res, killed, live)
        self.assertNotEqual(live[(19, 5)]["uuid"], orphan)
        self.assertEqual(self.kl.unprepare(ref(ok), ref(killed)),
                         {ok["metadata"]["uid"]: "", uid: ""})
        self.assertEqual(sorted(self.live()), [(19, 2)])
        self.assertEqual(self.live()[(19, 2)]["uuid"], foreign)

    def test_two_placements_busy_devices_and_rollback(self):
        """A claim of two placements: both made, one spec; a busy MIG device (processes on
        it) fails the unprepare, the claim kept for the kubelet's retry; a busy GPU cannot
        switch MIG mode on: Prepare fails, nothing made; a claim whose second placement
        NVML refuses (someone else's device there) undoes its first."""
        self.host("h100-1-mig-off")
        self.start_dra()
        self.kl.register()
        pool = self.pool()
        devs = pool.allocate(['profile == "1g.10gb"', 'profile == "2g.20gb"'])
        self.assertEqual(devs, ["gpu-0-mig-1g10gb-19-0", "gpu-0-mig-2g20gb-14-2"])
        two = self.claim(*devs)
        res = self.prepare_ok(two)
        live = self.live()
        self.assertEqual(sorted(live), [(14, 2), (19, 0)])
        spec = self.assertMigPrepared(res, two, live)
        self.assertEqual(len(spec["devices"]), 2)
        uid = two["metadata"]["uid"]
        # processes on the 2g device: its compute instance cannot be destroyed
        self.control("busy %s 1" % live[(14, 2)]["uuid"])
        err = self.kl.unprepare(ref(two))[uid]
        self.assertIn("error unpreparing devices for claim default/%s:%s" % (two["metadata"]["name"], uid), err)
        self.assertTrue(os.path.exists(self.spec_path(uid)))
        self.assertIn((14, 2), self.live())
        self.assertEqual(self.kl.prepare(ref(two)), res)  # still prepared, same answer
        self.control("busy %s 0" % live[(14, 2)]["uuid"])
        self.assertEqual(self.kl.unprepare(ref(two)), {uid: ""})
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertFalse(os.path.exists(self.spec_path(uid)))

        # a busy GPU (MIG mode off): switching it on is refused; nothing made, mode off
        gpu_uuid = pool.by_name["gpu-0"]["attributes"]["uuid"]["string"]
        self.control("busy %s 1" % gpu_uuid)
        o = self.claim("gpu-0-mig-1g10gb-19-0")
        res = self.kl.prepare(ref(o))
        self.assertIn("error enabling MIG mode for device gpu-0-%s" % gpu_uuid,
                      res[o["metadata"]["uid"]]["error"])
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])
        self.assertFalse(os.path.exists(self.spec_path(o["metadata"]["uid"])))
        self.control("busy %s 0" % gpu_uuid)
        self.prepare_ok(o)  # the kubelet's retry
        self.assertEqual(sorted(self.live()), [(19, 0)])
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})

        # someone else's 1g at 2: a claim of 1g at 1 and 1g at 2 makes the first, is
        # refused the second, and destroys the first again
        self.nvml(op="create", gpu=0, index=0, start=2, size=1)
        foreign = self.live()[(19, 2)]["uuid"]
        o = self.claim("gpu-0-mig-1g10gb-19-1", "gpu-0-mig-1g10gb-19-2")
        res = self.kl.prepare(ref(o))
        err = res[o["metadata"]["uid"]]["error"]
        self.assertIn("error creating MIG device 'gpu-0-mig-1g10gb-19-2'", err)
        self.assertEqual(res[o["metadata"]["uid"]]["devices"], [])
        self.assertEqual([m["uuid"] for m in self.nvml()[0]["migs"]], [foreign])
        self.assertFalse(os.path.exists(self.spec_path(o["metadata"]["uid"])))
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})
        self.assertEqual([m["uuid"] for m in self.nvml()[0]["migs"]], [foreign])

    def test_xid_on_a_mig_device_taints_its_placement(self):
        """An Xid NVML attributes to a MIG device a claim made: exactly its placement is
        UNHEALTHY and tainted (1.36 keeps taints), its GPU and the other placements not;
        recovery clears it."""
        self.cmd("rs-taints on")
        self.host("h100-1-mig-off")
        self.start_dra()
        self.kl.register()
        dev = "gpu-0-mig-1g10gb-19-2"
        o = self.claim(dev)
        self.prepare_ok(o)
        mig = self.live()[(19, 2)]["uuid"]
        w = self.kl.watch_health()
        Kubelet.wait_health(w, lambda m: len(m) == 26 and set(m.values()) == {HEALTHY}, "26 healthy")
        start = len(w["msgs"])
        self.inject("xid %s 94" % mig)
        m = Kubelet.wait_health(w, lambda m: m.get((NODE, dev)) == UNHEALTHY, dev + " UNHEALTHY", start)
        self.assertEqual({k: v for k, v in m.items() if v != HEALTHY}, {(NODE, dev): UNHEALTHY})
        deadline = time.monotonic() + harness.TIMEOUT
        while True:
            devs = {d["name"]: d for sl in self.slices().values() for d in sl["spec"].get("devices") or []}
            if "taints" in devs.get(dev, {}) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual([(t["key"], t.get("value"), t["effect"]) for t in devs[dev].get("taints", [])],
                         [("gpu.nvidia.com/xid", "94", "NoSchedule")])
        self.assertEqual([n for n, d in devs.items() if "taints" in d], [dev])
        self.assertEqual(len(devs), 26)
        Kubelet.wait_health(w, lambda m: m.get((NODE, dev)) == HEALTHY, dev + " HEALTHY again",
                            len(w["msgs"]))
        self.assertEqual(self.kl.unprepare(ref(o)), {o["metadata"]["uid"]: ""})
        self.assertEqual(self.nvml(), [{"mode": 0, "migs": []}])

    def test_fake_apiserver_counter_rules(self):
        """The fake API server's 1.36 rules for partitionable devices (§3.1), with its
        messages; what the plugin publishes passes them (the tests above)."""
        def base(name):
            return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                    "spec": {"driver": DRIVER, "nodeName": NODE,
                             "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}}}

        def sets(n, counters=1):
            return [{"name": "gpu-%d-counter-set" % i,
                     "counters": {"c%d" % k: {"value": "1"} for k in range(counters)}} for i in range(n)]

        def dev(i, uses):
            return {"name": "d%d" % i, "consumesCounters": uses}
        use = {"counterSet": "gpu-0-counter-set", "counters": {"c0": {"value": "1"}}}

        def refused(o, msg):
            status, body = kt_request(self.kubeconfig, "POST", "/apis/resource.k8s.io/v1/resourceslices", o)
            self.assertEqual(status, 422, body)
            self.assertEqual(json.loads(body)["message"], 'ResourceSlice.resource.k8s.io "%s" is invalid: %s' % (
                o["metadata"]["name"], msg))

        def accepted(o):
            status, body = kt_request(self.kubeconfig, "POST", "/apis/resource.k8s.io/v1/resourceslices", o)
            self.assertEqual(status, 201, body)
            return json.loads(body)

        o = base("sets-8")
        o["spec"]["sharedCounters"] = sets(8, 32)
        self.assertEqual(accepted(o)["spec"]["sharedCounters"], sets(8, 32))
        o = base("sets-9")
        o["spec"]["sharedCounters"] = sets(9)
        refused(o, "spec.sharedCounters: Too many: 9: must have at most 8 items")
        o = base("counters-33")
        o["spec"]["sharedCounters"] = sets(1, 33)
        refused(o, "spec.sharedCounters[0].counters: Too many: 33: must have at most 32 items")
        o = base("counters-0")
        o["spec"]["sharedCounters"] = sets(1, 0)
        refused(o, "spec.sharedCounters[0].counters: Required value")
        o = base("set-name")
        o["spec"]["sharedCounters"] = [{"name": "GPU_0", "counters": {"c0": {"value": "1"}}}]
        refused(o, 'spec.sharedCounters[0].name: Invalid value: "GPU_0": a lowercase RFC 1123 label must '
                   "consist of lower case alphanumeric characters or '-', and must start and end with an "
                   "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
        o = base("dup-set")
        o["spec"]["sharedCounters"] = sets(1) + sets(1)
        refused(o, 'spec.sharedCounters[1]: Duplicate value: "gpu-0-counter-set"')
        o = base("uses-3")
        o["spec"]["devices"] = [dev(0, [use, use, use])]
        refused(o, "spec.devices[0].consumesCounters: Too many: 3: must have at most 2 items")
        o = base("uses-dup")
        o["spec"]["devices"] = [dev(0, [use, use])]
        refused(o, 'spec.devices[0].consumesCounters[1]: Duplicate value: "gpu-0-counter-set"')
        o = base("uses-empty")
        o["spec"]["devices"] = [dev(0, [{"counterSet": "gpu-0-counter-set", "counters": {}}])]
        refused(o, "spec.devices[0].consumesCounters[0].counters: Required value")
        o = base("uses-33")
        o["spec"]["devices"] = [dev(0, [{"counterSet": "gpu-0-counter-set",
                                         "counters": {"c%d" % k: {"value": "1"} for k in range(33)}}])]
        refused(o, "spec.devices[0].consumesCounters[0].counters: Too many: 33: must have at most 32 items")
        o = base("devices-65")
        o["spec"]["devices"] = [dev(i, [use]) for i in range(65)]
        refused(o, "spec.devices: Too many: 65: must have at most 64 items")
        o = base("devices-64")
        o["spec"]["devices"] = [dev(i, [use]) for i in range(64)]
        accepted(o)
        o = base("devices-128")  # without counters (or kept taints) 128 stays the bound
        o["spec"]["devices"] = [{"name": "d%d" % i} for i in range(128)]
        accepted(o)
        o = base("both")
        o["spec"]["sharedCounters"] = sets(1)
        o["spec"]["devices"] = [dev(0, [use])]
        refused(o, 'spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed')
        self.cmd("version v1.35.0-rc.1")  # before 1.35.0 in semver: both allowed
        accepted(o)
        # the gate off: the fields dropped silently
        self.cmd("rs-partitionable off")
        o = base("dropped")
        o["spec"]["sharedCounters"] = sets(1)
        o["spec"]["devices"] = [dev(0, [use])]
        got = accepted(o)
        self.assertNotIn("sharedCounters", got["spec"])
        self.assertEqual(got["spec"]["devices"], [{"name": "d0"}])
        status, body = kt_request(self.kubeconfig, "GET", "/version", None)
        self.assertEqual((status, json.loads(body)["gitVersion"]), (200, "v1.35.0-rc.1"))


def kt_request(kubeconfig, method, path, body):
    """One request to the fake API server with the kubeconfig's CA and token: (status, body)."""
    import http.client
    import ssl
    with open(kubeconfig) as f:
        cluster = json.load(f)["clusters"][0]["cluster"]  # JSON is YAML: kubetest writes JSON
    host, port = cluster["server"].split("//")[1].split(":")
    ca = cluster["certificate-authority"]
    conn = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=ca))
    conn.request(method, path, None if body is None else json.dumps(body), {"Authorization": "Bearer tok1",
                                                  "Content-Type": "application/json"})
    r = conn.getresponse()
    out = (r.status, r.read().decode())
    conn.close()
    return out


if __name__ == "__main__":
    FAKE = sys.argv.pop(1)
    harness.main()
