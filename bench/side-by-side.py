#!/usr/bin/python3
"""side-by-side: run NVIDIA's k8s-device-plugin and ours on the same simulated node with
the same test kubelet, and print every difference in what the kubelet sees.

    GDP_NVIDIA_PLUGIN=/path/to/nvidia-device-plugin bench/side-by-side.py --build BUILD \\
        [--profile a100 --profile compat-a100-mixed ...] [--only SUBSTRING]

Without GDP_NVIDIA_PLUGIN it prints why it did nothing and exits 77 (meson: SKIP). It
is a comparison tool, not a test: it is registered as a meson benchmark (`meson test
--benchmark side-by-side`), never in the default suite. This project never fetches or
builds NVIDIA's plugin; bring your own binary (v0.13+; HEAD flags are passed).

What each run does, on each plugin, with one rendered simulator host per run:
  Register (endpoint, version, options), the first device list of every resource (IDs,
  health, NUMA), Allocate of the first, the last and both devices and of an unknown ID,
  GetPreferredAllocation (must-include + size 2, and size n+1), then an Xid 48 on the
  first device of the first resource and the lists every resource receives after it.

NVIDIA's plugin always puts its sockets in /var/lib/kubelet/device-plugins and reads
/sys and /proc directly (§2.2, §4.6, §4.7); it runs in a user + mount namespace
(`unshare -rm`) where the test kubelet's directory, the rendered sysfs PCI devices and
/proc/driver are bind-mounted there. Ours gets --sysfs-root / --proc-root instead.
Exit: 0 no difference, 1 differences (printed), 77 skipped, 2 harness failure.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)

CONFIGS = [
    # (name, mig strategy, extra flags, config file text or None)
    ("uuid-envvar", "none", [], None),
    ("index-envvar", "none", ["--device-id-strategy", "index"], None),
    ("index-volume-mounts", "none", ["--device-id-strategy", "index",
                                     "--device-list-strategy", "volume-mounts"], None),
    ("timeslicing-x2", "none", [], "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                   "    - name: nvidia.com/gpu\n      replicas: 2\n"),
    ("timeslicing-x2-index", "none", ["--device-id-strategy", "index"],
     "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"),
    ("mig-single", "single", [], None),
    ("mig-mixed", "mixed", [], None),
    ("mig-mixed-index", "mixed", ["--device-id-strategy", "index",
                                  "--device-list-strategy", "envvar,volume-mounts"], None),
    ("pass-device-specs", "none", ["--pass-device-specs"], None),
]
DEFAULT_PROFILES = ["a100", "t4", "compat-a100-mixed", "a100-mig-single", "h100-mig"]
SETTLE = 1.0        # seconds of quiet that end an observation window (a tool, not a test)
ANNOTATION = re.compile(r"nvidia-device-plugin_[0-9a-f-]{36}$")


def profile_path(name, data):
    for p in (os.path.join(data, "nvml-mock-profiles", name + ".yaml"),
              os.path.join(SOURCE, "sim", "profiles", name + ".yaml"), name):
        if os.path.exists(p):
            return os.path.abspath(p)
    raise SystemExit("side-by-side: no profile %r" % name)


class Run:
    """One plugin on one freshly rendered host with its own test kubelet."""

    def __init__(self, side, build, profile, cfg, nvidia):
        sys.path.insert(0, os.path.join(SOURCE, "tests", "integration"))
        import harness  # noqa: E402  (the same test kubelet wrapper the suite uses)
        self.h = harness
        self.side, self.build, self.profile, self.cfg, self.nvidia = side, build, profile, cfg, nvidia
        self.tmp = tempfile.mkdtemp(prefix="gdp-sbs-%s-" % side)
        for d in ("dp", "sys", "proc", "dev"):
            os.makedirs(os.path.join(self.tmp, d))
        self.ctl = os.path.join(self.tmp, "nvml.ctl")
        os.mkfifo(self.ctl, 0o600)
        subprocess.run([os.path.join(build, "sim", "nvml", "nvml-sim-render"), "--profile", profile,
                        "--sysfs-root", self.p("sys"), "--proc-root", self.p("proc"),
                        "--dev-root", self.p("dev")], check=True, capture_output=True)
        self.log = open(self.p("log.txt"), "w", encoding="utf-8")
        self.kubelet = harness.TestKubelet(self.p("dp"), self.log)
        self.proc = subprocess.Popen(self.command(), env=self.env(), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log, close_fds=True)

    def p(self, *parts):
        return os.path.join(self.tmp, *parts)

    def command(self):
        name, mig, flags, text = self.cfg
        args = ["--kubelet-socket", self.p("dp", "kubelet.sock"), "--mig-strategy", mig] + flags
        if text:
            with open(self.p("config.yaml"), "w", encoding="utf-8") as f:
                f.write(text)
            args += ["--config-file", self.p("config.yaml")]
        if self.side == "ours":
            return [os.path.join(self.build, "src", "gpu-device-plugin"), "--sysfs-root", self.p("sys"),
                    "--proc-root", self.p("proc")] + args
        setup = ("set -e; mount -t tmpfs none /var/lib; mkdir -p /var/lib/kubelet/device-plugins; "
                 "mount --bind \"$1/dp\" /var/lib/kubelet/device-plugins; "
                 "mount --bind \"$1/sys/bus/pci/devices\" /sys/bus/pci/devices; "
                 "if [ -d \"$1/proc/driver\" ] && [ -d /proc/driver ]; then "
                 "mount --bind \"$1/proc/driver\" /proc/driver; fi; shift; exec \"$@\"")
        return ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", setup, "sh", self.tmp,
                self.nvidia] + args

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "KUBELET_SOCKET",
                                                                         "CONFIG_FILE", "MIG_STRATEGY"))}
        env.update(LD_LIBRARY_PATH=os.path.join(self.build, "sim", "nvml"), MOCK_NVML_CONFIG=self.profile,
                   MOCK_NVML_CONTROL=self.ctl)
        return env

    def quiet(self, start):
        """Waits until no kubelet event arrived for SETTLE seconds (bounded)."""
        deadline = time.monotonic() + self.h.TIMEOUT
        n = len(self.kubelet.events.lines)
        last = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if len(self.kubelet.events.lines) != n:
                n, last = len(self.kubelet.events.lines), time.monotonic()
            elif time.monotonic() - last >= SETTLE and n > start:
                return

    def call(self, cmd):
        try:
            return self.kubelet.call(cmd)
        except AssertionError as e:
            return {"harness-error": str(e).splitlines()[0]}

    def observe(self):
        ev = self.kubelet.events
        self.quiet(0)
        out = {"exit": self.proc.poll()}
        regs = {e["resource"]: {k: e.get(k) for k in ("endpoint", "version", "options")}
                for e in ev.lines if e.get("event") == "register"}
        out["register"] = regs
        lists = {}
        for e in ev.lines:
            if e.get("event") == "devices" and e["resource"] not in lists:
                lists[e["resource"]] = sorted(e["devices"], key=lambda d: d["id"])
        out["devices"] = lists
        for res, devs in sorted(lists.items()):
            ids = [d["id"] for d in devs]
            if not ids:
                continue
            reqs = {"first": [ids[0]], "last": [ids[-1]], "both": [ids[0], ids[-1]],
                    "unknown": ["GPU-00000000-dead-beef-0000-000000000000"]}
            for what, req in reqs.items():
                out["allocate %s %s" % (res, what)] = normalise(self.call(
                    {"cmd": "allocate", "resource": res, "containers": [req]}))
            n = len(ids)
            out["preferred %s must+2" % res] = self.call({"cmd": "preferred", "resource": res, "containers": [
                {"available": ids, "must_include": ids[-1:], "size": min(2, n)}]})
            out["preferred %s n+1" % res] = self.call({"cmd": "preferred", "resource": res, "containers": [
                {"available": ids, "must_include": [], "size": n + 1}]})
        if lists:
            first = sorted(lists)[0]
            target = lists[first][0]["id"].split("::")[0]
            mark = ev.mark()
            with open(self.ctl, "w", encoding="utf-8") as f:
                f.write("xid %s 48\n" % target)
            self.quiet(mark)
            after = {}
            for e in ev.lines[mark:]:
                if e.get("event") == "devices":
                    after.setdefault(e["resource"], []).append(
                        sorted((d["id"], d["health"]) for d in e["devices"] if d["health"] != "Healthy"))
            out["after xid 48 on %s" % target] = {r: {"messages": len(v), "unhealthy": v[-1]}
                                                  for r, v in sorted(after.items())}
        return out

    def close(self, keep):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.kubelet.stop()
        self.log.close()
        if not keep:
            shutil.rmtree(self.tmp, True)


def normalise(event):
    """The parts of an Allocate answer the reference leaves random are made comparable:
    the CDI annotation key's UUID, and map-ordered comma lists (index strategy)."""
    event = json.loads(json.dumps(event))
    for c in event.get("containers") or []:
        c["annotations"] = {(ANNOTATION.sub("nvidia-device-plugin_<uuid>", k)): v
                            for k, v in (c.get("annotations") or {}).items()}
        envs = c.get("envs") or {}
        if "NVIDIA_VISIBLE_DEVICES" in envs:
            envs["NVIDIA_VISIBLE_DEVICES"] = ",".join(sorted(envs["NVIDIA_VISIBLE_DEVICES"].split(",")))
        c["mounts"] = sorted(c.get("mounts") or [], key=lambda m: json.dumps(m, sort_keys=True))
    event.pop("t", None)
    return event


