#!/usr/bin/python3
"""cdi-apply (tests/cdi/cdi-apply*.c): a CDI spec applied without a container runtime, as
scripts/gpu-smoke.sh's section 8 applies a claim's spec on a GPU host.

Input (any user; no namespace is made): a spec that is not JSON, too big, a device not in
it, a relative containerPath, an env entry without "=", a hook of no OCI kind (a poststop
one, as a GPU share's spec carries, is skipped with a note: it would run after the exec), more mounts than
the cap, bad usage, and (run as nobody) a valid spec without root: each is one line
"cdi-apply: ..." on stderr naming the file, field or call, and the exit status says which
(2 usage, 3 this host refuses, 125 the spec).

Semantics (root; a copy of the plain Debian rootfs of debian-rootfs.sh per case): env
replaced by name (runtime default PATH, then --env, then the spec's top-level edits, then
the device's); mounts sorted by depth whatever the spec's order, a later mount at the same
path replacing an earlier one, read-only as listed; destinations through links that climb
out of the rootfs or point at / land inside it; device nodes from type+major/minor with
fileMode, and from an lstat of hostPath; --bind-devices binds the host's node instead;
createContainer hooks in order with exactly their env, the OCI state on stdin and
<bundle>/config.json's root.path, after the mounts and nodes; a startContainer hook in
the chroot; additionalGids; nothing mounted is left in the test's namespace. A hook that
fails and a missing hostPath stop it with one line.

A real claim's spec (root, go-client and the fake API server): the plugin binary in DRA
mode (serve --dra against tests/kube's fake API server) on a driver root that
nvml-sim-render --driver-root lays out (the libcuda and nvidia-smi stand-ins, the
simulated NVML; dev/ with 195:<minor> character devices), one claim of gpu-1 prepared by
`go-client dra-smoke ... -- cdi-apply ...` exactly as section 8 runs it: cuda-probe in the
container sees that GPU alone, as GPU 0, and allocates 1 MiB on it. Once with
--nvidia-cdi-hook-path a copy of the nvidia-cdi-hook stand-in (the four hooks run, in
NVIDIA's order), once with no hook binary (no hooks in the spec; the libraries also at
their SONAME paths).

Not root, or no Debian rootfs, go-client or fake API server: the rest is skipped (exit
77) with the reason, except under CI=true, where that fails. Leaves nothing in $TMPDIR.

usage: test_cdi_apply.py CDI_APPLY CUDA_PROBE RENDER HOOK PLUGIN FAKE_APISERVER GO_CLIENT
       (the last two may be ""; env GDP_SOURCE_DIR, GDP_TEST_DATA; tests/cdi/meson.build)"""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(HERE, "..", "kube"))
import scratch  # noqa: E402
import skip  # noqa: E402  (tests/common/skip.py)
import kubetest as kt  # noqa: E402

SOURCE = os.environ.get("GDP_SOURCE_DIR") or os.path.join(HERE, "..", "..")
DATA = os.environ.get("GDP_TEST_DATA") or os.path.join(SOURCE, "tests", "data")
PROFILE = os.path.join(DATA, "nvml-mock-profiles", "a100.yaml")
NAME = "NVIDIA A100-SXM4-40GB"
LIB = "/usr/lib/x86_64-linux-gnu"
NODE = "cdi-apply-node"
HOOKS = ["create-symlinks", "enable-cuda-compat", "update-ldcache",
         "disable-device-node-modification"]
APPLY = PROBE = RENDER = HOOK = PLUGIN = FAKE = GO_CLIENT = ROOTFS = None


def gpu_uuid(i):
    return "GPU-12345678-1234-1234-1234-12345678000%d" % i  # the profile's


