#!/usr/bin/python3
"""The driver's user-space stand-ins and what a container needs to load them.

Direct (any user): nvml-sim-render --driver-root lays out the driver root; cuda-probe and
the libcuda stand-in (ctypes, one process per case: cuInit is sticky) and nvidia-smi
answer from the simulated node through the open rule (MOCK_DRIVER_DEV_ROOT standing for
/dev); the nvidia-cdi-hook stand-in's link placement never leaves the root, its
enable-cuda-compat rule, unknown hooks, its log.

Container (root, Debian's archive the first time): a copy of a plain Debian 12 rootfs
(debian-rootfs.sh) made into a container by hand (handmade.py: a private mount namespace,
the driver root's files bind-mounted read-only at their container paths, 195:<minor>
character devices for one GPU, the hooks run as runc runs them), then cuda-probe and
nvidia-smi -L chrooted into it. With the hooks exactly that GPU (or MIG device) is seen,
with its name and UUID, and 1 MiB is allocated on it; on a RHEL-layout driver root with no
SONAME links only update-ldcache's cache makes libcuda loadable; without the hooks
dlopen("libcuda.so.1") fails: the reason NVIDIA's specs carry them.

Skips (exit 77) the container part with the reason when not root or the archive cannot be
reached, except under CI=true where that fails. Leaves nothing in $TMPDIR.

usage: test_standins.py RENDER CUDA_PROBE HOOK LIBCUDA LIBNVIDIA_ML NVIDIA_SMI
       (env GDP_SOURCE_DIR; the targets' paths come from meson: tests/cdi/meson.build)"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, HERE)
import scratch  # noqa: E402
import skip  # noqa: E402  (tests/common/skip.py)
import handmade  # noqa: E402

SOURCE = os.environ.get("GDP_SOURCE_DIR") or os.path.join(HERE, "..", "..")
PROFILE = os.path.join(SOURCE, "sim", "profiles", "a100-mig-mixed.yaml")
VERSION = "550.163.01"  # the profile's driver_version
NAME = "NVIDIA A100-SXM4-40GB"
GPU1 = "GPU-a100a100-0000-0000-0000-000000000001"
GPU2 = "GPU-a100a100-0000-0000-0000-000000000002"
MIG_3G = "MIG-3a3a3a3a-0000-0000-0000-000000000001"  # GPU 2, GI 1, CI 0: 3g.20gb
DEBIAN_LIB = "/usr/lib/x86_64-linux-gnu"
NVIDIA_MAJOR, CAPS_MAJOR, CTL_MINOR = 195, 237, 255
RENDER = PROBE = HOOK = LIBCUDA = LIBNVML = SMI = None


def cap_minors(gpu_minor, gi, ci):
    """sim/nvml/sim-caps.h's grid, as the driver numbers the MIG capability minors."""
    g = 3 + gpu_minor * 15 * 9 + gi * 9
    return g, g + 1 + ci


def render(dest, *opts):
    subprocess.run([RENDER, "--profile", PROFILE, "--driver-root", dest, "--libcuda", LIBCUDA,
                    "--libnvidia-ml", LIBNVML, "--nvidia-smi", SMI, *opts], check=True)


def run(argv, env, **kw):
    return subprocess.run(argv, env=dict(env, PATH="/usr/bin:/bin"), capture_output=True,
                          text=True, timeout=60, **kw)


