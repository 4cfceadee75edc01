#!/usr/bin/python3
"""A container that a real containerd 1.7 builds from our CDI specs really loads the driver.

One containerd 1.7 with CDI on (tests/dra/containerd17.py: Debian trixie's, its own root,
state, socket, runc root and cgroup parent), one pod, and an image that is a plain Debian 12
rootfs (tests/cdi/debian-rootfs.sh: glibc, ldconfig, busybox; nothing of NVIDIA's) with
cuda-probe copied in. Per case one real plugin binary (the DRA kubelet plugin or the device
plugin), on the simulated four-A100 node of sim/profiles/a100-mig-mixed.yaml (GPUs 2 and 3
in MIG mode): its /dev as character devices with NVIDIA's numbers (195:<minor>, nvidiactl
195:255, nvidia-caps 237:<N>, as test_dra_containerd.py makes them; no driver behind them:
opening one gives ENXIO, which the stand-ins count as "given to this container"), the
driver root that `nvml-sim-render --driver-root` packages (the libcuda stand-in, the
simulator as libnvidia-ml.so.<ver>, nvidia-smi, firmware, the persistenced socket) as
--driver-root and --driver-root-ctr-path, and --nvidia-cdi-hook-path a copy of the
nvidia-cdi-hook stand-in (it logs its calls beside itself: runc gives a hook only the env
the spec lists). The container gets the CDI IDs the plugin returned and nothing else of the
driver: no device, no LD_LIBRARY_PATH; only MOCK_NVML_CONFIG (the profile, mounted
read-only by the test's CRI mounts) in its env, for the stand-ins. In it: cuda-probe
(dlopen("libcuda.so.1") by SONAME, cuInit, devices, 1 MiB allocated on each),
nvidia-smi -L, where libcuda.so.1 leads, ldconfig -p.

Cases (each method says what it checks): DRA claims of one GPU, two GPUs and a MIG device;
the device plugin's cdi-cri names; no hook binary (SONAME mounts); a RHEL-layout driver
root with and without the hooks.

At the end: every plugin exited 0, nothing of containerd runs, no mount is left under the
test's directory, and that directory ($TMPDIR/gdp-cdi-ctr-*, tests/common/scratch.py) is
gone.

Needs root, the simulator, cuda-probe and, the first time, Debian's archive (containerd,
runc and the rootfs, cached under ~/.cache/gpu-device-plugin). Skips (exit 77) with the
reason when it cannot run, except under CI=true, where that fails.

usage: test_cdi_containerd.py <fake-apiserver> <cuda-probe>
       (env GDP_BUILD_DIR, GDP_SOURCE_DIR, GDP_TEST_DATA; tests/cdi/meson.build)"""
import json
import os
import queue
import shutil
import subprocess
import sys
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("GDP_SOURCE_DIR") or os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "dra"))
sys.path.insert(0, os.path.join(SOURCE, "tools", "test-kubelet"))
import test_dra_containerd as dra  # noqa: E402  (its node, claim and kubelet helpers)
import containerd17  # noqa: E402
from containerd17 import decode, ld, vi  # noqa: E402
import kubetest as kt  # noqa: E402
from kubetest import scratch  # noqa: E402
import skip  # noqa: E402  (tests/common/skip.py)

PLUGIN, SIM_DIR, PROFILE = dra.PLUGIN, dra.SIM_DIR, dra.PROFILE  # sim/profiles/a100-mig-mixed
RENDER = os.path.join(SIM_DIR, "nvml-sim-render")
HOOK_STANDIN = os.path.join(HERE, "nvidia-cdi-hook")
VERSION = "550.163.01"  # the profile's driver_version
NAME = "NVIDIA A100-SXM4-40GB"
GPU = ["GPU-a100a100-0000-0000-0000-00000000000%d" % i for i in range(4)]  # the profile's
DEBIAN_LIB = "/usr/lib/x86_64-linux-gnu"
IMAGE = "localhost/gdp-cdi/debian:1"
CTR_PROFILE = "/etc/nvml-sim/profile.yaml"  # where the test's CRI mount puts the profile
HOOKS = ["create-symlinks", "enable-cuda-compat", "update-ldcache",
         "disable-device-node-modification"]
