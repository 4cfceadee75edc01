#!/usr/bin/python3
"""A GPU share held to its memory in a container a real containerd 1.7 builds from the share's
CDI IDs (issue 32 item 5: "a container that allocates over its share fails and one under it
succeeds, through containerd with the claim's CDI IDs"; and "the cgroup path is tested end
to end through containerd").

The real binary as the DRA plugin (`serve --dra --dra-consumable-capacity`) on 8 simulated
A100 40GB (sim/nvml/default-node.yaml: its /dev as character devices with NVIDIA's numbers,
as test_dra_containerd.py makes them; its driver root rendered by `nvml-sim-render
--driver-root`, given as --driver-root and --driver-root-ctr-path, with the nvidia-cdi-hook
stand-in of tests/cdi), the fake API server at v1.36.3, a claim of one 8Gi share placed by
the scheduler stand-in (dra_scheduler.py), and the MPS runner (`mps-control-daemon --dra`)
with the simulator's nvidia-cuda-mps-control stand-in: the share's daemon listens on the
pipe directory the spec mounts at /tmp/nvidia-mps. containerd 1.7 (tests/dra/containerd17.py),
CDI on, runs the plain Debian image of tests/cdi (debian-rootfs.sh) with alloc-probe
(tests/cdi-hook/alloc-probe.c: cuInit, cuMemGetInfo, cuMemAlloc of N bytes) given only the
share's CDI IDs and MOCK_NVML_CONFIG. The libcuda stand-in from the driver root connects to
the daemon through the mounted pipe directory and applies the client limit of the spec's
CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, and the hard limit on its own cgroup.

The share's createRuntime / poststop hooks (gpu-device-plugin-cdi-hook, installed by the
plugin) run in this container's creation (the container starts only if the first exits 0)
and removal. runc gives a hook only the environment its spec entry lists, so the hook's NVML
(the driver root's) takes the simulator's profile and settings log from the driver root's
settings file (`--sim-env`, sim/nvml/sim-env.h): the plugin and the hook are not told.
The containers run on a cgroup v2 host: this one, or, where /sys/fs/cgroup is not cgroup2,
a private mount namespace with cgroup2 mounted over it (cgroup2ns.py: runc and containerd
then put every container in the v2 hierarchy, in its own cgroup namespace). Cases:

- HardLimit, driver 615.x (the built-in node with an r615 driver): the hook finds the
  container's cgroup from its pid and sets the share's hard limit on it, the limit is
  checked on the running container's own v2 cgroup from the host (its processes' "0::"
  line, the simulator's record on the directory, the settings log); in the container,
  within the share allocated, 12 GiB refused, and refused too with CUDA_MPS_PIPE_DIRECTORY
  pointed elsewhere (not an MPS client): the hard limit, not MPS, refused it; exactly the
  share (8 GiB) still allocated. The poststop hook's reset leaves no limit behind.
- MpsOnly, driver 550 (the built-in node): the setter is NOT_SUPPORTED, the hook says so and
  exits 0, the share is held by MPS's per-client limit only: 12 GiB refused to the MPS
  client, allocated outside MPS (docs/cdi-hook.md "What is enforced"), recorded so that a
  change of the model is seen.
- LegacyV1, driver 615.x on a legacy cgroup v1 host (no cgroup2 mounted; where the host is
  hybrid, a private mount namespace with its cgroup2 mounts unmounted; a v2 host cannot be
  made one, the case skips there): the container's processes read "0::/" from the host (the
  v2 root they never left); the hook sees /sys/fs/cgroup is not cgroup2, says MPS-only and
  exits 0 without asking NVML, and the container runs held by MPS only, as MpsOnly.

Needs root, the simulator, alloc-probe, unshare(1) and a mountable cgroup2 (not a v2 host)
and, the first time, Debian's archive. Skips (exit 77) with the reason when it cannot run,
except under CI=true, where that fails.

usage: test_dra_shares_containerd.py <fake-apiserver> <alloc-probe>"""
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kube"))
sys.path.insert(0, os.path.join(HERE, "..", "cdi"))
import kubetest as kt  # noqa: E402
from kubetest import scratch  # noqa: E402
import skip  # noqa: E402  (tests/common/skip.py)
import containerd17  # noqa: E402
import cgroup2ns  # noqa: E402
from containerd17 import decode, ld, vi  # noqa: E402
import test_dra_containerd as dra  # noqa: E402  (its node and kubelet helpers)
import test_cdi_containerd as cdi  # noqa: E402  (its driver root and output sections)
from dra_scheduler import Pool  # noqa: E402

