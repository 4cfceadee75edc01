"""A container put together by hand, as a runtime applies a CDI spec (the reference's
"checking a spec without a container runtime"), for tests that must not need containerd:

    c = handmade.Container(scratch_dir, rootfs_template, hook)
    c.mount(host_file, "/usr/lib/x86_64-linux-gnu/libcuda.so.550.163.01")
    c.device("/dev/nvidia1", 195, 1)
    c.hook("create-symlinks", "--link", "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so")
    c.check("probe", ["/usr/local/bin/cuda-probe"], {"MOCK_NVML_CONFIG": "..."})
    result = c.run()      # {"hooks": [...], "checks": {"probe": {"rc", "out", "err"}}, ...}

The bundle (<dir>/bundle/config.json, root.path "rootfs") holds a copy of the template
rootfs. run() starts `unshare -m --propagation private` with this file as the program:
in that new mount namespace it binds the rootfs onto itself (exec and dev allowed whatever
$TMPDIR's mount says), mounts a tmpfs on /dev and makes the device nodes there, mounts
proc, bind-mounts each file read-only (ro, nosuid, nodev, as a spec's mounts say; the
destination is made inside the rootfs without following a link out of it), runs the
createContainer hooks in order with the OCI state on stdin and only NVIDIA_CTK_DEBUG=false
in their environment (as runc runs them), then each check chrooted into the rootfs, and
prints what happened as JSON. Every mount belongs to that namespace, so all of them are
gone when the child exits, however it exits: nothing to unmount before the scratch
directory is removed. Needs root.
"""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_hook_module(path=os.path.join(HERE, "nvidia-cdi-hook")):
    """The hook stand-in as a module: its resolver places mounts as it places links."""
    loader = importlib.machinery.SourceFileLoader("cdi_hook_standin", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


class Container:
    def __init__(self, workdir, rootfs_template, hook):
        self.workdir = workdir
        self.bundle = os.path.join(workdir, "bundle")
        self.rootfs = os.path.join(self.bundle, "rootfs")
        os.makedirs(self.bundle)
        # symlinks=True: the image's own links (lib -> usr/lib, the loader's) stay links.
        shutil.copytree(rootfs_template, self.rootfs, symlinks=True)
        with open(os.path.join(self.bundle, "config.json"), "w") as f:
            json.dump({"ociVersion": "1.0.2", "root": {"path": "rootfs"}}, f)
        # The hook is a copy beside which it logs (a runtime passes it no GDP_* variable).
        bindir = os.path.join(workdir, "bin")
        os.makedirs(bindir)
        self.hook_path = os.path.join(bindir, "nvidia-cdi-hook")
        shutil.copy2(hook, self.hook_path)
        self.hook_log = os.path.join(bindir, "nvidia-cdi-hook.log")
        self.plan = {"rootfs": self.rootfs, "bundle": self.bundle, "hook": self.hook_path,
                     "mounts": [], "devices": [], "hooks": [], "checks": [], "list": []}

    def image_file(self, src, cpath, mode=0o755):
        """A file that is part of the image (copied, not mounted)."""
        dst = os.path.join(self.rootfs, cpath.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
        os.chmod(dst, mode)

    def image_ldconfig(self):
        """The image's own /etc/ld.so.cache, as every Debian image has one (host ldconfig)."""
        subprocess.run(["/sbin/ldconfig", "-r", self.rootfs], check=True)

    def mount(self, host, cpath):
        self.plan["mounts"].append([host, cpath])

    def device(self, cpath, major, minor):
        self.plan["devices"].append([cpath, major, minor])

    def hook(self, *args):
        self.plan["hooks"].append(list(args))

    def check(self, name, argv, env):
        self.plan["checks"].append([name, argv, env])

    def listing(self, cdir):
        """Report cdir's entries (name -> link text, or None for a non-link) after the run."""
        self.plan["list"].append(cdir)

    def run(self, timeout=120):
        plan = os.path.join(self.workdir, "plan.json")
        with open(plan, "w") as f:
            json.dump(self.plan, f)
        cmd = ["unshare", "-m", "--propagation", "private", sys.executable,
               os.path.abspath(__file__), plan]
        import scratch  # the caller's (tests/common): a signal kills the child first
        p = scratch.adopt(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True))
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(cmd), p.returncode, out, err))
        return json.loads(out)


# ---- inside the new mount namespace ---------------------------------------------------

def sh(*cmd):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))


def inside(plan):
    hookmod = load_hook_module(plan["hook"])
    root = plan["rootfs"]
    out = {"hooks": [], "checks": {}, "lists": {}}
    sh("mount", "--bind", root, root)
    sh("mount", "-o", "remount,bind", root)  # no nosuid/nodev/noexec from $TMPDIR's mount
    sh("mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "tmpfs", os.path.join(root, "dev"))
    sh("mount", "-t", "proc", "proc", os.path.join(root, "proc"))
    devices = plan["devices"] + [["/dev/null", 1, 3]]
    for cpath, major, minor in devices:
        dst = os.path.join(hookmod.resolve(root, os.path.dirname(cpath), create=True),
                           os.path.basename(cpath))
        os.mknod(dst, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(dst, 0o666)
    for host, cpath in plan["mounts"]:
        parent = hookmod.resolve(root, os.path.dirname(cpath), create=True)
        dst = os.path.join(parent, os.path.basename(cpath))
        if not os.path.lexists(dst):
            open(dst, "w").close()
        sh("mount", "--bind", host, dst)
        sh("mount", "-o", "remount,bind,ro,nosuid,nodev", dst)
    state = json.dumps({"ociVersion": "1.0.2", "id": "cdi-standins", "status": "creating",
                        "pid": os.getpid(), "bundle": plan["bundle"], "annotations": {}})
    for args in plan["hooks"]:
        r = subprocess.run(["nvidia-cdi-hook"] + args, executable=plan["hook"], input=state,
                           capture_output=True, text=True, env={"NVIDIA_CTK_DEBUG": "false"},
                           timeout=60)
        out["hooks"].append({"args": args, "rc": r.returncode, "err": r.stderr})
        if r.returncode != 0:  # a runtime fails the container here
            break
    else:
        for name, argv, env in plan["checks"]:
            r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60,
                               preexec_fn=lambda: (os.chroot(root), os.chdir("/")))
            out["checks"][name] = {"rc": r.returncode, "out": r.stdout, "err": r.stderr}
    for cdir in plan["list"]:
        d = hookmod.resolve(root, cdir)
        out["lists"][cdir] = {n: os.readlink(os.path.join(d, n))
                              if os.path.islink(os.path.join(d, n)) else None
                              for n in sorted(os.listdir(d))} if os.path.isdir(d) else None
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        result = inside(json.load(f))
    json.dump(result, sys.stdout)