CUDA_CASE = r"""
import ctypes, json, sys
cu = ctypes.CDLL("libcuda.so.1")
i, u, s, p = ctypes.c_int(), ctypes.c_uint(), ctypes.c_size_t(), ctypes.c_ulonglong()
ctx = ctypes.c_void_p()
out = {"count_before_init": cu.cuDeviceGetCount(ctypes.byref(i)),
       "init_flags": cu.cuInit(1), "init": cu.cuInit(0), "init_again": cu.cuInit(0)}
out["version"] = (cu.cuDriverGetVersion(ctypes.byref(i)), i.value)
if out["init"] == 0:
    cu.cuDeviceGetCount(ctypes.byref(i)); n = i.value
    out["count"] = n
    out["bad_ordinal"] = cu.cuDeviceGet(ctypes.byref(i), n)
    cu.cuDeviceTotalMem_v2(ctypes.byref(s), 0); total = s.value
    out["total"] = [cu.cuDeviceTotalMem_v2(ctypes.byref(s), d) or s.value for d in range(n)]
    out["alloc_no_ctx"] = cu.cuMemAlloc_v2(ctypes.byref(p), 1)
    cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0); cu.cuCtxSetCurrent(ctx)
    out["alloc_too_big"] = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(total + 1))
    out["alloc_half"] = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(total // 2)); a = p.value
    out["alloc_rest"] = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(total - total // 2))
    out["alloc_full"] = cu.cuMemAlloc_v2(ctypes.byref(p), 1)
    out["free_unknown"] = cu.cuMemFree_v2(ctypes.c_ulonglong(12345))
    out["free"] = cu.cuMemFree_v2(ctypes.c_ulonglong(a))
    out["alloc_after_free"] = cu.cuMemAlloc_v2(ctypes.byref(p), 1)
    out["legacy"] = (cu.cuMemAlloc(ctypes.byref(u), 4096), u.value < 2**32, cu.cuMemFree(u))
    out["release"] = cu.cuDevicePrimaryCtxRelease_v2(0)
    out["release_again"] = cu.cuDevicePrimaryCtxRelease_v2(0)
    out["alloc_released"] = cu.cuMemAlloc_v2(ctypes.byref(p), 1)
name = ctypes.c_char_p()
out["error_name"] = (cu.cuGetErrorName(100, ctypes.byref(name)), name.value.decode())
out["error_unknown"] = (cu.cuGetErrorString(12345, ctypes.byref(name)), name.value)
print(json.dumps(out))
"""