def spec_of(devices, edits=None, kind="example.com/test"):
    s = {"cdiVersion": "0.5.0", "kind": kind,
         "devices": [{"name": n, "containerEdits": e} for n, e in devices.items()]}
    if edits is not None:
        s["containerEdits"] = edits
    return s


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = scratch.mkdtemp("gdp-cdi-apply-")
        self.addCleanup(scratch.remove, self.tmp)
        self.bundle = os.path.join(self.tmp, "b")
        self.rootfs = os.path.join(self.bundle, "rootfs")

    def path(self, name, text=None):
        p = os.path.join(self.tmp, name)
        if text is not None:
            with open(p, "w") as f:
                f.write(text)
        return p

    def spec(self, obj, name="spec.json"):
        return self.path(name, obj if isinstance(obj, str) else json.dumps(obj))

    def apply(self, spec, devices, cmd, *opts, user=None, binary=None):
        argv = [binary or APPLY, "-v", "--spec", spec, "--device", ",".join(devices),
                "--rootfs", self.rootfs, *opts, "--", *cmd]
        pre = (lambda: (os.setgroups([]), os.setgid(user), os.setuid(user))) if user else None
        return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin"}, preexec_fn=pre)

    def assertFailed(self, r, rc, text):
        """Exit status rc and exactly one error line, naming text."""
        errors = [ln for ln in r.stderr.splitlines() if not ln.startswith("cdi-apply| ")]
        self.assertEqual(r.returncode, rc, r.stderr)
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertTrue(errors[0].startswith("cdi-apply: "), errors[0])
        self.assertIn(text, errors[0])


