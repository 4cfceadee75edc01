#!/usr/bin/python3
"""The e2e node's stand-in for the NVIDIA container runtime: containerd runs every
container through this wrapper of runc (the CRI runtime's BinaryName). On `create`, for a
container whose environment asks for GPUs (NVIDIA_VISIBLE_DEVICES set and not
void/none), it does to the OCI spec what the NVIDIA runtime does with a real driver:
bind-mounts the driver's libnvidia-ml.so.1 (here the simulator) read-only into the
container's library directory. What a real driver has in /dev and /proc the simulator
takes from a profile and a control FIFO, so the driver's run directory (profile, FIFO,
acknowledgements) is mounted too and MOCK_NVML_* point at it; `runc exec` into such a
container (kubectl exec) gets MOCK_NVML_* too. The image stays free of any NVML, as the
shipped image is.

usage (as BinaryName): sim-runtime.py --driver DIR --runc PATH -- <runc arguments>"""

import json
import os
import subprocess
import sys

LIBDIR = "/usr/lib/x86_64-linux-gnu"
RUNDIR = "/run/nvidia-sim"


MOCK_ENV = [f"MOCK_NVML_CONFIG={RUNDIR}/profile.yaml", f"MOCK_NVML_CONTROL={RUNDIR}/ctl",
            f"MOCK_NVML_CONTROL_ACK={RUNDIR}/ack"]


def wants_gpus(env):
    vis = [e.split("=", 1)[1] for e in env if e.startswith("NVIDIA_VISIBLE_DEVICES=")]
    return vis and vis[-1] not in ("", "void", "none")


def inject_exec(process):
    """`kubectl exec` into a GPU container: runc exec gets a process spec built from the
    container's spec as containerd knows it, without what inject() added; the mounts are
    already in the container, its simulator environment is added again here."""
    with open(process) as f:
        proc = json.load(f)
    env = proc.setdefault("env", [])
    if not wants_gpus(env) or any(e.startswith("MOCK_NVML_CONFIG=") for e in env):
        return
    env += MOCK_ENV
    tmp = process + ".sim"
    with open(tmp, "w") as f:
        json.dump(proc, f)
    os.rename(tmp, process)


# What any image has: a driver library needing only these is injected alone.
BASE_LIBS = ("linux-vdso.so", "libc.so", "ld-linux", "libm.so", "libdl.so", "libpthread.so",
             "librt.so")


def driver_deps(lib):
    """The shared libraries the simulated libnvidia-ml.so.1 needs beyond glibc (libyaml, for
    its profile), mounted beside it: a real driver's NVML needs only glibc, and the plugin
    links its own libraries statically, so the image need not carry the simulator's."""
    out = subprocess.run(["ldd", lib], capture_output=True, text=True, check=True).stdout
    deps = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and not parts[0].startswith(BASE_LIBS):
            deps.append((parts[0], os.path.realpath(parts[2])))
    return deps


def inject(bundle, driver):
    path = os.path.join(bundle, "config.json")
    with open(path) as f:
        spec = json.load(f)
    env = spec.get("process", {}).get("env", [])
    if not wants_gpus(env):
        return
    mounts = spec.setdefault("mounts", [])
    if any(m.get("destination") == RUNDIR for m in mounts):
        return
    mounts.append({"destination": f"{LIBDIR}/libnvidia-ml.so.1", "type": "bind",
                   "source": os.path.join(driver, "libnvidia-ml.so.1"),
                   "options": ["rbind", "ro", "nosuid", "nodev"]})
    for name, source in driver_deps(os.path.join(driver, "libnvidia-ml.so.1")):
        mounts.append({"destination": f"{LIBDIR}/{name}", "type": "bind", "source": source,
                       "options": ["rbind", "ro", "nosuid", "nodev"]})
    mounts.append({"destination": RUNDIR, "type": "bind", "source": os.path.join(driver, "run"),
                   "options": ["rbind", "rw", "nosuid", "nodev", "noexec"]})
    env += MOCK_ENV
    tmp = path + ".sim"
    with open(tmp, "w") as f:
        json.dump(spec, f)
    os.rename(tmp, path)


def main():
    argv = sys.argv[1:]
    sep = argv.index("--")
    opts, args = argv[:sep], argv[sep + 1:]
    driver = opts[opts.index("--driver") + 1]
    runc = opts[opts.index("--runc") + 1]
    if "create" in args:
        for flag in ("--bundle", "-b"):
            if flag in args:
                inject(args[args.index(flag) + 1], driver)
                break
    elif "exec" in args:
        for flag in ("--process", "-p"):
            if flag in args:
                inject_exec(args[args.index(flag) + 1])
                break
    os.execv(runc, [runc] + args)


main()