class Direct(unittest.TestCase):
    """The stand-ins and the hook without a container."""

    def setUp(self):
        self.tmp = scratch.mkdtemp("gdp-cdi-")
        self.addCleanup(scratch.remove, self.tmp)
        self.drv = os.path.join(self.tmp, "driver")
        render(self.drv)
        self.dev = os.path.join(self.tmp, "dev")
        os.makedirs(os.path.join(self.dev, "nvidia-caps"))
        self.env = {"LD_LIBRARY_PATH": self.drv + DEBIAN_LIB, "MOCK_NVML_CONFIG": PROFILE,
                    "MOCK_DRIVER_DEV_ROOT": self.dev}

    def node(self, name):
        open(os.path.join(self.dev, name), "w").close()

    def test_driver_root_layout(self):
        lib = self.drv + DEBIAN_LIB
        self.assertEqual(os.readlink(lib + "/libcuda.so.1"), "libcuda.so." + VERSION)
        self.assertEqual(os.readlink(lib + "/libcuda.so"), "libcuda.so.1")
        self.assertEqual(os.readlink(lib + "/libnvidia-ml.so.1"), "libnvidia-ml.so." + VERSION)
        readelf = shutil.which("readelf")
        for f in ("libcuda.so." + VERSION, "libnvidia-ml.so." + VERSION):
            self.assertFalse(os.path.islink(os.path.join(lib, f)))
            if not readelf:
                continue
            elf = subprocess.run([readelf, "-d", os.path.join(lib, f)], capture_output=True,
                                 text=True, check=True).stdout
            # the real SONAMEs, and glibc alone behind them (what a plain image has)
            self.assertIn("Library soname: [%s.so.1]" % f.split(".so.")[0], elf)
            self.assertEqual([ln for ln in elf.splitlines() if "(NEEDED)" in ln and
                              "libc.so.6" not in ln and "ld-linux" not in ln], [])
        smi = self.drv + "/usr/bin/nvidia-smi"
        self.assertEqual(os.stat(smi).st_mode & 0o7777, 0o755)
        self.assertTrue(os.path.isfile(self.drv + "/lib/firmware/nvidia/%s/gsp_ga10x.bin" % VERSION))
        sock = os.lstat(self.drv + "/run/nvidia-persistenced/socket")
        self.assertTrue(stat.S_ISSOCK(sock.st_mode))
        self.assertFalse(os.path.exists(self.drv + "/etc/ld.so.cache"))
        rhel = os.path.join(self.tmp, "rhel")
        render(rhel, "--libdir", "usr/lib64", "--no-host-links")
        self.assertEqual(sorted(os.listdir(rhel + "/usr/lib64")),
                         ["libcuda.so." + VERSION, "libnvidia-ml.so." + VERSION])
        r = subprocess.run([RENDER, "--profile", PROFILE, "--driver-root", rhel, "--libdir",
                            "../out"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--libdir ../out", r.stderr)

    def test_open_rule(self):
        """Only the GPUs and MIG devices whose nodes open; renumbered as a container sees."""
        gi, ci = cap_minors(2, 1, 0)
        for n in ("nvidia1", "nvidia2", "nvidia-caps/nvidia-cap%d" % gi,
                  "nvidia-caps/nvidia-cap%d" % ci, "nvidia-caps/nvidia-cap%d" % cap_minors(2, 5, 0)[0]):
            self.node(n)
        r = run([PROBE], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "count 2\ngpu 0 %s %s\ngpu 1 %s MIG 3g.20gb %s\nmemalloc ok\n"
                         % (NAME, GPU1, NAME, MIG_3G))
        r = run([self.drv + "/usr/bin/nvidia-smi", "-L"], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "GPU 0: %s (UUID: %s)\nGPU 1: %s (UUID: %s)\n"
                         "  MIG 3g.20gb     Device  0: (UUID: %s)\n" % (NAME, GPU1, NAME, GPU2, MIG_3G))
        r = run([self.drv + "/usr/bin/nvidia-smi"], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("NVIDIA-SMI %s  Driver Version: %s  CUDA Version: 12.4\n"
                                            % (VERSION, VERSION)), r.stdout)

    def test_no_device(self):
        r = run([PROBE], self.env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cuInit: CUDA_ERROR_NO_DEVICE (100)", r.stderr)
        r = run([self.drv + "/usr/bin/nvidia-smi", "-L"], self.env)
        self.assertEqual((r.returncode, r.stdout), (6, "No devices were found\n"))
        for bad in (["compute-policy", "--set-timeslice=1"], ["-q"]):
            r = run([self.drv + "/usr/bin/nvidia-smi"] + bad, self.env)
            self.assertEqual(r.returncode, 2, bad)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)

    def test_cuda_semantics(self):
        self.node("nvidia1")
        r = run([sys.executable, "-c", CUDA_CASE], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        total = 42949672960
        self.assertEqual(got, {
            "count_before_init": 3, "init_flags": 1, "init": 0, "init_again": 0,
            "version": [0, 12040], "count": 1, "bad_ordinal": 101, "total": [total],
            "alloc_no_ctx": 201, "alloc_too_big": 2, "alloc_half": 0, "alloc_rest": 0,
            "alloc_full": 2, "free_unknown": 1, "free": 0, "alloc_after_free": 0,
            "legacy": [0, True, 0], "release": 0, "release_again": 201, "alloc_released": 709,
            "error_name": [0, "CUDA_ERROR_NO_DEVICE"], "error_unknown": [1, None]})

    def test_without_nvml(self):
        """A libcuda the loader finds but no NVML: initialisation errors, no crash."""
        only = os.path.join(self.tmp, "only-libcuda")
        os.makedirs(only)
        shutil.copy(self.drv + DEBIAN_LIB + "/libcuda.so." + VERSION, only + "/libcuda.so.1")
        self.node("nvidia1")
        env = dict(self.env, LD_LIBRARY_PATH=only)
        r = run([sys.executable, "-c", CUDA_CASE], env)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual((got["init"], got["init_again"], got["version"][0]), (3, 3, 3))
        self.assertIn("dlopen libnvidia-ml.so.1", r.stderr)
        r = run([PROBE], env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cuInit: CUDA_ERROR_NOT_INITIALIZED (3)", r.stderr)
        shutil.copy(self.drv + "/usr/bin/nvidia-smi", only)
        r = run([only + "/nvidia-smi", "-L"], env)
        self.assertEqual(r.returncode, 12, r.stderr)

    # ---- the hook stand-in, in a bundle whose root is a plain directory ----

    def hook(self, root, *args, env=None):
        bundle = os.path.join(self.tmp, "bundle")
        os.makedirs(bundle, exist_ok=True)
        with open(os.path.join(bundle, "config.json"), "w") as f:
            json.dump({"ociVersion": "1.0.2", "root": {"path": root}}, f)
        state = json.dumps({"ociVersion": "1.0.2", "id": "x", "status": "creating", "pid": 1,
                            "bundle": bundle})
        return subprocess.run([HOOK, *args], input=state, capture_output=True, text=True,
                              env=dict(env or {}, GDP_CDI_HOOK_LOG=os.path.join(self.tmp, "log")))

    def test_hook_links_stay_in_root(self):
        root = os.path.join(self.tmp, "root")
        os.makedirs(root + "/usr/lib")
        os.symlink("/usr/lib", root + "/lib")           # absolute: the container's /usr/lib
        os.symlink("../../../..", root + "/up")         # climbs no higher than the root
        open(root + "/usr/lib/libfoo.so", "w").close()  # a file there is replaced
        r = self.hook(root, "create-symlinks", "--link", "libcuda.so.1::/lib/x86_64-linux-gnu/libcuda.so",
                      "--link=t::/up/escaped", "--link", "libfoo.so.1::/lib/libfoo.so")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.readlink(root + "/usr/lib/x86_64-linux-gnu/libcuda.so"), "libcuda.so.1")
        self.assertEqual(os.readlink(root + "/escaped"), "t")
        self.assertEqual(os.readlink(root + "/usr/lib/libfoo.so"), "libfoo.so.1")
        before = os.lstat(root + "/escaped").st_ino
        r = self.hook(root, "create-symlinks", "--link", "t::/up/escaped")
        self.assertEqual((r.returncode, os.lstat(root + "/escaped").st_ino), (0, before))
        self.assertEqual(sorted(os.listdir(root)), ["escaped", "lib", "up", "usr"])
        r = self.hook(root, "create-symlinks", "--link", "no-separator")
        self.assertEqual(r.returncode, 1)
        with open(os.path.join(self.tmp, "log")) as f:
            self.assertEqual(f.read().splitlines()[1], "create-symlinks --link t::/up/escaped")

    def test_hook_cuda_compat_and_others(self):
        root = os.path.join(self.tmp, "root")
        compat = root + "/usr/local/cuda/compat"
        os.makedirs(compat)
        open(compat + "/libcuda.so.560.35.03", "w").close()
        confd = root + "/etc/ld.so.conf.d"
        for host, written in (("570.86.10", False), ("560.28.03", False), (VERSION, True)):
            r = self.hook(root, "enable-cuda-compat", "--host-driver-version=" + host)
            self.assertEqual(r.returncode, 0, r.stderr)
            confs = os.listdir(confd) if os.path.isdir(confd) else []
            self.assertEqual(len(confs), int(written), (host, confs))
        self.assertTrue(confs[0].startswith("00-compat-"), confs)
        with open(os.path.join(confd, confs[0])) as f:
            self.assertEqual(f.read(), "/usr/local/cuda/compat\n")
        r = self.hook(root, "no-such-hook", "--x")
        self.assertEqual(r.returncode, 0)
        self.assertIn("unknown hook 'no-such-hook'", r.stderr)
        if not os.path.exists("/proc/driver/nvidia/params"):
            r = self.hook(root, "disable-device-node-modification")
            self.assertEqual(r.returncode, 0, r.stderr)
        r = self.hook("/", "update-ldcache", "--folder", DEBIAN_LIB)
        self.assertEqual(r.returncode, 1)
        self.assertIn("refusing", r.stderr)


class InContainer(unittest.TestCase):
    """A plain Debian container given the driver root's files as a CDI spec would."""
    rootfs = None

    def setUp(self):
        self.tmp = scratch.mkdtemp("gdp-cdi-")
        self.addCleanup(scratch.remove, self.tmp)

    def container(self, *render_opts, libdir=DEBIAN_LIB, gpu=None):
        drv = os.path.join(self.tmp, "driver")
        render(drv, *render_opts)
        c = handmade.Container(os.path.join(self.tmp, "c"), self.rootfs, HOOK)
        c.image_ldconfig()
        c.image_file(PROBE, "/usr/local/bin/cuda-probe")
        c.image_file(PROFILE, "/etc/nvml-sim/profile.yaml", 0o644)
        for f in ("libcuda.so." + VERSION, "libnvidia-ml.so." + VERSION):
            c.mount(drv + libdir + "/" + f, libdir + "/" + f)
        c.mount(drv + "/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi")
        c.device("/dev/nvidiactl", NVIDIA_MAJOR, CTL_MINOR)
        if gpu is not None:
            c.device("/dev/nvidia%d" % gpu, NVIDIA_MAJOR, gpu)
        env = {"MOCK_NVML_CONFIG": "/etc/nvml-sim/profile.yaml", "PATH": "/usr/bin:/bin"}
        c.check("probe", ["/usr/local/bin/cuda-probe"], env)
        c.check("smi", ["/usr/bin/nvidia-smi", "-L"], env)
        c.check("ldconfig", ["/sbin/ldconfig", "-p"], env)
        c.listing(libdir)
        c.listing("/etc/ld.so.conf.d")
        return c

    def hooks_ok(self, got):
        for h in got["hooks"]:
            self.assertEqual(h["rc"], 0, h)

    def test_all_hooks_debian_layout(self):
        """The common edits nvcdi writes for this driver root, applied: one full GPU."""
        c = self.container(gpu=1)
        lib = DEBIAN_LIB
        c.hook("create-symlinks", "--link", "libcuda.so.1::%s/libcuda.so" % lib,
               "--link", "libcuda.so.%s::%s/libcuda.so.1" % (VERSION, lib),
               "--link", "libnvidia-ml.so.%s::%s/libnvidia-ml.so.1" % (VERSION, lib))
        c.hook("enable-cuda-compat", "--host-driver-version=" + VERSION)
        c.hook("update-ldcache", "--folder", lib)
        c.hook("disable-device-node-modification")
        got = c.run()
        self.hooks_ok(got)
        probe, smi = got["checks"]["probe"], got["checks"]["smi"]
        self.assertEqual((probe["rc"], probe["out"]), (0, "count 1\ngpu 0 %s %s\nmemalloc ok\n"
                                                       % (NAME, GPU1)), probe["err"])
        self.assertEqual((smi["rc"], smi["out"]), (0, "GPU 0: %s (UUID: %s)\n" % (NAME, GPU1)),
                         smi["err"])
        cache = got["checks"]["ldconfig"]["out"]
        # (merged /usr: ldconfig names the directory by /lib/x86_64-linux-gnu, its first path)
        for so in ("libcuda.so.1", "libnvidia-ml.so.1"):
            self.assertRegex(cache, r"\t%s \(libc6,x86-64\) => (/usr)?/lib/x86_64-linux-gnu/%s\n"
                             % (re.escape(so), re.escape(so)))
        libs = got["lists"][lib]
        self.assertEqual((libs["libcuda.so"], libs["libcuda.so.1"], libs["libnvidia-ml.so.1"]),
                         ("libcuda.so.1", "libcuda.so." + VERSION, "libnvidia-ml.so." + VERSION))
        # /usr/lib/x86_64-linux-gnu is a Debian system directory: no 00-nvcr file for it.
        self.assertEqual([n[:8] for n in got["lists"]["/etc/ld.so.conf.d"]],
                         ["libc.con", "x86_64-l", "zz-nvcr-"])
        with open(c.hook_log) as f:
            self.assertEqual([ln.split()[0] for ln in f.read().splitlines()],
                             ["create-symlinks", "enable-cuda-compat", "update-ldcache",
                              "disable-device-node-modification"])

    def test_ldcache_only_rhel_layout_mig(self):
        """No SONAME link on the host, libraries in /usr/lib64 (not searched by a Debian
        loader): the cache update alone makes libcuda.so.1 loadable. One MIG device."""
        lib = "/usr/lib64"
        c = self.container("--libdir", lib.lstrip("/"), "--no-host-links", libdir=lib, gpu=2)
        for m in cap_minors(2, 1, 0):
            c.device("/dev/nvidia-caps/nvidia-cap%d" % m, CAPS_MAJOR, m)
        c.hook("create-symlinks", "--link", "libcuda.so.1::%s/libcuda.so" % lib)
        c.hook("update-ldcache", "--folder", lib)
        got = c.run()
        self.hooks_ok(got)
        probe, smi = got["checks"]["probe"], got["checks"]["smi"]
        self.assertEqual((probe["rc"], probe["out"]), (
            0, "count 1\ngpu 0 %s MIG 3g.20gb %s\nmemalloc ok\n" % (NAME, MIG_3G)), probe["err"])
        self.assertEqual((smi["rc"], smi["out"]), (0, "GPU 0: %s (UUID: %s)\n  MIG 3g.20gb     "
                                                   "Device  0: (UUID: %s)\n" % (NAME, GPU2, MIG_3G)))
        libs = got["lists"][lib]
        self.assertEqual(libs["libcuda.so.1"], "libcuda.so." + VERSION)  # made by ldconfig
        self.assertEqual(libs["libnvidia-ml.so.1"], "libnvidia-ml.so." + VERSION)
        confs = got["lists"]["/etc/ld.so.conf.d"]
        self.assertEqual(len([n for n in confs if n.startswith("00-nvcr-")]), 1, confs)

    def test_without_hooks_dlopen_fails(self):
        c = self.container("--no-host-links", gpu=1)
        got = c.run()
        probe, smi = got["checks"]["probe"], got["checks"]["smi"]
        self.assertEqual(probe["rc"], 1)
        self.assertIn("cuda-probe: dlopen libcuda.so.1: libcuda.so.1: cannot open shared object "
                      "file", probe["err"])
        self.assertEqual(smi["rc"], 12, smi)
        self.assertNotIn("libcuda", got["checks"]["ldconfig"]["out"])
        self.assertFalse(os.path.exists(c.hook_log))

    def test_no_gpu_node(self):
        c = self.container()
        c.hook("update-ldcache", "--folder", DEBIAN_LIB)
        got = c.run()
        self.hooks_ok(got)
        probe, smi = got["checks"]["probe"], got["checks"]["smi"]
        self.assertEqual(probe["rc"], 1)
        self.assertIn("cuInit: CUDA_ERROR_NO_DEVICE", probe["err"])
        self.assertEqual((smi["rc"], smi["out"]), (6, "No devices were found\n"))


def cannot_run(why):
    skip.cannot_run("test_standins", why, "container part skipped")


def main():
    global RENDER, PROBE, HOOK, LIBCUDA, LIBNVML, SMI
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    RENDER, PROBE, HOOK, LIBCUDA, LIBNVML, SMI = map(os.path.abspath, sys.argv[1:])
    # meson points LD_LIBRARY_PATH at the stand-ins' build directory (a library among the
    # arguments): every case here says which libraries it wants.
    os.environ.pop("LD_LIBRARY_PATH", None)
    runner = unittest.TextTestRunner(verbosity=2)
    load = unittest.defaultTestLoader.loadTestsFromTestCase
    if not runner.run(load(Direct)).wasSuccessful():
        sys.exit(1)
    if os.geteuid() != 0:
        cannot_run("needs root (unshare, mount, mknod, chroot)")
    for tool in ("unshare", "mount", "/sbin/ldconfig"):
        if not shutil.which(tool):
            cannot_run("no %s" % tool)
    r = subprocess.run(["sh", os.path.join(HERE, "debian-rootfs.sh")], capture_output=True,
                       text=True)
    if r.returncode != 0:
        cannot_run(r.stderr.strip() or "debian-rootfs.sh failed")
    InContainer.rootfs = r.stdout.strip()
    sys.exit(0 if runner.run(load(InContainer)).wasSuccessful() else 1)


if __name__ == "__main__":
    main()