def diff(a, b, path=""):
    """Every path where a (ours) and b (NVIDIA's) differ, as text lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k == "t":
                continue
            if k not in a:
                out.append("%s/%s: only NVIDIA's: %s" % (path, k, json.dumps(b[k])))
            elif k not in b:
                out.append("%s/%s: only ours: %s" % (path, k, json.dumps(a[k])))
            else:
                out += diff(a[k], b[k], "%s/%s" % (path, k))
        return out
    if a != b:
        return ["%s:\n    ours:     %s\n    NVIDIA's: %s" % (path or "/", json.dumps(a), json.dumps(b))]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("GDP_BUILD_DIR", os.path.join(SOURCE, "build-test")))
    ap.add_argument("--profile", action="append")
    ap.add_argument("--only", help="run configurations whose name contains this")
    ap.add_argument("--keep", action="store_true", help="keep each run's temp dir (log.txt)")
    a = ap.parse_args()
    nvidia = os.environ.get("GDP_NVIDIA_PLUGIN")
    if not nvidia:
        print("side-by-side: SKIP: GDP_NVIDIA_PLUGIN is not set. Set it to the path of NVIDIA's "
              "nvidia-device-plugin binary (built or extracted by you) to compare it with ours "
              "on the simulator; nothing was run.")
        return 77
    if not os.access(nvidia, os.X_OK):
        print("side-by-side: GDP_NVIDIA_PLUGIN=%s is not an executable file" % nvidia)
        return 2
    build = os.path.abspath(a.build)
    os.environ.setdefault("GDP_BUILD_DIR", build)
    os.environ.setdefault("GDP_SOURCE_DIR", SOURCE)
    data = os.environ.setdefault("GDP_TEST_DATA", os.path.join(SOURCE, "tests", "data"))
    total = 0
    for prof in a.profile or DEFAULT_PROFILES:
        path = profile_path(prof, data)
        for cfg in CONFIGS:
            if a.only and a.only not in cfg[0]:
                continue
            seen = {}
            for side in ("ours", "nvidia"):
                r = Run(side, build, path, cfg, nvidia)
                try:
                    seen[side] = r.observe()
                finally:
                    r.close(a.keep)
            lines = diff(seen["ours"], seen["nvidia"])
            total += len(lines)
            counts = ["%s %d resources/%d devices" % (side, len(seen[side]["devices"]),
                                                        sum(len(v) for v in seen[side]["devices"].values()))
                      for side in ("ours", "nvidia")]
            print("== %s %s (%s): %s" % (prof, cfg[0], ", ".join(counts),
                                         "same" if not lines else "%d differences" % len(lines)), flush=True)
            for line in lines:
                print("  " + line)
    print("side-by-side: %d differences in total" % total)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