# The simulator's built-in node (8 A100 40GB, driver 550), written out; HardLimit's copy
# has an r615 driver (R615 below), which has the per-cgroup limits.
PROFILE = os.path.normpath(os.path.join(HERE, "..", "..", "sim", "nvml", "default-node.yaml"))
R615 = (("550.163.01", "615.44.01"), ("cuda_version_major: 12", "cuda_version_major: 13"))
UUID0 = "GPU-12345678-1234-1234-1234-123456780000"
NODE = dra.NODE
DRIVER = dra.DRIVER
KIND = "k8s.gpu.nvidia.com/claim"
IMAGE = "localhost/gdp-shares/debian:1"
CTR_PROFILE = "/etc/nvml-sim/profile.yaml"
LEGACY_MARK = "GDP_LEGACY_V1_NS"  # in legacy_run's namespace
GI = 1 << 30
FAKE = PROBE = ROOTFS = CONTAINERD_BIN = CONTAINERD_VERSION = None
# "escape": not an MPS client (no daemon at that pipe directory); "wait": the container
# stays until the test has looked at its cgroup from the host (/gate/go).
SCRIPT = r"""sec() { n=$1; shift; echo "== $n"; "$@" 2>&1; echo "== rc $?"; }
sec cgroup cat /proc/self/cgroup
sec under alloc-probe %d
sec over alloc-probe %d
sec escape env CUDA_MPS_PIPE_DIRECTORY=/nonexistent alloc-probe %d
sec escape-share env CUDA_MPS_PIPE_DIRECTORY=/nonexistent alloc-probe %d
sec mps cat /tmp/mps-debug
sec env busybox env
echo "== wait"
while [ ! -e /gate/go ]; do busybox sleep 0.05; done
echo "== end"
""" % (4 * GI, 12 * GI, 12 * GI, 8 * GI)
XATTR = "user.nvidia-sim.memory-limits"  # the simulator's record on a cgroup2 directory
SMI = """#!/bin/sh
{ printf 'nvidia-smi'; for a in "$@"; do printf ' %%s' "$a"; done; echo; } >> %s
"""
MPS_WRAP = """#!/bin/sh
MOCK_MPS_LOG=%s exec %s "$@"
"""


def text_of(path):
    with open(path) as f:
        return f.read()


def cannot_run(why):
    skip.cannot_run("test_dra_shares_containerd", why, "skipped")


def legacy_host():
    """No cgroup2 mounted anywhere (a legacy cgroup v1 host, or its namespace)."""
    with open("/proc/self/mountinfo") as f:
        return not any(ln.split(" - ")[1].startswith("cgroup2 ") for ln in f)


def legacy_run(argv):
    """The test again where no cgroup2 is mounted: a private mount namespace without this
    host's cgroup2 mounts (the host's mounts stay). Its exit status."""
    with open("/proc/self/mountinfo") as f:
        cg2 = [ln.split()[4] for ln in f if ln.split(" - ")[1].startswith("cgroup2 ")]
    umount = "".join("umount %s && " % m for m in reversed(cg2))
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           umount + 'exec "$@"', "sh", sys.executable] + argv,
                          env=dict(os.environ, **{LEGACY_MARK: "1"})).returncode


