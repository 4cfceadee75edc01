"""A real containerd 1.7 with CDI on injects what the plugin's NodePrepareResources returned.

The real binary (`--dra`, node `gpu-node-1`: four simulated A100s, two of them with MIG
devices) against the fake API server holding the 1.34 claim `two-gpus`, its results pointed
at gpu-1 and a 1g.5gb MIG device of gpu-3 taken from the published ResourceSlice; this
script plays the kubelet with grpcio: registration through the registrar directory, then
NodePrepareResources. Then containerd 1.7 from Debian trixie (tests/dra/containerd17.sh;
runc from bookworm), `enable_cdi = true` with the test's CDI root as its only spec
directory, its own root, state, socket, runc root and cgroup parent, runs a busybox-static
container through the CRI (runtime.v1, as the 1.34 kubelet: the IDs in
ContainerConfig.CDI_devices; ctr 1.7's `run` has no CDI option, only --device) with the
returned CDI IDs. Inside it: every device node of the
claim's spec with the host node's major:minor (gpu-1's, gpu-3's as the MIG device's
parent, the MIG device's two nvidia-caps, the common ones), the device cgroup rules for
exactly those (cgroup v1), the spec's env; not the GPUs the claim does not hold. A container of the same pod without CDI devices sees no GPU; after
NodeUnprepareResources containerd refuses the IDs (it reads the spec the plugin removed).

The simulated /dev holds empty files; the CDI library containerd vendors accepts only device
nodes, so the test replaces them with character devices of NVIDIA's numbers (195:<minor>,
nvidiactl 195:255, nvidia-caps/nvidia-cap<N> 237:<N>; no driver behind them, nothing opens
them).

Needs root, the simulator, busybox-static and, the first time, Debian's archive. Skips
(exit 77) with the reason when it cannot run, except under CI=true, where that fails.
Everything it starts is stopped, and what containerd mounted, the cgroups and runc state are
removed, also when a test fails or the run is stopped by SIGTERM/SIGINT.

usage: test_dra_containerd.py <fake-apiserver>   (env GDP_BUILD_DIR, GDP_TEST_DATA)"""
import json
import os
import stat
import subprocess
import sys
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kube"))
import kubetest as kt  # noqa: E402
from kubetest import scratch  # noqa: E402
import skip  # noqa: E402  (tests/common/skip.py)
import containerd17  # noqa: E402  (beside this file)
from containerd17 import decode, ld, vi  # noqa: E402

BUILD = os.environ.get("GDP_BUILD_DIR", "")
DATA = os.environ.get("GDP_TEST_DATA", "")
PLUGIN = os.path.join(BUILD, "src", "gpu-device-plugin")
SIM_DIR = os.path.join(BUILD, "sim", "nvml")
# Four A100s: 0 and 1 full GPUs, 2 and 3 with MIG devices (sim/profiles/).
PROFILE = os.path.join(HERE, "..", "..", "sim", "profiles", "a100-mig-mixed.yaml")
# The 1.34 claim for two GPUs, its results pointed at gpu-1 and a MIG device of gpu-3.
CLAIM = os.path.join(DATA, "dra", "objects", "resourceclaim-two-gpus-allocated.json")
FAKE = None
NODE = "gpu-node-1"
DRIVER = "gpu.nvidia.com"
IMAGE = "localhost/gdp-dra/busybox:1"
REG = "/pluginregistration.Registration/"
DRA = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
NVIDIA_MAJOR = 195
CTL_MINOR = 255
CAPS_MAJOR = 237  # dynamic on a real host


# ---- the kubelet's DRA messages (v1) ----------------------------------------------------

def claim_msg(ns, uid, name):
    return ld(1, ld(1, ns) + ld(2, uid) + ld(3, name))


def prepare_result(resp):
    """NodePrepareResourcesResponse -> {uid: (error, [(device, [cdi ids])])}."""
    res = {}
    for entry in decode(resp).get(1, []):
        e = decode(entry)
        val = decode(e.get(2, [b""])[0])
        devs = [(decode(d)[3][0].decode(), [c.decode() for c in decode(d).get(4, [])])
                for d in val.get(1, [])]
        res[e[1][0].decode()] = (val.get(2, [b""])[0].decode(), devs)
    return res