MISSING_HOOK = "/nonexistent/nvidia-cdi-hook"
DP_KIND = "k8s.device-plugin.nvidia.com/gpu"
CLAIM_KIND = "k8s.gpu.nvidia.com/claim"
FAKE = PROBE = ROOTFS = CONTAINERD_BIN = CONTAINERD_VERSION = None

# What the container prints: one section per check, "== <name>", its output (stderr too),
# "== rc <status>"; then "== end". busybox's sh, env and readlink; the image's ldconfig.
SCRIPT = r"""sec() { n=$1; shift; echo "== $n"; "$@" 2>&1; echo "== rc $?"; }
sec probe cuda-probe
sec smi nvidia-smi -L
sec libcuda readlink -f "$LIBCUDA_AT"
sec ldconfig ldconfig -p
sec env busybox env
sec mounts sh -c 'while read -r a b c d m rest; do echo "$m"; done </proc/self/mountinfo'
echo "== end"
"""


def parse_sections(lines):
    """The container's output -> {name: (rc, [lines])}."""
    out, name, body = {}, None, []
    for line in lines:
        if line.startswith("== rc ") and name:
            out[name] = (int(line[6:]), body)
            name, body = None, []
        elif line.startswith("== "):
            name, body = line[3:], []
        elif name:
            body.append(line)
    return out


def cannot_run(why):
    skip.cannot_run("test_cdi_containerd", why, "skipped")