class ShareInContainer:
    """The set-up of the cases; a case's class sets R615 (and LEGACY) and its test."""
    R615 = False
    LEGACY = False

    def setUp(self):
        if self.LEGACY != legacy_host():
            self.skipTest("a legacy cgroup v1 host case" if self.LEGACY else "a cgroup v2 case")
        self.t0 = time.monotonic()
        self.tmp = scratch.mkdtemp("gdp-shr-ctr-")
        self.addCleanup(scratch.remove, self.tmp)  # last: after every child is gone
        self.profile = PROFILE
        if self.R615:
            with open(PROFILE) as f:
                text = f.read()
            for old, new in R615:
                text = text.replace(old, new)
            self.profile = os.path.join(self.tmp, "node-r615.yaml")
            with open(self.profile, "w") as f:
                f.write(text)
        dra.PROFILE = cdi.PROFILE = self.profile  # their node, driver root and plugin: this one
        self.host = dra.render_node(self.tmp)
        self.drv = os.path.join(self.tmp, "driver")
        # What every process that loads the driver root's NVML simulates and records, the
        # hooks' included (they get no environment from runc)
        self.settings = os.path.join(self.tmp, "nvml-settings.log")
        cdi.render_driver_root(self.drv, "--sim-env", "MOCK_NVML_CONFIG=" + self.profile,
                               "--sim-env", "MOCK_NVML_SETTINGS_LOG=" + self.settings)
        self.gate = os.path.join(self.tmp, "gate")
        os.mkdir(self.gate)
        bindir = os.path.join(self.tmp, "bin")
        os.mkdir(bindir)
        self.cdi_hook = os.path.join(bindir, "nvidia-cdi-hook")
        shutil.copy2(cdi.HOOK_STANDIN, self.cdi_hook)
        self.cdi = os.path.join(self.tmp, "cdi")
        os.mkdir(self.cdi)
        self.mps_log = os.path.join(self.tmp, "mps.log")
        for tool, text in (("nvidia-smi", SMI % os.path.join(self.tmp, "smi.log")),
                           ("nvidia-cuda-mps-control", MPS_WRAP % (
                               self.mps_log, os.path.join(self.drv, "usr", "bin", "nvidia-cuda-mps-control")))):
            with open(os.path.join(bindir, tool), "w") as f:
                f.write(text)
            os.chmod(os.path.join(bindir, tool), stat.S_IRWXU)

        d = scratch.socket_dir("gdp-ctrd-")
        self.cgroup_parent = "/" + cgroup2ns.cgroup_prefix("gdp-shr-ctr") + uuid.uuid4().hex[:8]
        runc = None
        if cgroup2ns.inside():  # this host's v1 controllers are not in the v2 hierarchy
            runc = os.path.join(bindir, "runc")
            cgroup2ns.runc_wrapper(os.path.join(CONTAINERD_BIN, "runc"), runc)
        self.ctrd = containerd17.Containerd(CONTAINERD_BIN, d, self.cdi, self.cgroup_parent, IMAGE,
                                            runc=runc)
        self.addCleanup(self.stop_containerd)
        self.import_image()

        self.srv, kubeconfig, _ = kt.fake_apiserver(self, FAKE, {})
        self.cmd("add " + NODE)
        self.cmd("version v1.36.3")
        socks = scratch.socket_dir("gs-")  # the daemon's socket path within 108 bytes
        self.reg_dir = os.path.join(socks, "reg")
        self.plugins = os.path.join(socks, "plugins")
        self.mps = os.path.join(self.plugins, DRIVER, "mps")
        self.addCleanup(self.unmount_mps)
        common = ["--sysfs-root", os.path.join(self.tmp, "sys"),
                  "--proc-root", os.path.join(self.tmp, "proc"), "--dev-root", self.host]
        # the runner of the MPS daemons (argv[0] mps-control-daemon), NVIDIA's tools on PATH
        env = dict(os.environ, LD_LIBRARY_PATH=dra.SIM_DIR, MOCK_NVML_CONFIG=self.profile,
                   PATH=bindir + ":/usr/bin:/bin")
        self.runner_log = open(os.path.join(self.tmp, "runner.log"), "w+")
        self.addCleanup(self.runner_log.close)
        self.runner = scratch.adopt(subprocess.Popen(
            [sys.executable, "-c", "import os, sys; os.execv(sys.argv[1], ['mps-control-daemon'] + "
             "sys.argv[2:])", dra.PLUGIN, *common, "--dra", "--kubelet-plugins-directory-path",
             self.plugins], stdin=subprocess.DEVNULL, stdout=self.runner_log,
            stderr=subprocess.STDOUT, env=env))
        self.addCleanup(self.stop, self.runner, self.runner_log)
        # the plugin, NVML from the driver root as on a node
        self.dra_plugin = cdi.Plugin([
            "--dra", "--dra-consumable-capacity", "--node-name", NODE, "--kubeconfig", kubeconfig,
            "--cdi-root", self.cdi, "--kubelet-registrar-directory-path", self.reg_dir,
            "--kubelet-plugins-directory-path", self.plugins,
            "--kubelet-socket", os.path.join(self.tmp, "dp", "kubelet.sock"),
            "--cdi-spec-dir", os.path.join(self.tmp, "cdi-dp"), *common,
            "--driver-root", self.drv, "--driver-root-ctr-path", self.drv,
            "--nvidia-cdi-hook-path", self.cdi_hook, "-v", "1"], os.path.join(self.tmp, "plugin.log"))
        self.plugin = self.dra_plugin.proc
        self.addCleanup(self.stop_plugin)

    # -- processes
    def stop(self, p, log):
        if p.poll() is None:
            p.terminate()
        try:
            code = p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            code = p.wait()
        log.flush()
        log.seek(0)
        self.assertEqual(code, 0, log.read()[-4000:])

    def stop_plugin(self):
        code, text = self.dra_plugin.stop()
        self.assertEqual(code, 0, "the plugin's exit status; its log:\n" + text[-4000:])

    def plugin_tail(self):
        return self.dra_plugin.text()[-4000:]

    def unmount_mps(self):
        pid = os.path.join(self.mps, "share-" + hashlib.sha256(UUID0.encode()).hexdigest()[:16], "pipe", "nvidia-cuda-mps-control.pid")
        try:
            with open(pid) as f:
                os.kill(int(f.read()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
        with open("/proc/self/mounts") as f:
            for line in f:
                if line.split()[1].startswith(self.mps):
                    os.system("umount -l %s" % line.split()[1])

    def stop_containerd(self):
        self.ctrd.stop()
        self.assertEqual(containerd17.pids_naming(self.ctrd.sock), [])
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split()[4] for line in f if line.split()[4].startswith(self.tmp)]
        self.assertEqual(mounts, [], "mounts left under the test's directory")

    def import_image(self):
        root = os.path.join(self.tmp, "image-root")
        shutil.copytree(ROOTFS, root, symlinks=True)
        os.makedirs(os.path.join(root, "usr", "local", "bin"), exist_ok=True)
        dst = os.path.join(root, "usr", "local", "bin", "alloc-probe")
        shutil.copyfile(PROBE, dst)
        os.chmod(dst, 0o755)
        subprocess.run(["/sbin/ldconfig", "-r", root], check=True)
        out = os.path.join(self.tmp, "image.tar")
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "e2e", "oci-image.py"),
                            "--rootfs", root, "--name", IMAGE, "--out", out, "--env",
                            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            "--cmd", '["/usr/bin/busybox", "sleep", "600"]'],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("oci-image.py: " + r.stderr)
        self.ctrd.ctr("images", "import", "--snapshotter", "native", out)
        shutil.rmtree(root)
        os.unlink(out)

    kubelet_dials = dra.ContainerdInjectsPreparedClaim.kubelet_dials
    cmd = dra.ContainerdInjectsPreparedClaim.cmd

    def slices(self):
        end = time.monotonic() + 30
        while True:
            self.srv.send("rs-dump")
            out = []
            while True:
                m = self.srv.expect(r"^rs(-count)? (\S+)(?: (.*))?$")
                if m.group(1):
                    self.srv.expect(r"^ok rs-dump$")
                    break
                out.append(json.loads(m.group(3)))
            if any(s["spec"].get("devices") for s in out):
                return out
            if time.monotonic() > end:
                self.fail("no ResourceSlice published; plugin log:\n" + self.plugin_tail())
            time.sleep(0.1)

    def run_pod(self):
        meta = ld(1, "shares-ctr") + ld(2, uuid.uuid4().hex) + ld(3, "default")
        self.logs = os.path.join(self.tmp, "logs")
        os.mkdir(self.logs)
        self.podcfg = (ld(1, meta) + ld(3, self.logs) +
                       ld(8, ld(1, self.cgroup_parent) + ld(2, ld(1, dra.NS_OPTS))))
        self.sid = decode(self.ctrd.cri("RunPodSandbox", ld(1, self.podcfg), 60))[1][0].decode()
        self.addCleanup(self.remove_pod)

    def remove_pod(self):
        self.ctrd.cri("StopPodSandbox", ld(1, self.sid), 60)
        self.ctrd.cri("RemovePodSandbox", ld(1, self.sid), 60)

    def run_container(self, name, cdi_ids):
        """The container's output sections and what the host saw of its cgroup while it ran
        (host_view)."""
        mounts = [ld(1, CTR_PROFILE) + ld(2, os.path.realpath(self.profile)) + vi(3, 1),
                  ld(1, "/gate") + ld(2, self.gate) + vi(3, 1)]
        env = (ld(6, ld(1, "MOCK_NVML_CONFIG") + ld(2, CTR_PROFILE)) +
               ld(6, ld(1, "MOCK_CUDA_MPS_DEBUG") + ld(2, "/tmp/mps-debug")))
        cfg = (ld(1, ld(1, name)) + ld(2, ld(1, IMAGE)) + ld(3, "/bin/sh") + ld(3, "-c") +
               ld(3, SCRIPT) + env + b"".join(ld(7, m) for m in mounts) + ld(11, name + ".log") +
               ld(15, ld(2, ld(3, dra.NS_OPTS))) + b"".join(ld(17, ld(1, i)) for i in cdi_ids))
        cid = decode(self.ctrd.cri("CreateContainer", ld(1, self.sid) + ld(2, cfg) +
                                   ld(3, self.podcfg), 60))[1][0].decode()
        log = os.path.join(self.logs, name + ".log")
        self.ctrd.cri("StartContainer", ld(1, cid), 60)
        end = time.monotonic() + 30
        while not os.path.exists(log) or "== wait\n" not in text_of(log):
            if time.monotonic() > end:
                self.fail("%s did not get to its wait; containerd's log:\n%s" % (
                    name, self.ctrd.log_tail()))
            time.sleep(0.05)
        view = self.host_view(cid)
        open(os.path.join(self.gate, "go"), "w").close()
        code, lines = self.ctrd.wait_exited(cid, log)
        self.ctrd.cri("RemoveContainer", ld(1, cid), 60)
        self.assertEqual(code, 0, "%s's exit code; output: %s" % (name, lines))
        self.assertEqual(lines[-1:], ["== end"], lines)
        view["gone"] = not os.path.exists(view["dir"])
        return cdi.parse_sections(lines), view

    def host_view(self, cid):
        """The running container's cgroup as the host sees it: the directory runc made for it
        (/sys/fs/cgroup/<parent>/<id>, cgroupfs; on v1 that of the pids hierarchy), the "0::"
        lines of its processes, and the simulator's record of limits on the directory (None:
        none)."""
        d = os.path.join("/sys/fs/cgroup/pids" if self.LEGACY else "/sys/fs/cgroup",
                         self.cgroup_parent.lstrip("/"), cid)
        view = {"cid": cid, "dir": d, "lines": [], "record": None}
        with open(os.path.join(d, "cgroup.procs")) as f:
            pids = f.read().split()
        for pid in pids:
            with open("/proc/%s/cgroup" % pid) as f:
                view["lines"] += [ln.strip() for ln in f if ln.startswith("0::")]
        try:
            view["record"] = os.getxattr(d, XATTR).decode()
        except OSError:
            pass
        return view

    def prepare_share(self):
        """An 8Gi share placed by the scheduler stand-in, prepared: (channel, metadata, CDI IDs)."""
        ch = self.kubelet_dials()
        self.addCleanup(ch.close)
        pool = Pool(self.slices())
        r = pool.allocate_results([('type == "gpu"', {"memory": "8Gi"})])
        self.assertEqual((r[0]["device"], r[0]["consumedCapacity"]),
                         ("gpu-0", {"memory": "8Gi", "compute": "10"}))
        with open(dra.CLAIM) as f:
            o = json.load(f)
        md = o["metadata"]
        md["uid"], md["name"] = str(uuid.uuid4()), "share-8gi"
        base = o["status"]["allocation"]["devices"]["results"][0]
        o["status"]["allocation"]["devices"]["results"] = [dict(base, pool=NODE, request="gpus", **r[0])]
        o["spec"]["devices"]["requests"] = [
            dict(o["spec"]["devices"]["requests"][0], name="gpus")]
        self.cmd("rc-json " + json.dumps(o, separators=(",", ":")))
        res = dra.prepare_result(ch.unary_unary(dra.DRA + "NodePrepareResources")(
            dra.claim_msg(md["namespace"], md["uid"], md["name"]), timeout=60))
        err, devs = res[md["uid"]]
        self.assertEqual(err, "", self.plugin_tail())
        ids = ["%s=%s-gpu-0-%s" % (KIND, md["uid"], r[0]["shareID"])]
        self.assertEqual(devs, [("gpu-0", ids)])
        return ch, md, ids

    def run_share(self):
        """The share's container run and checked for what both cases have in common: its
        output sections, the host's view and the settings log's memory-limit lines."""
        ch, md, ids = self.prepare_share()
        self.run_pod()
        got, view = self.run_container("share", ids)
        for sec in ("under", "over", "escape", "escape-share", "mps"):
            for line in got[sec][1]:
                print("  %s: %s" % (sec, line))
        print("  host: %s: %s, limits %r" % (view["dir"], sorted(set(view["lines"])), view["record"]))
        env = dict(kv.partition("=")[::2] for kv in got["env"][1])
        self.assertEqual(env.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=8192M")
        self.assertEqual(env.get("CUDA_MPS_PIPE_DIRECTORY"), "/tmp/nvidia-mps")
        # a cgroup v2 host: the container in its own cgroup namespace; from the host its
        # processes are in the v2 cgroup runc made under the pod's parent. Legacy v1: in the
        # v2 root, "0::/" from the host too (what the hook reads)
        self.assertEqual(got["cgroup"][0], 0, got["cgroup"])
        self.assertEqual([ln for ln in got["cgroup"][1] if ln.startswith("0::")], ["0::/"])
        self.assertTrue(view["lines"], view)
        self.assertEqual(set(view["lines"]), {"0::/"} if self.LEGACY else
                         {"0::%s/%s" % (self.cgroup_parent, view["cid"])})
        self.assertTrue(view["gone"], "the container's cgroup outlived its removal")
        mps = got["mps"][1]
        self.assertEqual(got["mps"][0], 0, mps)
        self.assertEqual(len([ln for ln in mps if ln.startswith("mps /tmp/nvidia-mps server ")]), 2, mps)
        self.assertEqual(mps.count("device 0 %s pinned %d thread 10.0" % (UUID0, 8 * GI)), 2, mps)
        self.assertEqual(mps.count("mps /nonexistent none"), 2, mps)
        # the daemon saw its clients (its log), and one daemon started: r615 speaks MPS v3,
        # the share in a namespace of its own with the share's limits (docs/dra.md)
        with open(self.mps_log) as f:
            log = f.read().splitlines()
        start = "nvidia-cuda-mps-control -d -p 3" if self.R615 else "nvidia-cuda-mps-control -d"
        self.assertEqual(len([ln for ln in log if ln == start]), 1, log[:20])
        sets = [ln for ln in log if ln.startswith("stdin namespace set ")]
        self.assertEqual(len(sets), 1 if self.R615 else 0, log)
        if self.R615:
            self.assertTrue(sets[0].endswith("--pinned-memory-limit=8192M --active-thread-percentage=10"), sets)

        # Unprepared: the daemon stopped, its directory gone.
        ch.unary_unary(dra.DRA + "NodeUnprepareResources")(
            dra.claim_msg(md["namespace"], md["uid"], md["name"]), timeout=60)
        self.assertFalse(os.path.exists(os.path.join(self.mps, "share-" + hashlib.sha256(UUID0.encode()).hexdigest()[:16])))
        limits = []
        if os.path.exists(self.settings):
            with open(self.settings) as f:
                limits = [ln for ln in f.read().splitlines()
                          if ln.startswith("nvmlDeviceSetMemoryLimits_v1 ")]
        for line in limits:
            print("  settings: " + line)
        return got, view, limits

    def done(self, what):
        print("containerd %s: a share's container %s in %.1f s" % (
            CONTAINERD_VERSION, what, time.monotonic() - self.t0))


class HardLimit(ShareInContainer, unittest.TestCase):
    R615 = True

    def test_share_held_by_its_cgroup(self):
        got, view, limits = self.run_share()
        ns = "/sys/fs/cgroup%s/%s" % (self.cgroup_parent, view["cid"])
        # the createRuntime hook set the share on the container's own v2 cgroup
        self.assertEqual(view["record"], "%s 0 %d\n" % (UUID0, 8 * GI))
        # ... once. The poststop hook's reset records nothing: runc (1.1) removes the
        # container's cgroup before it runs poststop hooks, so the reset (the same path, from
        # the bundle's linux.cgroupsPath) finds no cgroup, which the hook takes as done (exit
        # 0); the limit went with the directory (checked: view["gone"]). A runtime that ran
        # poststop first would add "... 0 max" here.
        self.assertEqual(limits, ["nvmlDeviceSetMemoryLimits_v1 %s %s 0 %d" % (UUID0, ns, 8 * GI)])
        total = "total %d" % (8 * GI)  # the hard limit of its own cgroup is the total it sees
        oom = (3, [total, "alloc failed CUDA_ERROR_OUT_OF_MEMORY"])
        self.assertEqual(got["under"], (0, [total, "alloc ok"]))
        self.assertEqual(got["over"], oom)
        # not an MPS client: the hard limit, not MPS, refuses over the share, and allows it
        self.assertEqual(got["escape"], oom)
        self.assertEqual(got["escape-share"], (0, [total, "alloc ok"]))
        self.done("held to 8 GiB by its cgroup's hard limit (and MPS)")


class MpsOnly(ShareInContainer, unittest.TestCase):
    R615 = False

    def test_share_held_by_mps_only(self):
        # driver 550: the setter is NOT_SUPPORTED, the hook exits 0, nothing is recorded
        self.check_mps_only(*self.run_share())
        self.done("held to 8 GiB by MPS only (driver 550)")

    def check_mps_only(self, got, view, limits):
        self.assertIsNone(view["record"])
        self.assertEqual(limits, [])
        total = "total %d" % (40 * GI)  # an MPS limit leaves the whole GPU as total
        self.assertEqual(got["under"], (0, [total, "alloc ok"]))
        self.assertEqual(got["over"], (3, [total, "alloc failed CUDA_ERROR_OUT_OF_MEMORY"]))
        self.assertEqual(got["escape"], (0, [total, "alloc ok"]))
        self.assertEqual(got["escape-share"], (0, [total, "alloc ok"]))


class LegacyV1(ShareInContainer, unittest.TestCase):
    R615 = True
    LEGACY = True

    def test_share_held_by_mps_only_on_v1(self):
        # the hook decides by /sys/fs/cgroup (not cgroup2) before NVML: no limit asked for
        MpsOnly.check_mps_only(self, *self.run_share())
        self.done("held to 8 GiB by MPS only (legacy cgroup v1, driver 615)")


def main():
    global FAKE, PROBE, ROOTFS, CONTAINERD_BIN, CONTAINERD_VERSION
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    argv = list(sys.argv)
    FAKE, PROBE = sys.argv.pop(1), os.path.abspath(sys.argv.pop(1))
    if os.geteuid() != 0:
        cannot_run("needs root (containerd, runc, mknod, the daemon's tmpfs)")
    for p in (dra.PLUGIN, cdi.RENDER, FAKE, PROBE, "/sbin/ldconfig"):
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
    r = subprocess.run(["sh", os.path.join(HERE, "..", "cdi", "debian-rootfs.sh")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        cannot_run(r.stderr.strip() or "debian-rootfs.sh failed")
    ROOTFS = r.stdout.strip()
    if not cgroup2ns.host_is_v2() and not os.environ.get(LEGACY_MARK):
        if cgroup2ns.inside():
            sys.exit("test_dra_shares_containerd: /sys/fs/cgroup is not cgroup2 in the namespace")
        if not shutil.which("unshare"):
            cannot_run("/sys/fs/cgroup is not cgroup2 and there is no unshare(1) to make a "
                       "namespace where it is")
        code = legacy_run(argv)  # LegacyV1 (the others skip), then the v2 cases
        sys.exit(cgroup2ns.rerun(argv, cannot_run) or code)
    containerd17.install_signal_handlers()
    try:
        unittest.main(verbosity=2)
    finally:
        for c in list(containerd17._live):
            c.stop(fast=True)


if __name__ == "__main__":
    main()
