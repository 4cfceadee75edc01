"""containerd 1.7 for the tests that need a real container runtime with CDI: the binaries
from Debian's archive (containerd17.sh beside this file), one daemon per test under a
directory of its own, the CRI's messages encoded by hand (runtime.v1, as the kubelet sends
them), and a teardown that leaves nothing behind whatever state the daemon is in, also on
SIGTERM/SIGINT (install_signal_handlers).

    containerd17.install_signal_handlers()       # after scratch's (imported first)
    bindir, why = containerd17.fetch()          # None, why: the archive is out of reach
    c = containerd17.Containerd(bindir, d, cdi_dir, "/gdp-x-1234", IMAGE)
    c.import_busybox(tmpdir, IMAGE)             # busybox-static, as tests/e2e/image.sh builds
    c.cri("RunPodSandbox", ld(1, ...))          # bytes in, bytes out; decode() reads them
    c.stop()
"""
import ctypes
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import scratch  # noqa: E402

CRI = "/runtime.v1.RuntimeService/"
# Where a containerd 1.7 writes outside its root and state whatever its config says (the
# shims' sockets, /run/containerd/s/): what a run adds there is removed at its end.
HOST_DIRS = ("/run/containerd",)
_live = []  # the daemons running now: a signal stops them too


# ---- protobuf by hand: the few CRI (and DRA) messages the tests use ---------------------

def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])


