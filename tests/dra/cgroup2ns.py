"""A cgroup v2 host for a containerd test on a host that is not one (cgroup v1, or hybrid:
v1 controllers with cgroup2 at /sys/fs/cgroup/unified): the test runs again in a mount
namespace of its own, propagation private, where cgroup2 is mounted over /sys/fs/cgroup.

Why over /sys/fs/cgroup and not only at /sys/fs/cgroup/unified: NVIDIA's per-cgroup memory
limits need "cgroup v2 mounted at /sys/fs/cgroup", and the share hook names the container's
cgroup as /sys/fs/cgroup + the "0::" line of its /proc/<pid>/cgroup; on a hybrid host that
path is not the cgroup's directory. With cgroup2 at /sys/fs/cgroup, runc (cgroups'
statfs of /sys/fs/cgroup) and containerd (the same, which also gives each container its own
cgroup namespace) see a unified host and put every container in the v2 hierarchy, so the
hook's, the runtime's and the simulator's code run unchanged, as on a cgroup v2 node.

What this host cannot give: controllers bound to its v1 hierarchies (cpu, memory, pids, io,
cpuset) are not in the v2 hierarchy, so a runc that is asked for cpu.weight (containerd
gives every sandbox CPU shares) fails. runc_wrapper() writes a runc that drops, from the
bundle's config.json, the linux.resources entries whose controller this v2 hierarchy lacks
and then runs the real runc; on a real v2 host it changes nothing. Nothing else of the spec
(hooks, mounts, devices, environment) is touched.

The host is left as it was: the namespace's mounts go with its last process; the cgroups
(the v2 hierarchy is the host's, mounted or not) are removed by the test's teardown and,
whatever the test did, swept after it by the outer process (sweep()).

    if not cgroup2ns.host_is_v2() and not cgroup2ns.inside():
        sys.exit(cgroup2ns.rerun(sys.argv, cannot_run))  # the test again, in the namespace
    prefix = cgroup2ns.cgroup_prefix("gdp-shr-ctr")  # the cgroups' names start with it
"""
import os
import signal
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
MARK = "GDP_CGROUP2_NS"  # in the namespace: the token of this run
ROOT = "/sys/fs/cgroup"
# linux.resources entry -> the cgroup v2 controller runc writes it with
RESOURCES = {"cpu": "cpu", "memory": "memory", "pids": "pids", "blockIO": "io",
             "hugepageLimits": "hugetlb", "rdma": "rdma"}
CPUSET_KEYS = ("cpus", "mems")  # linux.resources.cpu's, written to cpuset.*


def fstype(path=ROOT):
    """The file system type mounted at path (the last mount there), or None."""
    t = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[4] == path:
                t = fields[sep + 1]
    return t


def host_is_v2():
    return fstype() == "cgroup2"


def inside():
    return bool(os.environ.get(MARK))


def cgroup_prefix(name):
    """The prefix of the top cgroups a test makes: <name>-<this run's token>-, so that the
    sweep after the run removes its own and never another run's."""
    return "%s-%s-" % (name, os.environ.get(MARK) or uuid.uuid4().hex[:8])


def _unshared(cmd, env=None):
    """cmd in a new private mount namespace with cgroup2 at /sys/fs/cgroup."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t cgroup2 cgroup2 %s && exec "$@"' % ROOT, "sh"] + cmd


def rerun(argv, cannot_run):
    """Runs this test (argv, as it was given) again in the namespace and returns its exit status, after
    the sweep. cannot_run(why) when the namespace cannot be made."""
    token = uuid.uuid4().hex[:8]
    probe = subprocess.run(_unshared(["stat", "-f", "-c", "%T", ROOT]), capture_output=True,
                           text=True)
    if probe.returncode != 0 or probe.stdout.strip() != "cgroup2fs":
        cannot_run("cannot mount cgroup2 over %s in a private mount namespace: %s" % (
            ROOT, (probe.stderr or probe.stdout).strip()))
    print("cgroup2ns: this host's %s is %s: the test runs in a private mount namespace with "
          "cgroup2 mounted there" % (ROOT, fstype()), flush=True)
    # The inner process is in this process group: meson's (or a terminal's) signal reaches
    # it directly, and it tears down. This one then leaves at once: meson sends SIGKILL to
    # the group unless the process it started is gone within 0.5 s, which would cut the
    # inner teardown short. (No sweep then: the inner teardown removes its cgroups.)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: os._exit(128 + s))
    env = dict(os.environ, **{MARK: token})
    p = subprocess.Popen(_unshared([sys.executable] + argv), env=env,
                         preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL)
                                             for s in (signal.SIGTERM, signal.SIGINT)])
    code = p.wait()
    left = subprocess.run(_unshared([sys.executable, os.path.abspath(__file__), "--sweep",
                                     token]), capture_output=True, text=True)
    if left.stdout.strip() or left.returncode:
        print("cgroup2ns: swept after the test: %s %s" % (left.stdout.strip(),
                                                          left.stderr.strip()), flush=True)
    return code


def sweep(token):
    """In the namespace: every top cgroup of the run `token` (its processes killed first),
    bottom-up. Prints what it had to remove."""
    sys.path.insert(0, HERE)
    import containerd17
    for name in sorted(os.listdir(ROOT)):
        if token in name and os.path.isdir(os.path.join(ROOT, name)):
            print(name)
            containerd17.remove_cgroup("/" + name, 5)


def runc_wrapper(real, path):
    """Writes at path a runc for containerd's BinaryName: the real one, run on the bundle's
    config.json without the resources this v2 hierarchy has no controller for."""
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec %s %s --real-runc %s \"$@\"\n" % (
            sys.executable, os.path.abspath(__file__), real))
    os.chmod(path, 0o755)


def _strip_resources(args):
    if "--bundle" not in args:
        return
    cfg_path = os.path.join(args[args.index("--bundle") + 1], "config.json")
    import json
    with open(cfg_path) as f:
        cfg = json.load(f)
    with open(os.path.join(ROOT, "cgroup.controllers")) as f:
        have = set(f.read().split())
    res = cfg.get("linux", {}).get("resources", {})
    for key, ctl in RESOURCES.items():
        if key in res and ctl not in have:
            del res[key]
    if "cpuset" not in have:
        for k in CPUSET_KEYS:
            res.get("cpu", {}).pop(k, None)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--sweep"]:
        sweep(sys.argv[2])
    elif sys.argv[1:2] == ["--real-runc"]:
        real, args = sys.argv[2], sys.argv[3:]
        _strip_resources(args)
        os.execv(real, [real] + args)
    else:
        sys.exit("usage: cgroup2ns.py --sweep TOKEN | --real-runc RUNC ARGS...")