# ---- what the run needs ---------------------------------------------------------------

def cannot_run(why):
    skip.cannot_run("test_dra_containerd", why, "skipped")


def mknod_char(path, minor, major=NVIDIA_MAJOR):
    if os.path.lexists(path):
        os.unlink(path)
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))


def render_node(tmp):
    """The simulated A100 host under tmp; its /dev as character devices. Returns the
    --dev-root (a root holding dev/)."""
    host = os.path.join(tmp, "host")
    r = subprocess.run([os.path.join(SIM_DIR, "nvml-sim-render"), "--profile", PROFILE,
                        "--sysfs-root", os.path.join(tmp, "sys"), "--proc-root",
                        os.path.join(tmp, "proc"), "--dev-root", os.path.join(host, "dev")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("nvml-sim-render: " + r.stdout + r.stderr)
    dev = os.path.join(host, "dev")
    # The nodes that are no GPU get made-up minors of the same major (on a real host
    # nvidia-uvm's major is dynamic); only their presence and numbers are compared.
    extra = {"nvidiactl": CTL_MINOR, "nvidia-uvm": 254, "nvidia-uvm-tools": 253,
             "nvidia-modeset": 252}
    for name in os.listdir(dev):
        p = os.path.join(dev, name)
        if name.startswith("nvidia") and name[6:].isdigit():
            mknod_char(p, int(name[6:]))
        elif name in extra:
            mknod_char(p, extra[name])
    caps = os.path.join(dev, "nvidia-caps")
    for name in os.listdir(caps):  # nvidia-cap<minor>: the MIG capabilities
        mknod_char(os.path.join(caps, name), int(name[len("nvidia-cap"):]), CAPS_MAJOR)
    return host


# What the container prints: its GPU device nodes (major:minor in hex, as stat gives
# them), its environment, its mount points and its device cgroup rules (cgroup v1; v2 has
# them in BPF), one per line, then "end".
SCRIPT = r"""for f in /dev/nvidia* /dev/nvidia-caps/*; do
  [ -c "$f" ] && stat -c 'node %n %t:%T %F' "$f"; done
env | while read -r l; do echo "env $l"; done
while read -r a b c d m rest; do echo "mnt $m"; done </proc/self/mountinfo
l=/sys/fs/cgroup/devices/devices.list; [ ! -r $l ] || while read -r r; do echo "cg $r"; done <$l
echo end"""
# NamespaceOption: host network and IPC (no CNI, no shm mount of the sandbox's own on the
# host), a PID namespace per container.
NS_OPTS = vi(1, 2) + vi(2, 1) + vi(3, 2)


class ContainerdInjectsPreparedClaim(unittest.TestCase):
    def setUp(self):
        self.t0 = time.monotonic()
        self.tmp = scratch.mkdtemp("gdp-dra-ctr-")
        self.addCleanup(scratch.remove, self.tmp)  # last: after every child is gone
        self.host = render_node(self.tmp)
        self.cdi = os.path.join(self.tmp, "cdi")
        os.mkdir(self.cdi)

        api = os.path.join(self.tmp, "api")
        os.mkdir(api)
        self.srv = kt.LineProc([FAKE, api])
        self.addCleanup(self.srv.stop)
        port = int(self.srv.expect(r"^listening (\d+)$").group(1))
        kubeconfig = kt.write_kubeconfig(os.path.join(api, "kubeconfig"),
                                         "https://127.0.0.1:%d" % port,
                                         ca=os.path.join(api, "ca.crt"), token="tok1")
        self.cmd("add " + NODE)

        socks = scratch.socket_dir("gdp-dra-")  # the DRA directories' bound (78 bytes)
        self.reg_dir = os.path.join(socks, "plugins_registry")
        self.plugin_log = open(os.path.join(self.tmp, "plugin.log"), "w+")
        self.addCleanup(self.plugin_log.close)
        env = dict(os.environ, LD_LIBRARY_PATH=SIM_DIR, MOCK_NVML_CONFIG=PROFILE)
        self.plugin = scratch.adopt(subprocess.Popen(
            [PLUGIN, "--dra", "--node-name", NODE, "--kubeconfig", kubeconfig,
             "--cdi-root", self.cdi, "--kubelet-registrar-directory-path", self.reg_dir,
             "--kubelet-plugins-directory-path", os.path.join(socks, "plugins"),
             "--kubelet-socket", os.path.join(self.tmp, "dp", "kubelet.sock"),
             "--cdi-spec-dir", os.path.join(self.tmp, "cdi-dp"),
             "--sysfs-root", os.path.join(self.tmp, "sys"),
             "--proc-root", os.path.join(self.tmp, "proc"), "--dev-root", self.host, "-v", "1"],
            stdin=subprocess.DEVNULL, stdout=self.plugin_log, stderr=subprocess.STDOUT, env=env))
        self.addCleanup(self.stop_plugin)

        d = scratch.socket_dir("gdp-ctrd-")  # its sockets: containerd's bound is 104 bytes
        self.cgroup_parent = "/gdp-dra-ctr-" + uuid.uuid4().hex[:8]
        self.ctrd = containerd17.Containerd(CONTAINERD_BIN, d, self.cdi, self.cgroup_parent, IMAGE)
        self.addCleanup(self.stop_containerd)
        self.ctrd.import_busybox(self.tmp, IMAGE)

    def cmd(self, line):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0])

    def plugin_tail(self):
        self.plugin_log.flush()
        self.plugin_log.seek(0)
        return self.plugin_log.read()[-4000:]

    def stop_plugin(self):
        if self.plugin.poll() is None:
            self.plugin.terminate()
        try:
            code = self.plugin.wait(15)
        except subprocess.TimeoutExpired:
            self.plugin.kill()
            code = self.plugin.wait()
        self.assertEqual(code, 0, "the plugin's exit status; its log:\n" + self.plugin_tail())

    def stop_containerd(self):
        self.ctrd.stop()
        leftover = containerd17.pids_naming(self.ctrd.sock)
        self.assertEqual(leftover, [], "processes naming containerd's socket after the stop")
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split()[4] for line in f if line.split()[4].startswith(self.tmp)]
        self.assertEqual(mounts, [], "mounts left under the test's directory")

    # -- the kubelet's side

    def kubelet_dials(self):
        """Registration as the kubelet does it; returns a channel to the DRA endpoint."""
        import grpc
        reg = os.path.join(self.reg_dir, DRIVER + "-reg.sock")
        end = time.monotonic() + 30
        while not os.path.exists(reg):
            if self.plugin.poll() is not None or time.monotonic() > end:
                self.fail("no registration socket %s; plugin log:\n%s" % (reg, self.plugin_tail()))
            time.sleep(0.05)
        with grpc.insecure_channel("unix://" + reg) as ch:
            info = decode(ch.unary_unary(REG + "GetInfo")(b"", timeout=10))
            self.assertEqual(info[2], [DRIVER.encode()])
            self.assertIn(b"v1.DRAPlugin", info[4])
            ch.unary_unary(REG + "NotifyRegistrationStatus")(vi(1, 1), timeout=10)
        return grpc.insecure_channel("unix://" + info[3][0].decode())

    # -- the runtime's side

    def run_pod(self):
        meta = ld(1, "dra-ctr") + ld(2, uuid.uuid4().hex) + ld(3, "default")
        logs = os.path.join(self.tmp, "logs")
        os.mkdir(logs)
        self.podcfg = (ld(1, meta) + ld(3, logs) +
                       ld(8, ld(1, self.cgroup_parent) + ld(2, ld(1, NS_OPTS))))
        self.sid = decode(self.ctrd.cri("RunPodSandbox", ld(1, self.podcfg), 60))[1][0].decode()
        self.addCleanup(self.remove_pod)
        self.logs = logs

    def remove_pod(self):
        self.ctrd.cri("StopPodSandbox", ld(1, self.sid), 60)
        self.ctrd.cri("RemovePodSandbox", ld(1, self.sid), 60)

    def create(self, name, cdi_ids):
        cfg = (ld(1, ld(1, name)) + ld(2, ld(1, IMAGE)) + ld(3, "/bin/sh") + ld(3, "-c") +
               ld(3, SCRIPT) + ld(11, name + ".log") + ld(15, ld(2, ld(3, NS_OPTS))) +
               b"".join(ld(17, ld(1, i)) for i in cdi_ids))
        return self.ctrd.cri("CreateContainer", ld(1, self.sid) + ld(2, cfg) + ld(3, self.podcfg))

    def run_container(self, name, cdi_ids):
        """Runs SCRIPT in a container with cdi_ids: {"node": {path: "maj:min type"},
        "env": {k: v}, "mnt": {mount point}, "cg": {device cgroup v1 rule}}."""
        cid = decode(self.create(name, cdi_ids))[1][0].decode()
        self.ctrd.cri("StartContainer", ld(1, cid))
        code, lines = self.ctrd.wait_exited(cid, os.path.join(self.logs, name + ".log"))
        self.assertEqual(code, 0, "%s's exit code; output: %s" % (name, lines))
        self.assertEqual(lines[-1:], ["end"], lines)
        out = {"node": {}, "env": {}, "mnt": set(), "cg": set()}
        for line in lines[:-1]:
            kind, _, rest = line.partition(" ")
            if kind == "node":
                path, _, what = rest.partition(" ")
                out["node"][path] = what
            elif kind == "env":
                k, _, v = rest.partition("=")
                out["env"][k] = v
            elif kind in ("mnt", "cg"):
                out[kind].add(rest)
        return out

    def slice_devices(self):
        """The device names of this node's published ResourceSlice (waited for)."""
        end = time.monotonic() + 30
        while True:
            self.srv.send("rs-dump")
            names = []
            while True:
                m = self.srv.expect(r"^rs(-count)? (\S+)(?: (.*))?$")
                if m.group(1):
                    self.srv.expect(r"^ok rs-dump$")
                    break
                names += [d["name"] for d in json.loads(m.group(3))["spec"]["devices"]]
            if names:
                return names
            if time.monotonic() > end:
                self.fail("no ResourceSlice published; plugin log:\n" + self.plugin_tail())
            time.sleep(0.1)

    def load_claim(self, devices):
        """The real claim, its results pointed at devices (of this node's pool)."""
        with open(CLAIM) as f:
            o = json.load(f)
        md = o["metadata"]
        md["uid"], md["name"] = str(uuid.uuid4()), "gpu-and-mig"
        results = o["status"]["allocation"]["devices"]["results"]
        o["status"]["allocation"]["devices"]["results"] = [
            dict(results[0], device=d, pool=NODE) for d in devices]
        self.cmd("rc-json " + json.dumps(o, separators=(",", ":")))
        return md["namespace"], md["uid"], md["name"]

    def test_containerd_injects_what_prepare_returned(self):
        dra = self.kubelet_dials()
        self.addCleanup(dra.close)
        names = self.slice_devices()
        mig = sorted(n for n in names if n.startswith("gpu-3-mig-1g5gb-"))[0]
        self.assertIn("gpu-1", names)
        self.assertNotIn("gpu-3", names)  # MIG enabled: offered as its MIG devices only
        ns, uid, name = self.load_claim(["gpu-1", mig])
        res = prepare_result(dra.unary_unary(DRA + "NodePrepareResources")(
            claim_msg(ns, uid, name), timeout=30))
        err, devs = res[uid]
        self.assertEqual(err, "", self.plugin_tail())
        kind = "k8s.gpu.nvidia.com/claim"
        self.assertEqual(devs, [("gpu-1", ["%s=%s-gpu-1" % (kind, uid)]),
                                (mig, ["%s=%s-%s" % (kind, uid, mig)])])
        ids = [i for _, cdi in devs for i in cdi]
        spec_path = os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)
        with open(spec_path) as f:
            spec = json.load(f)  # JSON is YAML

        self.run_pod()
        got = self.run_container("with-claim", ids)
        bare = self.run_container("without", [])

        # Every device node of the spec (the claim's GPUs and the common ones), with the
        # host node's numbers; nothing of the GPUs the claim does not hold.
        edits = [spec.get("containerEdits", {})] + [d["containerEdits"] for d in spec["devices"]]
        want = {}
        for e in edits:
            for n in e.get("deviceNodes", []):
                if n.get("type") == "c":  # NVIDIA's MIG capability form: no host node needed
                    self.assertNotIn("hostPath", n)
                    want[n["path"]] = (n["major"], n.get("minor", 0))
                    continue
                st = os.stat(n.get("hostPath", n["path"]))
                want[n["path"]] = (os.major(st.st_rdev), os.minor(st.st_rdev))
                self.assertEqual((n.get("major", 0), n.get("minor", 0)), want[n["path"]], n)
        caps = sorted(p for p in want if p.startswith("/dev/nvidia-caps/"))
        self.assertEqual(len(caps), 2, want)  # the MIG device's GI and CI capabilities
        self.assertEqual({p: w for p, w in got["node"].items() if p in want},
                         {p: "%x:%x character special file" % w for p, w in want.items()})
        self.assertEqual(got["node"]["/dev/nvidia1"], "c3:1 character special file")
        self.assertEqual(got["node"]["/dev/nvidia3"], "c3:3 character special file")  # parent
        self.assertEqual(sorted(p for p in got["node"] if p.startswith("/dev/nvidia-caps/")), caps)
        for other in ("/dev/nvidia0", "/dev/nvidia2"):
            self.assertNotIn(other, got["node"])
        self.assertEqual(bare["node"], {}, "a container without CDI devices sees GPUs")
        if got["cg"]:  # cgroup v1: the device cgroup lets it open the claimed nodes only
            nv = lambda cg: sorted(r for r in cg if r.split(":")[0] in (  # noqa: E731
                "c %d" % NVIDIA_MAJOR, "c %d" % CAPS_MAJOR))
            self.assertEqual(nv(got["cg"]), sorted("c %d:%d rwm" % w for w in want.values()))
            self.assertEqual(nv(bare["cg"]), [])
        # The spec's environment and mounts.
        env = [kv for e in edits for kv in e.get("env", [])]
        self.assertTrue(env, spec)
        for kv in env:
            k, _, v = kv.partition("=")
            self.assertEqual(got["env"].get(k), v, kv)
            self.assertNotIn(k, bare["env"])
        for e in edits:
            for m in e.get("mounts", []):
                self.assertIn(m["containerPath"], got["mnt"])

        # Unprepared: the spec is gone, and containerd, which reads it, refuses the IDs.
        dra.unary_unary(DRA + "NodeUnprepareResources")(claim_msg(ns, uid, name), timeout=30)
        self.assertFalse(os.path.exists(spec_path))
        import grpc
        with self.assertRaises(grpc.RpcError) as cm:
            self.create("after-unprepare", ids)
        self.assertIn("unresolvable CDI devices", cm.exception.details())
        print("containerd %s: injected %d device nodes and %d env entries in %.1f s" % (
            CONTAINERD_VERSION, len(want), len(env), time.monotonic() - self.t0))


def main():
    global FAKE, CONTAINERD_BIN, CONTAINERD_VERSION
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    FAKE = sys.argv.pop(1)
    if os.geteuid() != 0:
        cannot_run("needs root (containerd, runc, mknod)")
    for p in (PLUGIN, os.path.join(SIM_DIR, "nvml-sim-render"), "/bin/busybox"):
        if not os.path.exists(p):
            cannot_run("missing %s" % p)
    try:
        import grpc  # noqa: F401
    except ImportError:
        cannot_run("no python3-grpcio")
    CONTAINERD_BIN, why = containerd17.fetch()
    if why:
        cannot_run(why)
    CONTAINERD_VERSION = containerd17.version(CONTAINERD_BIN)
    if not CONTAINERD_VERSION.startswith("1.7."):  # the config and the checks are 1.7's
        print("test_dra_containerd: %s/containerd is %s, not 1.7" % (CONTAINERD_BIN,
              CONTAINERD_VERSION), file=sys.stderr)
        sys.exit(1)
    containerd17.install_signal_handlers()
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