def ld(num, payload):
    """A length-delimited field (string, bytes or an encoded message)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vi(num, n):
    return varint(num << 3) + varint(n)


def decode(buf):
    """{field number: [values]}: bytes for length-delimited fields, ints for varints."""
    out, i = {}, 0

    def rd():
        nonlocal i
        n = shift = 0
        while True:
            b = buf[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n
    while i < len(buf):
        key = rd()
        wt = key & 7
        if wt == 0:
            v = rd()
        elif wt == 2:
            n = rd()
            v, i = buf[i:i + n], i + n
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(key >> 3, []).append(v)
    return out


# ---- the binaries -----------------------------------------------------------------------

def fetch():
    """(directory of containerd, containerd-shim-runc-v2, ctr, runc; None) or (None, why)."""
    r = subprocess.run(["sh", os.path.join(HERE, "containerd17.sh")], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return None, "no containerd 1.7 from Debian's archive: " + r.stderr.strip()
    return r.stdout.strip(), None


def version(bindir):
    r = subprocess.run([os.path.join(bindir, "containerd"), "--version"], capture_output=True,
                       text=True)
    return r.stdout.split()[2]


# ---- one daemon -------------------------------------------------------------------------

class Containerd:
    """containerd 1.7 under d: root, state, socket, runc root, log; CDI on, its specs read
    from cdi_dir only; the sandbox image `image`; containers' cgroups under cgroup_parent
    (cgroupfs), which the teardown removes. runc: the runc containerd runs (BinaryName), when
    not the one in bindir (cgroup2ns.runc_wrapper's)."""

    def __init__(self, bindir, d, cdi_dir, cgroup_parent, image, runc=None):
        self.bin, self.dir, self.cgroup_parent = bindir, d, cgroup_parent
        self.sock = os.path.join(d, "containerd.sock")
        self.runc_root = os.path.join(d, "runc")
        self.before = {p: tree(p) for p in HOST_DIRS}
        self.proc = self.channel = None
        _live.append(self)  # from here on a signal stops it too
        cfg = os.path.join(d, "config.toml")
        with open(cfg, "w") as f:
            f.write(CONFIG % {"d": d, "sock": self.sock, "cdi": cdi_dir, "image": image,
                              "runc": runc or os.path.join(bindir, "runc"), "runc_root": self.runc_root})
        self.log = open(os.path.join(d, "containerd.log"), "w+")
        env = dict(os.environ, PATH=bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
        try:
            self.proc = scratch.adopt(subprocess.Popen(
                [os.path.join(bindir, "containerd"), "--config", cfg], stdout=self.log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
            end = time.monotonic() + 30
            while self.ctr("version", check=False).returncode != 0:
                if self.proc.poll() is not None or time.monotonic() > end:
                    raise AssertionError("containerd did not start:\n" + self.log_tail())
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise
        import grpc
        self.channel = grpc.insecure_channel("unix://" + self.sock)

    def ctr(self, *args, check=True):
        p = scratch.adopt(subprocess.Popen(
            [os.path.join(self.bin, "ctr"), "--address", self.sock, "--connect-timeout", "5s",
             "-n", "k8s.io", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        out = p.communicate(timeout=60)[0]
        if check and p.returncode != 0:
            raise AssertionError("ctr %s: %s" % (" ".join(args), out))
        return p

    def cri(self, method, req, timeout=30):
        return self.channel.unary_unary(CRI + method)(req, timeout=timeout)

    def wait_exited(self, cid, log, timeout=30):
        """Waits (polling ContainerStatus) for container cid to exit: (exit code, the text of
        each line of its CRI log file `log`, "<time> <stream> <tag> <text>"). AssertionError
        past timeout seconds."""
        end = time.monotonic() + timeout
        while True:
            st = decode(decode(self.cri("ContainerStatus", ld(1, cid)))[1][0])
            if st.get(3, [0])[0] == 2:  # CONTAINER_EXITED
                break
            if time.monotonic() > end:
                raise AssertionError("container %s still running after %d s" % (cid, timeout))
            time.sleep(0.05)
        with open(log) as f:
            lines = [line.rstrip("\n").split(" ", 3)[3] for line in f if line.count(" ") >= 3]
        return st.get(7, [0])[0], lines

    def log_tail(self, n=4000):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-n:]

    def import_busybox(self, tmp, image):
        """busybox-static with a few applets as `image` (tests/e2e/oci-image.py, as image.sh
        builds its images), imported unpacked for the native snapshotter."""
        root, out = os.path.join(tmp, "busybox-root"), os.path.join(tmp, "busybox.tar")
        os.makedirs(os.path.join(root, "bin"))
        os.makedirs(os.path.join(root, "tmp"))
        shutil.copy("/bin/busybox", os.path.join(root, "bin", "busybox"))
        for app in ("sh", "sleep", "cat", "ls", "stat", "env", "echo"):
            os.symlink("busybox", os.path.join(root, "bin", app))
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "e2e", "oci-image.py"),
                            "--rootfs", root, "--name", image, "--out", out, "--env", "PATH=/bin",
                            "--cmd", '["/bin/sleep", "600"]'], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("oci-image.py: " + r.stderr)
        self.ctr("images", "import", "--snapshotter", "native", out)

    def stop(self, fast=False):
        """Everything it started goes, whatever state it is in: runc's containers, the
        daemon (fast: SIGKILL, for a signal, which has 0.5 s under meson), its shims (by
        pid: their command line names our socket), its mounts, the cgroup parent, the
        host directories it made."""
        if self in _live:
            _live.remove(self)
        if self.channel:
            self.channel.close()
        runc = os.path.join(self.bin, "runc")
        for ns in sorted(os.listdir(self.runc_root)) if os.path.isdir(self.runc_root) else ():
            root = os.path.join(self.runc_root, ns)
            ids = subprocess.run([runc, "--root", root, "list", "-q"], capture_output=True,
                                 text=True).stdout.split()
            for cid in ids:
                subprocess.run([runc, "--root", root, "delete", "--force", cid],
                               capture_output=True)
        if self.proc and self.proc.poll() is None:
            self.proc.kill() if fast else self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        wait = 0.2 if fast else 5
        kill_and_wait(pids_naming(self.sock), wait)
        unmount_below(self.dir)
        remove_cgroup(self.cgroup_parent, wait)
        for p, before in self.before.items():
            remove_stale(p, before)
        self.log.close()


CONFIG = """version = 2
root = "%(d)s/root"
state = "%(d)s/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "%(sock)s"
[ttrpc]
  address = "%(sock)s.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%(image)s"
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  enable_cdi = true
  cdi_spec_dirs = ["%(cdi)s"]
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "%(runc)s"
        Root = "%(runc_root)s"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%(d)s/cni"
    conf_dir = "%(d)s/cni"
"""


def pids_naming(text):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if text.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out


def unmount_below(d):
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    for p in sorted((p for p in points if p.startswith(d + "/")), key=len, reverse=True):
        libc.umount2(p.encode(), 2)  # MNT_DETACH


def kill_and_wait(pids, wait):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    end = time.monotonic() + wait
    while any(os.path.exists("/proc/%d" % p) for p in pids) and time.monotonic() < end:
        time.sleep(0.01)


def remove_cgroup(parent, wait):
    """The cgroups under parent in every hierarchy, their processes (the containers')
    killed first; rmdir is EBUSY until the killed ones are gone."""
    base = "/sys/fs/cgroup"
    roots = [base] if os.path.exists(os.path.join(base, "cgroup.controllers")) else \
        [os.path.join(base, c) for c in os.listdir(base)]
    tops = [os.path.join(r, parent.lstrip("/")) for r in roots if not os.path.islink(r)]
    end = time.monotonic() + wait
    while True:
        left = False
        for top in tops:
            for dirpath, _, _ in sorted(os.walk(top), key=lambda w: len(w[0]), reverse=True):
                try:
                    with open(os.path.join(dirpath, "cgroup.procs")) as f:
                        kill_and_wait([int(p) for p in f.read().split()], 0)
                    os.rmdir(dirpath)
                except OSError:
                    left = True
        if not left or time.monotonic() > end:
            return
        time.sleep(0.02)


def remove_stale(top, before):
    """Removes what is new under top since `before` (a set of paths) and is a socket
    nobody listens on (a killed shim's) or an empty directory, bottom-up."""
    if not os.path.isdir(top):
        return
    for dirpath, _, files in sorted(os.walk(top), key=lambda w: len(w[0]), reverse=True):
        for name in files:
            p = os.path.join(dirpath, name)
            if p in before or not stat.S_ISSOCK(os.lstat(p).st_mode):
                continue
            with socket.socket(socket.AF_UNIX) as so:
                try:
                    so.connect(p)
                except ConnectionRefusedError:
                    os.unlink(p)
                except OSError:
                    pass
        if dirpath not in before:
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def tree(top):
    return {os.path.join(d, n) for d, dirs, files in os.walk(top) for n in dirs + files} | \
        ({top} if os.path.isdir(top) else set())


def _on_signal(signum, frame, prev={}):
    for c in list(_live):
        c.stop(fast=True)
    h = prev.get(signum, signal.SIG_DFL)
    signal.signal(signum, h)
    if callable(h):
        h(signum, frame)
    else:
        os.kill(os.getpid(), signum)


def install_signal_handlers():
    """SIGTERM and SIGINT stop every daemon first, then do what they did before (scratch's
    handler: children killed, directories removed)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        _on_signal.__defaults__[0][sig] = signal.getsignal(sig)
        signal.signal(sig, _on_signal)