def render_driver_root(dest, *opts):
    r = subprocess.run([RENDER, "--profile", PROFILE, "--driver-root", dest, *opts],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("nvml-sim-render --driver-root: " + r.stdout + r.stderr)


def spec_edits(spec):
    """The spec's common edits and those of every device."""
    return [spec.get("containerEdits", {})] + [
        d.get("containerEdits", {}) for d in spec.get("devices", [])]


class Plugin:
    """One plugin process, its output in a file; stop() returns (exit status, output)."""

    def __init__(self, args, log_path):
        self.log = open(log_path, "w+")
        env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH",)}
        # NVML comes from the driver root (--driver-root-ctr-path), as on a node.
        env["MOCK_NVML_CONFIG"] = PROFILE
        self.proc = scratch.adopt(subprocess.Popen(
            [PLUGIN, *args], stdin=subprocess.DEVNULL, stdout=self.log,
            stderr=subprocess.STDOUT, env=env))

    def text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        text = self.text()
        self.log.close()
        return code, text


class CdiContainerd(unittest.TestCase):
    """The cases share one containerd, one pod and the image; each starts its plugin."""
    plugins = []  # (kind, exit status, log tail) of each plugin stopped, for the final count

    # ---- once -------------------------------------------------------------------------

    @classmethod
    def setUpClass(cls):
        cls.t0 = time.monotonic()
        cls.tmp = scratch.mkdtemp("gdp-cdi-ctr-")
        cls.addClassCleanup(cls.final_checks)  # runs last: after containerd is gone
        cls.host = dra.render_node(cls.tmp)  # --dev-root: character devices in host/dev
        cls.drv = os.path.join(cls.tmp, "driver")
        render_driver_root(cls.drv)
        cls.rhel = os.path.join(cls.tmp, "driver-rhel")
        render_driver_root(cls.rhel, "--libdir", "usr/lib64")
        hookdir = os.path.join(cls.tmp, "bin")
        os.mkdir(hookdir)
        cls.hook = os.path.join(hookdir, "nvidia-cdi-hook")
        shutil.copy2(HOOK_STANDIN, cls.hook)
        cls.hook_log = os.path.join(hookdir, "nvidia-cdi-hook.log")
        cls.cdi = os.path.join(cls.tmp, "cdi")
        os.mkdir(cls.cdi)

        d = scratch.socket_dir("gdp-ctrd-")  # its sockets: containerd's bound is 104 bytes
        cls.cgroup_parent = "/gdp-cdi-ctr-" + uuid.uuid4().hex[:8]
        cls.ctrd = containerd17.Containerd(CONTAINERD_BIN, d, cls.cdi, cls.cgroup_parent, IMAGE)
        cls.addClassCleanup(cls.ctrd.stop)
        cls.import_image()
        cls.run_pod()
        cls.t_ready = time.monotonic()

    @classmethod
    def import_image(cls):
        """The plain Debian rootfs, its own ld.so.cache (a Debian image has one), cuda-probe
        in /usr/local/bin; imported as containerd17 imports busybox. It is the sandbox
        image too (busybox sleep)."""
        root = os.path.join(cls.tmp, "image-root")
        shutil.copytree(ROOTFS, root, symlinks=True)
        os.makedirs(os.path.join(root, "usr", "local", "bin"), exist_ok=True)
        shutil.copyfile(PROBE, os.path.join(root, "usr", "local", "bin", "cuda-probe"))
        os.chmod(os.path.join(root, "usr", "local", "bin", "cuda-probe"), 0o755)
        subprocess.run(["/sbin/ldconfig", "-r", root], check=True)
        out = os.path.join(cls.tmp, "image.tar")
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "e2e", "oci-image.py"),
                            "--rootfs", root, "--name", IMAGE, "--out", out, "--env",
                            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            "--cmd", '["/usr/bin/busybox", "sleep", "600"]'],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("oci-image.py: " + r.stderr)
        cls.ctrd.ctr("images", "import", "--snapshotter", "native", out)
        shutil.rmtree(root)
        os.unlink(out)

    @classmethod
    def run_pod(cls):
        meta = ld(1, "cdi-ctr") + ld(2, uuid.uuid4().hex) + ld(3, "default")
        cls.logs = os.path.join(cls.tmp, "logs")
        os.mkdir(cls.logs)
        cls.podcfg = (ld(1, meta) + ld(3, cls.logs) +
                      ld(8, ld(1, cls.cgroup_parent) + ld(2, ld(1, dra.NS_OPTS))))
        cls.sid = decode(cls.ctrd.cri("RunPodSandbox", ld(1, cls.podcfg), 60))[1][0].decode()
        cls.addClassCleanup(cls.remove_pod)

    @classmethod
    def remove_pod(cls):
        cls.ctrd.cri("StopPodSandbox", ld(1, cls.sid), 60)
        cls.ctrd.cri("RemovePodSandbox", ld(1, cls.sid), 60)

    @classmethod
    def final_checks(cls):
        """After containerd's stop: the plugins' exits, no process or mount of ours, and
        the scratch directory gone."""
        leftover = containerd17.pids_naming(cls.tmp)  # containerd's socket is under it
        with open("/proc/self/mountinfo") as f:
            mounts = [ln.split()[4] for ln in f if ln.split()[4].startswith(cls.tmp)]
        scratch.remove(cls.tmp)
        problems = []
        if leftover:
            problems.append("processes naming the test's directory: %s" % leftover)
        if mounts:
            problems.append("mounts left under %s: %s" % (cls.tmp, mounts))
        if os.path.lexists(cls.tmp):
            problems.append("%s not removed" % cls.tmp)
        bad = [(a, c, t) for a, c, t in cls.plugins if c != 0]
        if bad:
            problems.append("plugins that did not exit 0 on SIGTERM: %s" % bad)
        print("final: %d plugins started, %d exited 0; no process, no mount, %s removed; "
              "%.1f s in all (%.1f s before the first case)" % (
                  len(cls.plugins), len(cls.plugins) - len(bad), cls.tmp,
                  time.monotonic() - cls.t0, getattr(cls, "t_ready", cls.t0) - cls.t0))
        if problems:
            raise AssertionError("; ".join(problems))

    # ---- per case ---------------------------------------------------------------------

    def start_plugin(self, name, args):
        p = Plugin(args, os.path.join(self.tmp, name + ".log"))
        self.addCleanup(self.stop_plugin, p, args)
        return p

    def stop_plugin(self, p, args):
        code, text = p.stop()
        self.plugins.append((args[0] if args[0] == "--dra" else "device-plugin", code,
                             text[-2000:]))
        self.assertEqual(code, 0, "the plugin's exit status; its log:\n" + text[-4000:])

    def common_args(self, driver_root, hook):
        return ["--sysfs-root", os.path.join(self.tmp, "sys"),
                "--proc-root", os.path.join(self.tmp, "proc"), "--dev-root", self.host,
                "--driver-root", driver_root, "--driver-root-ctr-path", driver_root,
                "--nvidia-cdi-hook-path", hook, "-v", "1"]

    def hook_lines(self):
        if not os.path.exists(self.hook_log):
            return []
        with open(self.hook_log) as f:
            return f.read().splitlines()

    def run_container(self, name, cdi_ids, libcuda_at=DEBIAN_LIB + "/libcuda.so.1"):
        """SCRIPT in a container given cdi_ids, the profile (read-only) and MOCK_NVML_CONFIG
        only. Returns ({section: (rc, lines)}, [the hook stand-in's log lines for it])."""
        before = len(self.hook_lines())
        mount = ld(1, CTR_PROFILE) + ld(2, os.path.realpath(PROFILE)) + vi(3, 1)
        env = (ld(6, ld(1, "MOCK_NVML_CONFIG") + ld(2, CTR_PROFILE)) +
               ld(6, ld(1, "LIBCUDA_AT") + ld(2, libcuda_at)))
        cfg = (ld(1, ld(1, name)) + ld(2, ld(1, IMAGE)) + ld(3, "/bin/sh") + ld(3, "-c") +
               ld(3, SCRIPT) + env + ld(7, mount) + ld(11, name + ".log") +
               ld(15, ld(2, ld(3, dra.NS_OPTS))) +
               b"".join(ld(17, ld(1, i)) for i in cdi_ids))
        cid = decode(self.ctrd.cri("CreateContainer", ld(1, self.sid) + ld(2, cfg) +
                                   ld(3, self.podcfg), 60))[1][0].decode()
        self.ctrd.cri("StartContainer", ld(1, cid), 60)
        code, lines = self.ctrd.wait_exited(cid, os.path.join(self.logs, name + ".log"))
        self.ctrd.cri("RemoveContainer", ld(1, cid), 60)
        self.assertEqual(code, 0, "%s's exit code; output: %s" % (name, lines))
        self.assertEqual(lines[-1:], ["== end"], lines)
        got = parse_sections(lines)
        print("  %s (%s):" % (name, " ".join(cdi_ids)))
        for sec in ("probe", "smi", "libcuda"):
            for line in got[sec][1]:
                print("    %s: %s" % (sec, line))
        for line in got["ldconfig"][1]:
            if "libcuda" in line:
                print("    ldconfig -p: %s" % line.strip())
        hooks = self.hook_lines()[before:]
        for line in hooks:
            print("    hook: %s" % line)
        return got, hooks

    def assert_sees(self, got, devices, smi):
        """devices: [(name, uuid)] as cuda-probe lists them; smi: nvidia-smi -L's lines."""
        want = ["count %d" % len(devices)] + [
            "gpu %d %s %s" % (i, n, u) for i, (n, u) in enumerate(devices)] + ["memalloc ok"]
        self.assertEqual(got["probe"], (0, want))
        self.assertEqual(got["smi"], (0, smi))
        env = dict(kv.partition("=")[::2] for kv in got["env"][1])
        self.assertNotIn("LD_LIBRARY_PATH", env)

    def assert_hooks_ran(self, got, hooks, libdir=DEBIAN_LIB):
        self.assertEqual([h.split()[0] for h in hooks], HOOKS, hooks)
        self.assertIn("--host-driver-version=" + VERSION, hooks[1].split())
        self.assertIn("--folder %s" % libdir, hooks[2])
        self.assertEqual(got["libcuda"], (0, ["%s/libcuda.so.%s" % (libdir, VERSION)]))
        cache = [ln.split() for ln in got["ldconfig"][1] if ln.startswith("\t")]
        self.assertEqual(got["ldconfig"][0], 0, got["ldconfig"])
        # (merged /usr: ldconfig may name the directory by /lib/... or /lib64)
        self.assertIn(["libcuda.so.1", "(libc6,x86-64)", "=>",
                       "%s/libcuda.so.1" % libdir],
                      [c[:3] + ["/usr" + c[3] if c[3].startswith("/lib") else c[3]]
                       for c in cache if len(c) == 4])

    # ---- 1. DRA -----------------------------------------------------------------------

    # The kubelet's side as test_dra_containerd plays it: registration, the fake API
    # server's lines (its methods, on this case's srv, reg_dir, plugin and plugin_tail).
    # self.plugin is the process there, self.dra_plugin here.
    kubelet_dials = dra.ContainerdInjectsPreparedClaim.kubelet_dials
    cmd = dra.ContainerdInjectsPreparedClaim.cmd

    def plugin_tail(self):
        return self.dra_plugin.text()[-4000:]

    def slice_devices(self):
        """{device name: its attributes} of this node's published ResourceSlice."""
        end = time.monotonic() + 30
        while True:
            self.srv.send("rs-dump")
            devs = {}
            while True:
                m = self.srv.expect(r"^rs(-count)? (\S+)(?: (.*))?$")
                if m.group(1):
                    self.srv.expect(r"^ok rs-dump$")
                    break
                for d in json.loads(m.group(3))["spec"]["devices"]:
                    devs[d["name"]] = {k: next(iter(v.values())) if isinstance(v, dict) else v
                                       for k, v in d.get("attributes", {}).items()}
            if devs:
                return devs
            if time.monotonic() > end:
                self.fail("no ResourceSlice published; plugin log:\n" + self.plugin_tail())
            time.sleep(0.1)

    def prepare(self, dra_ch, name, devices):
        """A 1.34 claim `name` whose results are devices (of this node's pool), prepared
        (unprepared at the case's end if still prepared then); returns (its CDI IDs, its
        spec, unprepare: the kubelet's call once the pod is gone, the spec then removed)."""
        with open(dra.CLAIM) as f:
            o = json.load(f)
        md = o["metadata"]
        md["uid"], md["name"] = str(uuid.uuid4()), name
        results = o["status"]["allocation"]["devices"]["results"]
        o["status"]["allocation"]["devices"]["results"] = [
            dict(results[0], device=d, pool=dra.NODE) for d in devices]
        self.cmd("rc-json " + json.dumps(o, separators=(",", ":")))
        res = dra.prepare_result(dra_ch.unary_unary(dra.DRA + "NodePrepareResources")(
            dra.claim_msg(md["namespace"], md["uid"], name), timeout=30))
        err, devs = res[md["uid"]]
        self.assertEqual(err, "", self.plugin_tail())
        self.assertEqual(devs, [(d, ["%s=%s-%s" % (CLAIM_KIND, md["uid"], d)]) for d in devices])
        path = os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % md["uid"])
        with open(path) as f:
            spec = json.load(f)  # JSON is YAML

        def unprepare():
            if os.path.exists(path):
                dra_ch.unary_unary(dra.DRA + "NodeUnprepareResources")(
                    dra.claim_msg(md["namespace"], md["uid"], name), timeout=30)
                self.assertFalse(os.path.exists(path))
        self.addCleanup(unprepare)
        return [i for _, ids in devs for i in ids], spec, unprepare

    def test_1_dra_claims(self):
        self.srv, kubeconfig, _ = kt.fake_apiserver(self, FAKE, {})
        self.cmd("add " + dra.NODE)
        socks = scratch.socket_dir("gdp-dra-")  # the DRA directories' bound (78 bytes)
        self.reg_dir = os.path.join(socks, "plugins_registry")
        self.dra_plugin = self.start_plugin("dra", [
            "--dra", "--node-name", dra.NODE, "--kubeconfig", kubeconfig,
            "--cdi-root", self.cdi, "--kubelet-registrar-directory-path", self.reg_dir,
            "--kubelet-plugins-directory-path", os.path.join(socks, "plugins"),
            "--kubelet-socket", os.path.join(self.tmp, "dra-dp", "kubelet.sock"),
            "--cdi-spec-dir", os.path.join(self.tmp, "cdi-dra-dp"),
            *self.common_args(self.drv, self.hook)])
        self.plugin = self.dra_plugin.proc
        ch = self.kubelet_dials()
        self.addCleanup(ch.close)
        devs = self.slice_devices()
        mig = sorted(n for n in devs if n.startswith("gpu-3-mig-1g5gb-"))[0]
        mig_uuid = devs[mig]["uuid"]
        self.assertTrue(mig_uuid.startswith("MIG-"), devs[mig])
        for g in (0, 1):
            self.assertEqual(devs["gpu-%d" % g]["uuid"], GPU[g], devs["gpu-%d" % g])

        print()
        # (a device is in one claim at a time: each claim is unprepared after its pod,
        # here its container, as the kubelet does)
        ids, spec, unprepare = self.prepare(ch, "one-gpu", ["gpu-1"])
        got, hooks = self.run_container("dra-one-gpu", ids)
        self.assert_sees(got, [(NAME, GPU[1])], ["GPU 0: %s (UUID: %s)" % (NAME, GPU[1])])
        self.assert_hooks_ran(got, hooks)
        env = dict(kv.partition("=")[::2] for kv in got["env"][1])
        self.assertEqual(env.get("NVIDIA_CTK_LIBCUDA_DIR"), DEBIAN_LIB)
        # Every mount of the spec is there (runc follows the image's merged-/usr links:
        # /lib/firmware/... is mounted at /usr/lib/firmware/...).
        usr = lambda p: "/usr" + p if p.split("/")[1] in ("bin", "sbin", "lib", "lib64") else p  # noqa: E731
        for e in spec_edits(spec):
            for m in e.get("mounts", []):
                self.assertIn(usr(m["containerPath"]), got["mounts"][1])
        for f in ("/usr/bin/nvidia-smi", "/run/nvidia-persistenced/socket",
                  "%s/libcuda.so.%s" % (DEBIAN_LIB, VERSION),
                  "%s/libnvidia-ml.so.%s" % (DEBIAN_LIB, VERSION),
                  "/usr/lib/firmware/nvidia/%s/gsp_ga10x.bin" % VERSION):
            self.assertIn(f, got["mounts"][1])
        unprepare()

        ids, _, unprepare = self.prepare(ch, "two-gpus", ["gpu-0", "gpu-1"])
        got, hooks = self.run_container("dra-two-gpus", ids)
        self.assert_sees(got, [(NAME, GPU[0]), (NAME, GPU[1])],
                         ["GPU %d: %s (UUID: %s)" % (i, NAME, GPU[i]) for i in (0, 1)])
        self.assert_hooks_ran(got, hooks)
        unprepare()

        ids, _, unprepare = self.prepare(ch, "mig", [mig])
        got, hooks = self.run_container("dra-mig", ids)
        self.assert_sees(got, [("%s MIG 1g.5gb" % NAME, mig_uuid)],
                         ["GPU 0: %s (UUID: %s)" % (NAME, GPU[3]),
                          "  MIG %-11s Device %2d: (UUID: %s)" % ("1g.5gb", 0, mig_uuid)])
        self.assert_hooks_ran(got, hooks)
        unprepare()

    # ---- 2. the device plugin, CDI names through the CRI ------------------------------

    def device_plugin(self, name, driver_root, hook):
        """The device plugin with cdi-cri, registered with a kubelet played here; returns
        (the plugin, a function: [device ID] -> the CDI names Allocate returns, the spec)."""
        import grpc
        from concurrent import futures
        import dpapi
        dp = scratch.socket_dir("gdp-dp-")  # the kubelet's and the plugin's sockets
        regs = queue.Queue()

        def register(req, _ctx):
            regs.put(req)
            return dpapi.pb.Empty()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((dpapi.registration_handler(register),))
        server.add_insecure_port(dpapi.unix_target(os.path.join(dp, "kubelet.sock")))
        server.start()
        self.addCleanup(server.stop, None)
        p = self.start_plugin(name, ["--kubelet-socket", os.path.join(dp, "kubelet.sock"),
                                     "--device-list-strategy", "cdi-cri",
                                     "--cdi-spec-dir", self.cdi,
                                     *self.common_args(driver_root, hook)])
        try:
            req = regs.get(timeout=30)
        except queue.Empty:
            self.fail("no Register from the device plugin; its log:\n" + p.text()[-4000:])
        self.assertEqual(req.resource_name, "nvidia.com/gpu")
        ch = dpapi.dial(os.path.join(dp, req.endpoint))
        self.addCleanup(ch.close)
        stub = dpapi.PluginStub(ch)

        def allocate(ids):
            r = stub.Allocate(dpapi.allocate_request([ids]), timeout=30)
            names = [d.name for d in r.container_responses[0].cdi_devices]
            with open(os.path.join(self.cdi, "k8s.device-plugin.nvidia.com-gpu.json")) as f:
                return names, json.load(f)
        return p, allocate

    def test_2_device_plugin_cdi_cri(self):
        _, allocate = self.device_plugin("dp", self.drv, self.hook)
        names, spec = allocate([GPU[0]])
        self.assertEqual(names, ["%s=%s" % (DP_KIND, GPU[0])])
        print()
        got, hooks = self.run_container("dp-one-gpu", names)
        self.assert_sees(got, [(NAME, GPU[0])], ["GPU 0: %s (UUID: %s)" % (NAME, GPU[0])])
        self.assert_hooks_ran(got, hooks)

    # ---- 3. no hook binary ------------------------------------------------------------

    def test_3_no_hook_binary(self):
        p, allocate = self.device_plugin("dp-nohook", self.drv, MISSING_HOOK)
        names, spec = allocate([GPU[1]])
        self.assertEqual(names, ["%s=%s" % (DP_KIND, GPU[1])])
        warnings = [ln for ln in p.text().splitlines() if ln.startswith("W")]
        self.assertEqual(len(warnings), 1, p.text()[-4000:])
        self.assertIn("CDI hook %s: not found" % MISSING_HOOK, warnings[0])
        edits = spec_edits(spec)
        self.assertEqual([e["hooks"] for e in edits if e.get("hooks")], [], spec)
        mounts = {m["containerPath"] for e in edits for m in e.get("mounts", [])}
        for so in ("libcuda.so.1", "libnvidia-ml.so.1"):
            self.assertIn("%s/%s" % (DEBIAN_LIB, so), mounts)
        print()
        got, hooks = self.run_container("dp-no-hook", names)
        self.assertEqual(hooks, [])
        self.assert_sees(got, [(NAME, GPU[1])], ["GPU 0: %s (UUID: %s)" % (NAME, GPU[1])])
        # The SONAME is the library itself, mounted; the image's cache knows nothing of it.
        self.assertEqual(got["libcuda"], (0, [DEBIAN_LIB + "/libcuda.so.1"]))
        self.assertIn(DEBIAN_LIB + "/libcuda.so.1", got["mounts"][1])
        self.assertFalse([ln for ln in got["ldconfig"][1] if "libcuda" in ln], got["ldconfig"])

    # ---- 4. a RHEL-layout driver root, a Debian image ---------------------------------

    def test_4_rhel_layout(self):
        _, allocate = self.device_plugin("dp-rhel", self.rhel, self.hook)
        names, spec = allocate([GPU[0]])
        env = [kv for e in spec_edits(spec) for kv in e.get("env", [])]
        self.assertIn("NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64", env)
        print()
        got, hooks = self.run_container("dp-rhel", names, "/usr/lib64/libcuda.so.1")
        self.assert_sees(got, [(NAME, GPU[0])], ["GPU 0: %s (UUID: %s)" % (NAME, GPU[0])])
        self.assert_hooks_ran(got, hooks, "/usr/lib64")

    def test_5_rhel_layout_no_hook_fails(self):
        """Without the hook binary the libraries are mounted at their SONAMEs in /usr/lib64,
        which Debian's loader does not search (its default directories are
        /lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu, /lib, /usr/lib), and no
        update-ldcache puts them in the cache: dlopen("libcuda.so.1") fails, every time.
        The documented limit of the fallback (docs/allocate.md, "No hook binary")."""
        _, allocate = self.device_plugin("dp-rhel-nohook", self.rhel, MISSING_HOOK)
        names, spec = allocate([GPU[0]])
        print()
        got, hooks = self.run_container("dp-rhel-no-hook", names, "/usr/lib64/libcuda.so.1")
        self.assertEqual(hooks, [])
        self.assertEqual(got["probe"][0], 1, got["probe"])
        self.assertEqual(got["probe"][1], [
            "cuda-probe: dlopen libcuda.so.1: libcuda.so.1: cannot open shared object file: "
            "No such file or directory"])
        self.assertEqual(got["smi"][0], 12, got["smi"])  # NVML not loadable: the real code
        self.assertIn("/usr/lib64/libcuda.so.1", got["mounts"][1])


