#!/usr/bin/python3
"""gpu-device-plugin-cdi-hook share-memory-limit (src/cmd_cdi_hook.c, docs/cdi-hook.md) on
the simulated host: the OCI state on stdin, a fake /proc (GDP_CDI_HOOK_PROC_ROOT) placing
the container's process in a cgroup directory under MOCK_NVML_CGROUP_ROOT, the simulated
NVML recording the limit (MOCK_NVML_SETTINGS_LOG) and the libcuda stand-in enforcing it
(alloc-probe with MOCK_CUDA_CGROUP at that cgroup). The hook looks at that tree's root as at
/sys/fs/cgroup (GDP_CDI_HOOK_CGROUP_ROOT): cgroup v2 when it has cgroup.controllers. Any
user; as root also the real /sys/fs/cgroup's type, in a private mount namespace (the host's
mounts untouched). Leaves nothing in $TMPDIR.

usage: test_cdi_hook.py HOOK PLUGIN ALLOC_PROBE   (env GDP_BUILD_DIR)"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import scratch  # noqa: E402

HOOK = PLUGIN = PROBE = None
BUILD = os.environ.get("GDP_BUILD_DIR", "")
GPU0 = "GPU-11111111-2222-3333-4444-555555555550"
GPU1 = "GPU-11111111-2222-3333-4444-555555555551"  # MIG mode on
MIB, GIB = 1 << 20, 1 << 30
POD = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice"
CTR = POD + "/cri-containerd-abc.scope"
SYSTEMD_PATH = "kubepods-besteffort-pod1.slice:cri-containerd:abc"
PID = 4242
ONLY_MPS = "the share is enforced by MPS's per-client limit only"


class Host:
    """A simulated node: a profile, /dev, a cgroup v2 tree, a fake /proc, a bundle."""

    def __init__(self, driver="615.20.01", v2=True):
        self.dir = scratch.mkdtemp("gdp-cdi-hook-")
        self.root = os.path.join(self.dir, "cg")
        self.log = os.path.join(self.dir, "settings.log")
        os.makedirs(os.path.join(self.root, CTR))
        os.makedirs(os.path.join(self.root, "kubepods", "pod2", "ctr2"))
        if v2:
            self.write("cg/cgroup.controllers", "cpuset cpu io memory pids\n")
        gpu = ('  - {uuid: %s, name: "NVIDIA H100 80GB HBM3", compute_capability: {major: 9},\n'
               '     memory: {total_bytes: 85899345920}, pci: {bus_id: "0000:%s:00.0"},'
               ' minor_number: %d%s}\n')
        self.write("host.yaml",
                   'system: {driver_version: "%s", cuda_version: "13.4"}\ndevices:\n' % driver
                   + gpu % (GPU0, "18", 0, "") + gpu % (GPU1, "2a", 1, ", mig: {mode_current: enabled}"))
        self.write("dev/nvidia0", "")
        self.write("dev/nvidia1", "")
        self.proc(PID, "0::/%s\n" % CTR)
        self.bundle = os.path.join(self.dir, "bundle")
        self.config(SYSTEMD_PATH)
        libs = [os.path.join(BUILD, "sim", "nvml"), os.path.join(BUILD, "sim", "cuda")]
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("MOCK_", "CUDA_", "GDP_CDI_HOOK"))}
        self.env.update(MOCK_NVML_CONFIG=os.path.join(self.dir, "host.yaml"),
                        MOCK_DRIVER_DEV_ROOT=os.path.join(self.dir, "dev"),
                        MOCK_NVML_CGROUP_ROOT=self.root, MOCK_NVML_SETTINGS_LOG=self.log,
                        GDP_CDI_HOOK_PROC_ROOT=os.path.join(self.dir, "proc"),
                        GDP_CDI_HOOK_CGROUP_ROOT=self.root,
                        LD_LIBRARY_PATH=":".join(libs))

    def write(self, rel, text, mode="w"):
        path = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, mode) as f:
            f.write(text)
        return path

    def proc(self, pid, text):
        self.write("proc/%d/cgroup" % pid, text)

    def config(self, cgroups_path):
        self.write("bundle/config.json", json.dumps(
            {"ociVersion": "1.2.0", "process": {"args": ["sh"]},
             "linux": {"cgroupsPath": cgroups_path, "namespaces": [{"type": "pid"}]}}))

    def state(self, pid=PID, status="creating", **extra):
        s = {"ociVersion": "1.2.0", "id": "abc", "status": status, "bundle": self.bundle,
             "annotations": {"io.kubernetes.cri.container-type": "container"}}
        if pid is not None:
            s["pid"] = pid
        s.update(extra)
        return json.dumps(s)

    def hook(self, *args, stdin=None, prog=None, env=None):
        cmd = ([PLUGIN, "cdi-hook"] if prog == "plugin" else [HOOK]) + ["share-memory-limit", *args]
        stdin = self.state() if stdin is None else stdin
        data = stdin if isinstance(stdin, bytes) else stdin.encode()
        e = dict(self.env, **(env or {}))
        return subprocess.run(cmd, input=data, capture_output=True, env=e, timeout=30)

    def settings(self):
        try:
            with open(self.log) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def alloc(self, nbytes, cgroup=CTR):
        env = dict(self.env, MOCK_CUDA_CGROUP=os.path.join(self.root, cgroup))
        p = subprocess.run([PROBE, str(nbytes)], capture_output=True, text=True, env=env,
                           timeout=30)
        return p.returncode, p.stdout


class CdiHook(unittest.TestCase):
    def assert_one_line(self, p, code, text):
        err = p.stderr.decode()
        self.assertEqual(p.returncode, code, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn(text, err)

    def test_limit_lands_is_enforced_and_reset(self):
        h = Host()
        before = h.alloc(20 * GIB)
        self.assertEqual(before[0], 0, before)
        p = h.hook("--gpu", GPU0, "--bytes", str(8 * GIB))
        self.assertEqual((p.returncode, p.stderr), (0, b""))
        self.assertEqual(h.settings(), ["nvmlDeviceSetMemoryLimits_v1 %s /sys/fs/cgroup/%s 0 %d"
                                        % (GPU0, CTR, 8 * GIB)])
        # the container's CUDA: its total is the share, over it fails, under it succeeds
        code, out = h.alloc(8 * GIB + MIB)
        self.assertEqual(code, 3, out)
        self.assertIn("total %d\n" % (8 * GIB), out)
        self.assertIn("alloc failed CUDA_ERROR_OUT_OF_MEMORY", out)
        code, out = h.alloc(8 * GIB - MIB)
        self.assertEqual((code, out.splitlines()[-1]), (0, "alloc ok"), out)
        # another container is not limited
        self.assertEqual(h.alloc(20 * GIB, "kubepods/pod2/ctr2")[0], 0)
        # poststop: the process is gone, the cgroup is found from the bundle (systemd form)
        p = h.hook("--gpu", GPU0, "--reset", stdin=h.state(pid=None, status="stopped"))
        self.assertEqual((p.returncode, p.stderr), (0, b""))
        self.assertEqual(h.settings()[-1], "nvmlDeviceSetMemoryLimits_v1 %s /sys/fs/cgroup/%s 0 max"
                         % (GPU0, CTR))
        self.assertFalse(os.path.exists(os.path.join(h.root, CTR, "nvidia-sim.memory-limits")))
        self.assertEqual(h.alloc(20 * GIB)[0], 0)

    def test_reset_by_pid_and_cgroupfs_path(self):
        h = Host()
        self.assertEqual(h.hook("--gpu", GPU0, "--bytes", str(GIB)).returncode, 0)
        # a live pid: its cgroup (the plugin's subcommand is the same hook)
        p = h.hook("--gpu", GPU0, "--reset", stdin=h.state(status="stopped"), prog="plugin")
        self.assertEqual((p.returncode, p.stderr), (0, b""))
        self.assertTrue(h.settings()[-1].endswith(" 0 max"))
        # a dead pid (no /proc entry) and a cgroupfs cgroupsPath
        h.config("/kubepods/pod2/ctr2")
        h.proc(77, "0::/kubepods/pod2/ctr2\n")
        self.assertEqual(h.hook("--gpu", GPU0, "--bytes", str(GIB), stdin=h.state(pid=77)).returncode, 0)
        p = h.hook("--gpu", GPU0, "--reset", stdin=h.state(pid=78, status="stopped"))
        self.assertEqual((p.returncode, p.stderr), (0, b""))
        self.assertEqual(h.settings()[-1],
                         "nvmlDeviceSetMemoryLimits_v1 %s /sys/fs/cgroup/kubepods/pod2/ctr2 0 max" % GPU0)
        # the cgroup already gone (runc removes it before poststop): nothing to do
        h.config("/kubepods/pod9/gone")
        p = h.hook("--gpu", GPU0, "--reset", stdin=h.state(pid=None, status="stopped"))
        self.assertEqual((p.returncode, p.stderr), (0, b""))

    def test_driver_root(self):
        h = Host()
        lib = os.path.join(h.dir, "driver", "usr", "lib64")
        os.makedirs(lib)
        os.symlink(os.path.join(BUILD, "sim", "nvml", "libnvidia-ml.so.1"),
                   os.path.join(lib, "libnvidia-ml.so.1"))
        p = h.hook("--gpu", GPU0, "--bytes", str(GIB), "--driver-root", os.path.join(h.dir, "driver"),
                   env={"LD_LIBRARY_PATH": ""})
        self.assertEqual((p.returncode, p.stderr), (0, b""))
        self.assertEqual(len(h.settings()), 1)

    def test_not_supported_is_mps_only(self):
        cases = [("driver 550", Host(driver="550.163.01"), {}, GPU0),
                 ("cgroup v1 (NVML)", Host(), {"MOCK_NVML_CGROUP_VERSION": "1"}, GPU0),
                 ("cgroup v1 host (no 0:: line)", Host(v2=False), {}, GPU0),
                 ("MIG mode on", Host(), {}, GPU1),
                 ("no NVML under the driver root", Host(), {"LD_LIBRARY_PATH": ""}, GPU0)]
        cases[2][1].proc(PID, "12:memory:/kubepods/pod1\n1:name=systemd:/kubepods/pod1\n")
        for name, h, env, gpu in cases:
            with self.subTest(name):
                p = h.hook("--gpu", gpu, "--bytes", str(GIB), env=env)
                self.assert_one_line(p, 0, ONLY_MPS)
                self.assertEqual(h.settings(), [])
                self.assertEqual(h.alloc(20 * GIB)[0], 0)
                # the reset says nothing there
                p = h.hook("--gpu", gpu, "--reset", env=env)
                self.assertEqual((p.returncode, p.stderr), (0, b""))

    def test_not_v2_host_is_mps_only(self):
        # /sys/fs/cgroup not cgroup2: a legacy v1 host, where the container's "0::" line is
        # the v2 root it never left, and a hybrid one (cgroup2 at unified); NVML not asked
        v1_lines = "12:memory:/kubepods/pod1\n1:name=systemd:/kubepods/pod1\n"
        for name, line in [("legacy v1", "0::/\n"), ("hybrid", "0::/%s\n" % CTR)]:
            with self.subTest(name):
                h = Host(v2=False)
                h.proc(PID, v1_lines + line)
                p = h.hook("--gpu", GPU0, "--bytes", str(GIB))
                self.assert_one_line(p, 0, ONLY_MPS)
                self.assertIn("/sys/fs/cgroup is not cgroup v2", p.stderr.decode())
                p = h.hook("--gpu", GPU0, "--reset", stdin=h.state(status="stopped"))
                self.assertEqual((p.returncode, p.stderr), (0, b""))
                self.assertEqual(h.settings(), [])

    def test_real_cgroup_mount(self):
        """The hook's own look at /sys/fs/cgroup (no override), in a private mount namespace:
        a tmpfs there (v1) lets "0::/" start MPS-only, cgroup2 there refuses it."""
        if os.geteuid() != 0:
            self.skipTest("needs root (a mount namespace)")
        h = Host()
        h.proc(PID, "0::/\n")
        env = dict(h.env)
        del env["GDP_CDI_HOOK_CGROUP_ROOT"]
        # cgroup2 mounted where the kernel shows no "0::" line yet would make it show one
        # for every process from then on: only where some cgroup2 was mounted already
        with open("/proc/self/cgroup") as f:
            v2_seen = any(ln.startswith("0::") for ln in f)
        for fs, code, why in [("tmpfs", 0, ONLY_MPS), ("cgroup2", 1, "createRuntime")]:
            with self.subTest(fs):
                if fs == "cgroup2" and not v2_seen:
                    self.skipTest("cgroup2 never mounted on this host")
                cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       'mount -t %s %s /sys/fs/cgroup && exec "$@"' % (fs, fs), "sh",
                       HOOK, "share-memory-limit", "--gpu", GPU0, "--bytes", str(GIB)]
                try:
                    p = subprocess.run(cmd, input=h.state().encode(), capture_output=True,
                                       env=env, timeout=30)
                except FileNotFoundError:
                    self.skipTest("no unshare(1)")
                if b"mount" in p.stderr and b"share-memory-limit" not in p.stderr:
                    self.skipTest("no mount namespace here: %s" % p.stderr.decode().strip())
                self.assert_one_line(p, code, why)
        self.assertEqual(h.settings(), [])

    def test_bad_state(self):
        h = Host()
        deep = "[" * 100000 + "]" * 100000
        cases = {
            "empty": b"",
            "not JSON": b"hello",
            "truncated": b'{"pid": 4242',
            "trailing bytes": b'{"pid": 4242} x',
            "a NUL": b'{"pid": 4242, "id": "a\x00b"}',
            "deep": ('{"a": %s, "pid": 4242}' % deep).encode(),
            "oversized": b'{"pid": 4242, "id": "' + b"x" * (2 << 20) + b'"}',
            "pid not a number": b'{"pid": {"x": 1}}',
            "pid negative": b'{"pid": -5}',
            "pid huge": b'{"pid": 99999999999999999999}',
            "no pid": b'{"id": "abc"}',
            "pid of nothing": b'{"pid": 999}',
            "bad escape": b'{"pid": 4242, "id": "\\q"}',
            "binary": bytes(range(256)),
        }
        for name, data in cases.items():
            with self.subTest(name):
                p = h.hook("--gpu", GPU0, "--bytes", str(GIB), stdin=data)
                self.assert_one_line(p, 1, "cdi-hook share-memory-limit: share of %s: " % GPU0)
        self.assertEqual(h.settings(), [])

    def test_cgroup_refused(self):
        h = Host()
        for name, text, why in [
                # v2 host: the hook ran in the container's cgroup namespace
                ("cgroup namespace root", "0::/\n", "createRuntime"),
                ("dot dot", "0::/kubepods/../../etc\n", "not a usable cgroup v2 path"),
                ("deleted", "0::/%s (deleted)\n" % CTR, "not a usable cgroup v2 path"),
                ("no such cgroup", "0::/kubepods/pod9/ctr9\n", "must not start unbounded")]:
            with self.subTest(name):
                h.proc(PID, text)
                self.assert_one_line(h.hook("--gpu", GPU0, "--bytes", str(GIB)), 1, why)
        self.assertEqual(h.settings(), [])

    def test_usage(self):
        h = Host()
        for args in [[], ["--gpu", GPU0], ["--gpu", "nvidia0", "--bytes", "1"],
                     ["--gpu", GPU0, "--bytes", "0"], ["--gpu", GPU0, "--bytes", "1x"],
                     ["--gpu", GPU0, "--bytes", str(1 << 51)], ["--gpu", GPU0, "--bytes", "1", "--reset"],
                     ["--gpu", GPU0, "--bytes", "1", "--driver-root", "rel"], ["--gpu"],
                     ["--gpu", GPU0, "--bytes", "1", "--what"]]:
            with self.subTest(args=args):
                self.assertEqual(h.hook(*args).returncode, 2)
        p = subprocess.run([HOOK, "set"], capture_output=True, env=h.env)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    HOOK, PLUGIN, PROBE = sys.argv[1:4]
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[4:])