class Input(Case):
    """What cdi-apply refuses before it builds anything."""

    def setUp(self):
        super().setUp()
        os.makedirs(self.rootfs)
        self.good = spec_of({"a": {"env": ["A=1"]}})

    def test_not_json_too_big_unknown_device(self):
        r = self.apply(self.spec("{\"cdiVersion\": "), ["example.com/test=a"], ["/bin/true"])
        self.assertFailed(r, 125, "spec.json: not a JSON CDI spec (line 1")
        big = self.spec(" " * (4 << 20) + "{}", "big.json")
        self.assertFailed(self.apply(big, ["example.com/test=a"], ["/bin/true"]), 125,
                          "big.json: 4194306 bytes, more than the 4194304")
        good = self.spec(self.good)
        self.assertFailed(self.apply(good, ["example.com/test=b"], ["/bin/true"]), 125,
                          "device example.com/test=b: not in the 1 spec(s) of kind example.com/test")
        self.assertFailed(self.apply(good, ["example.com/other=a"], ["/bin/true"]), 125,
                          "not in the 0 spec(s) of kind example.com/other")

    def test_bad_fields(self):
        cases = [
            ({"mounts": [{"hostPath": "/x", "containerPath": "rel"}]},
             "devices[0].containerEdits.mounts[0].containerPath: \"rel\" is not an absolute path"),
            ({"env": ["NOEQUALS"]}, "devices[0].containerEdits.env[0]: \"NOEQUALS\" is not NAME=VALUE"),
            ({"deviceNodes": [{"path": "/dev/x", "type": "z"}]}, "deviceNodes[0].type: \"z\""),
            ({"deviceNodes": [{"path": "/dev/x", "major": 99999}]}, "deviceNodes[0].major: not an integer"),
            ({"hooks": [{"hookName": "posthumous", "path": "/bin/true"}]}, "\"posthumous\" is no OCI hook"),
            ({"mounts": [{"hostPath": "/x", "containerPath": "/m%d" % i} for i in range(4097)]},
             "mounts: 4097 entries, more than 4096"),
        ]
        for edits, text in cases:
            r = self.apply(self.spec(spec_of({"a": edits})), ["example.com/test=a"], ["/bin/true"])
            self.assertFailed(r, 125, text)
        r = self.apply(self.spec({"kind": "x/y", "devices": []}), ["x/y=a"], ["/bin/true"])
        self.assertFailed(r, 125, "spec.json: cdiVersion: missing")

    def test_usage(self):
        spec = self.spec(self.good)
        r = subprocess.run([APPLY, "--spec", spec, "--device", "example.com/test=a",
                            "--rootfs", self.rootfs], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("a command are needed", r.stderr)
        self.assertFailed(self.apply(spec, ["noslash=a"], ["/bin/true"]), 2,
                          "--device noslash=a: not a CDI device name")

    def test_not_root(self):
        """As nobody: one line, exit 3 (the host refuses), and nothing made in the rootfs."""
        if os.geteuid() == 0:
            # where nobody can reach the files ($TMPDIR may be root's alone)
            d = scratch.mkdtemp("gdp-cdi-apply-", dir="/var/tmp")
            self.addCleanup(scratch.remove, d)
            self.tmp, self.rootfs = d, os.path.join(d, "rootfs")
            os.makedirs(self.rootfs)
            spec = self.spec(self.good)
            # The binary too: the build directory may lie under a directory only root may
            # enter (CI's clone in a mktemp -d).
            binary = os.path.join(d, "cdi-apply")
            shutil.copy2(APPLY, binary)
            for p in (d, self.rootfs, spec, binary):
                os.chmod(p, 0o755)
            r = self.apply(spec, ["example.com/test=a"], ["/bin/true"], user=65534,
                           binary=binary)
        else:
            r = self.apply(self.spec(self.good), ["example.com/test=a"], ["/bin/true"])
        self.assertFailed(r, 3, "building a container needs root (unshare, mount, mknod, chroot)")
        self.assertEqual(os.listdir(self.rootfs), [])


class Semantics(Case):
    """One container per case from a copy of the Debian rootfs (root)."""

    def setUp(self):
        super().setUp()
        os.makedirs(self.bundle)
        shutil.copytree(ROOTFS, self.rootfs, symlinks=True)
        self.escape = "gdp-cdi-apply-escape-%d" % os.getpid()
        os.symlink("../../../../../../..", os.path.join(self.rootfs, "up"))
        os.symlink("/etc", os.path.join(self.rootfs, "etclink"))

    def test_edits_applied(self):
        d = os.path.join(self.tmp, "dir")
        os.makedirs(d)
        self.path("dir/f", "dir\n")
        f, y1, y2 = self.path("file", "file\n"), self.path("y1", "one\n"), self.path("y2", "two\n")
        hostdev = os.path.join(self.tmp, "hostdev")
        os.mknod(hostdev, 0o640 | stat.S_IFCHR, os.makedev(1, 5))
        log = self.path("hook.log")
        hook = self.path("hook.py", r'''#!/usr/bin/python3
import json, os, sys
state = json.load(sys.stdin)
with open(os.path.join(state["bundle"], "config.json")) as f:
    root = json.load(f)["root"]["path"]
with open(os.environ["LOG"], "a") as f:
    env = open("/proc/self/environ").read().split("\0")[:-1]  # as exec gave it (Python adds LC_CTYPE)
    f.write(json.dumps({"argv": sys.argv, "env": env, "state": state,
                        "root": root, "cwd": os.getcwd(),
                        "node": os.path.exists(os.path.join(root, "dev", "mydev")),
                        "mounted": open(os.path.join(root, "opt/x/f")).read()}) + "\n")
''')
        os.chmod(hook, 0o755)
        edits = {"env": ["A=1", "B=1"], "additionalGids": [4321],
                 "mounts": [{"hostPath": y1, "containerPath": "/opt/y", "options": ["ro", "rbind"]},
                            {"hostPath": f, "containerPath": "/up/" + self.escape, "options": ["bind"]}]}
        dev = {"env": ["B=2"],
               # the file over the directory comes first here: only the depth sort makes it win
               "mounts": [{"hostPath": f, "containerPath": "/opt/x/f", "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]},
                          {"hostPath": d, "containerPath": "/opt/x", "options": ["ro", "rbind"]},
                          {"hostPath": y2, "containerPath": "//opt/y/", "options": ["ro", "bind"]},
                          {"hostPath": f, "containerPath": "/etclink/" + self.escape, "options": ["bind"]}],
               "deviceNodes": [{"path": "/dev/mydev", "type": "c", "major": 1, "minor": 3, "fileMode": 0o600},
                               {"path": "/dev/sub/hostdev", "hostPath": hostdev}],
               "hooks": [{"hookName": "createContainer", "path": hook, "args": ["first", "x"],
                          "env": ["LOG=" + log, "X=1"]},
                         {"hookName": "startContainer", "path": "/bin/sh",
                          "args": ["sh", "-c", "echo started > /tmp/started"]},
                         {"hookName": "createContainer", "path": hook, "args": ["second"],
                          "env": ["LOG=" + log]}]}
        script = ("busybox env | grep -E '^(A|B|C|PATH)=' | sort; cat /opt/x/f /opt/y; "
                  "busybox stat -c '%n %F %t:%T %a' /dev/mydev /dev/sub/hostdev /dev/null; "
                  "echo > /opt/x/new 2>/dev/null; echo write $?; busybox id -G")
        r = self.apply(self.spec(spec_of({"a": dev}, edits)), ["example.com/test=a"],
                       ["sh", "-c", script], "--env", "C=3", "--env", "A=0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "A=1", "B=2", "C=3", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "file", "two",
            "/dev/mydev character special file 1:3 600",
            "/dev/sub/hostdev character special file 1:5 640",
            "/dev/null character special file 1:3 666",
            "write 1", "0 4321"])
        with open(log) as fh:
            calls = [json.loads(ln) for ln in fh]
        # args[0] is argv[0] (which a #! script does not see: the kernel puts its path there)
        self.assertEqual([c["argv"][1:] for c in calls], [["x"], []])
        self.assertEqual(calls[0]["env"], ["LOG=" + log, "X=1"])
        self.assertEqual(calls[1]["env"], ["LOG=" + log])
        for c in calls:
            self.assertEqual((c["root"], c["cwd"], c["node"], c["mounted"]),
                             (self.rootfs, self.bundle, True, "file\n"))
            self.assertEqual({k: c["state"][k] for k in ("ociVersion", "status", "bundle")},
                             {"ociVersion": "1.0.2", "status": "creating", "bundle": self.bundle})
        self.assertTrue(os.path.exists(os.path.join(self.rootfs, "tmp", "started")))
        # destinations through links stay inside the rootfs
        self.assertTrue(os.path.isfile(os.path.join(self.rootfs, self.escape)))
        self.assertTrue(os.path.isfile(os.path.join(self.rootfs, "etc", self.escape)))
        self.assertFalse(os.path.lexists("/" + self.escape))
        self.assertFalse(os.path.lexists("/etc/" + self.escape))
        with open("/proc/self/mountinfo") as fh:
            self.assertNotIn(self.tmp, fh.read())
        self.assertIn("cdi-apply| device /dev/mydev: mknod c 1:3 0600", r.stderr)

    def test_bind_devices(self):
        hostdev = os.path.join(self.tmp, "hostdev")
        os.mknod(hostdev, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        dev = {"deviceNodes": [{"path": "/dev/x", "hostPath": hostdev}]}
        r = self.apply(self.spec(spec_of({"a": dev})), ["example.com/test=a"],
                       ["busybox", "stat", "-c", "%F %t:%T", "/dev/x"], "--bind-devices")
        self.assertEqual((r.returncode, r.stdout), (0, "character special file 1:3\n"), r.stderr)
        self.assertIn("cdi-apply| device /dev/x: the host's %s bound" % hostdev, r.stderr)

    def test_mknod_refused(self):
        """Where mknod is refused (here: a user namespace, as gVisor may refuse it), the
        host's node is bind-mounted; where sysfs is, the container goes without."""
        userns = ["unshare", "--user", "--map-root-user", "--pid", "--fork"]
        if subprocess.run(userns + ["true"], capture_output=True).returncode != 0:
            self.skipTest("no user namespaces here")
        self.path("f", "ro\n")
        dev = {"deviceNodes": [{"path": "/dev/zz", "hostPath": "/dev/zero"}],
               "mounts": [{"hostPath": self.tmp + "/f", "containerPath": "/opt/f",
                           "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]}]}
        r = subprocess.run(userns + [APPLY, "-v", "--spec", self.spec(spec_of({"a": dev})),
                                     "--device", "example.com/test=a", "--rootfs", self.rootfs,
                                     "--", "sh", "-c", "head -c 2 /dev/zz | busybox od -An -tx1; "
                                     "cat /opt/f; echo > /opt/f; echo write $?"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout.split()), (0, ["00", "00", "ro", "write", "1"]),
                         r.stderr)
        self.assertIn("cdi-apply| device /dev/zz: the host's /dev/zero bound (mknod: Operation "
                      "not permitted)", r.stderr)

    def test_failures_stop_it(self):
        hook = {"hooks": [{"hookName": "createContainer", "path": "/bin/sh",
                           "args": ["sh", "-c", "exit 3"]}]}
        r = self.apply(self.spec(spec_of({"a": hook})), ["example.com/test=a"], ["/bin/true"])
        self.assertFailed(r, 125, "hook 0 (/bin/sh -c): exit status 3")
        gone = {"mounts": [{"hostPath": self.tmp + "/nothing", "containerPath": "/m",
                            "options": ["bind"]}]}
        r = self.apply(self.spec(spec_of({"a": gone})), ["example.com/test=a"], ["/bin/true"])
        self.assertFailed(r, 125, "mount /m: hostPath %s/nothing: No such file or directory" % self.tmp)
        r = self.apply(self.spec(spec_of({"a": {}})), ["example.com/test=a"], ["/no/such"])
        self.assertFailed(r, 127, "exec /no/such in the container")


class RealSpec(Case):
    """A claim's spec from the plugin binary in DRA mode, prepared as section 8 does."""

    def setUp(self):
        super().setUp()
        self.drv = os.path.join(self.tmp, "driver")
        subprocess.run([RENDER, "--profile", PROFILE, "--driver-root", self.drv], check=True)
        os.makedirs(self.drv + "/dev")
        for name, minor in [("nvidia%d" % i, i) for i in range(8)] + [("nvidiactl", 255)]:
            os.mknod(self.drv + "/dev/" + name, stat.S_IFCHR, os.makedev(195, minor))
            os.chmod(self.drv + "/dev/" + name, 0o666)  # as the driver makes them
        api = os.path.join(self.tmp, "api")
        os.mkdir(api)
        self.srv = kt.LineProc([FAKE, api])
        self.addCleanup(self.srv.stop)
        port = int(self.srv.expect(r"^listening (\d+)$").group(1))
        self.kubeconfig = kt.write_kubeconfig(os.path.join(api, "kubeconfig"),
                                              "https://127.0.0.1:%d" % port,
                                              ca=os.path.join(api, "ca.crt"), token="tok1")
        self.cmd("add " + NODE)

    def cmd(self, line):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0])

    def claim(self, uid, device):
        alloc = {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com",
                                          "pool": NODE, "device": device}]}}
        o = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "ctr", "namespace": "default", "uid": uid, "resourceVersion": "1"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}},
             "status": {"allocation": alloc,
                        "reservedFor": [{"resource": "pods", "name": "ctr", "uid": uid}]}}
        self.cmd("rc-json " + json.dumps(o, separators=(",", ":")))

    def run_claim(self, hook):
        """serve --dra, one claim of gpu-1, go-client dra-smoke running cdi-apply: its output."""
        t = self.tmp
        socks = scratch.socket_dir("gdp-dra-")  # the DRA directories' bound (78 bytes)
        reg, plugins, cdi = socks + "/reg", socks + "/plugins", t + "/cdi-dra"
        for d in (reg, plugins, cdi, t + "/dp", self.bundle):
            os.makedirs(d)
        log = open(t + "/dra.log", "w")
        self.addCleanup(log.close)
        p = scratch.adopt(subprocess.Popen(
            [PLUGIN, "--driver-root=" + self.drv, "--driver-root-ctr-path=" + self.drv,
             "--kubelet-socket=%s/dp/kubelet.sock" % t, "--cdi-spec-dir=%s/cdi" % t,
             "--nvidia-cdi-hook-path=" + hook, "--dra", "--kubeconfig=" + self.kubeconfig,
             "--node-name=" + NODE, "--kubelet-registrar-directory-path=" + reg,
             "--kubelet-plugins-directory-path=" + plugins, "--cdi-root=" + cdi],
            stdout=log, stderr=subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", "MOCK_NVML_CONFIG": PROFILE}))
        self.addCleanup(lambda: p.poll() is not None or (p.kill(), p.wait()))
        end = time.monotonic() + 20
        while "ResourceSlices of node %s are up to date" % NODE not in open(t + "/dra.log").read():
            self.assertLess(time.monotonic(), end, open(t + "/dra.log").read())
            self.assertIsNone(p.poll(), open(t + "/dra.log").read())
            time.sleep(0.05)
        uid = "5a0e0000-0000-4000-8000-00000000c7d1"
        self.claim(uid, "gpu-1")
        shutil.copytree(ROOTFS, self.rootfs, symlinks=True)
        for d in ("/usr/local/bin", "/etc/nvml-sim"):
            os.makedirs(self.rootfs + d, exist_ok=True)
        shutil.copy(PROBE, self.rootfs + "/usr/local/bin/cuda-probe")
        shutil.copy(PROFILE, self.rootfs + "/etc/nvml-sim/profile.yaml")
        r = subprocess.run(
            [GO_CLIENT, "dra-smoke", reg, cdi, "default", "ctr", uid, "--", "sh", "-c",
             'exec "$@" --spec "$GDP_CDI_SPEC" --device "$GDP_CDI_DEVICES" -- /usr/local/bin/cuda-probe',
             "sh", APPLY, "-v", "--rootfs", self.rootfs,
             "--env", "MOCK_NVML_CONFIG=/etc/nvml-sim/profile.yaml"],
            capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(timeout=20), 0, open(t + "/dra.log").read()[-3000:])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(os.listdir(cdi), [])  # unprepared after the command
        return r.stdout, r.stderr, "\n".join(ln[8:] for ln in r.stdout.splitlines()
                                             if ln.startswith("  spec| "))

    def assertProbed(self, out):
        self.assertIn("\ncount 1\ngpu 0 %s %s\nmemalloc ok\nexec: exit status 0, " % (NAME, gpu_uuid(1)),
                      out)
        self.assertTrue(out.endswith("dra-smoke ok\n"), out)

    def test_with_hook_standin(self):
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir)
        hook = os.path.join(bindir, "nvidia-cdi-hook")
        shutil.copy2(HOOK, hook)
        out, err, spec = self.run_claim(hook)
        self.assertProbed(out)
        self.assertEqual([h["args"][1] for h in json.loads(spec)["containerEdits"]["hooks"]], HOOKS)
        with open(hook + ".log") as f:
            self.assertEqual([ln.split()[0] for ln in f.read().splitlines()], HOOKS)
        for i, name in enumerate(HOOKS):
            self.assertIn("cdi-apply| hook %d: %s %s: exit status 0" % (i, hook, name), err)
        self.assertIn("cdi-apply| device /dev/nvidia1: mknod c 195:1 0666", err)

    def test_without_hook_binary(self):
        out, err, spec = self.run_claim("/nonexistent/nvidia-cdi-hook")
        self.assertProbed(out)
        edits = json.loads(spec)["containerEdits"]
        self.assertNotIn("hooks", edits)
        dsts = [m["containerPath"] for m in edits["mounts"]]
        self.assertIn(LIB + "/libcuda.so.1", dsts)
        self.assertIn(LIB + "/libnvidia-ml.so.1", dsts)
        self.assertIn("0 hook(s)", err)


def cannot_run(why):
    skip.cannot_run("test_cdi_apply", why, "the containers skipped")


def main():
    global APPLY, PROBE, RENDER, HOOK, PLUGIN, FAKE, GO_CLIENT, ROOTFS
    if len(sys.argv) != 8:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    APPLY, PROBE, RENDER, HOOK, PLUGIN = map(os.path.abspath, sys.argv[1:6])
    FAKE, GO_CLIENT = (os.path.abspath(a) if a else None for a in sys.argv[6:8])
    os.environ.pop("LD_LIBRARY_PATH", None)  # meson's; every process here says what it loads
    runner = unittest.TextTestRunner(verbosity=2)
    load = unittest.defaultTestLoader.loadTestsFromTestCase
    if not runner.run(load(Input)).wasSuccessful():
        sys.exit(1)
    if os.geteuid() != 0:
        cannot_run("needs root (unshare, mount, mknod, chroot)")
    r = subprocess.run(["sh", os.path.join(HERE, "debian-rootfs.sh")], capture_output=True,
                       text=True)
    if r.returncode != 0:
        cannot_run(r.stderr.strip() or "debian-rootfs.sh failed")
    ROOTFS = r.stdout.strip()
    if not runner.run(load(Semantics)).wasSuccessful():
        sys.exit(1)
    if not FAKE or not GO_CLIENT:
        cannot_run("no %s: the real claim's spec needs it" % ("go-client" if FAKE else "fake API server"))
    sys.exit(0 if runner.run(load(RealSpec)).wasSuccessful() else 1)


if __name__ == "__main__":
    main()