def main():
    global FAKE, PROBE, ROOTFS, CONTAINERD_BIN, CONTAINERD_VERSION
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    FAKE, PROBE = sys.argv.pop(1), os.path.abspath(sys.argv.pop(1))
    if os.geteuid() != 0:
        cannot_run("needs root (containerd, runc, mknod)")
    for p in (PLUGIN, RENDER, FAKE, PROBE, "/sbin/ldconfig"):
        if not os.path.exists(p):
            cannot_run("missing %s" % p)
    try:
        import grpc  # noqa: F401
        import dpapi  # noqa: F401  (protoc compiles the device-plugin API)
    except (ImportError, OSError, subprocess.CalledProcessError) as e:
        cannot_run("no python3-grpcio or protoc: %s" % e)
    CONTAINERD_BIN, why = containerd17.fetch()
    if why:
        cannot_run(why)
    CONTAINERD_VERSION = containerd17.version(CONTAINERD_BIN)
    if not CONTAINERD_VERSION.startswith("1.7."):  # the config is 1.7's
        print("test_cdi_containerd: %s/containerd is %s, not 1.7" % (CONTAINERD_BIN,
              CONTAINERD_VERSION), file=sys.stderr)
        sys.exit(1)
    r = subprocess.run(["sh", os.path.join(HERE, "debian-rootfs.sh")], capture_output=True,
                       text=True)
    if r.returncode != 0:
        cannot_run(r.stderr.strip() or "debian-rootfs.sh failed")
    ROOTFS = r.stdout.strip()
    print("containerd %s, rootfs %s" % (CONTAINERD_VERSION, ROOTFS))
    containerd17.install_signal_handlers()
    try:
        unittest.main(verbosity=2)
    finally:
        # However unittest ends (an error outside a test, such as a closed output pipe,
        # skips the class cleanups): the daemon, its shims and mounts go before scratch's
        # exit handler removes the directory.
        for c in list(containerd17._live):
            c.stop(fast=True)


if __name__ == "__main__":
    main()
