#!/usr/bin/python3
"""`gpu-device-plugin labels`: the binary prints GFD's expected label set for simulated
nodes (the case files of tests/labels/cases, written from the reference), writes the NFD
feature file when asked, follows --fail-on-init-error like GFD, and agrees with `list`
and `serve` on how many devices each labelled resource has."""
import json
import os
import signal
import stat
import sys
import time

import harness
from test_list import device_rows

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "attack"))
import attacklib  # noqa: E402  (threads, fds and RSS around a lifecycle step)

CASES = os.path.join(harness.SOURCE, "tests", "labels", "cases")


def read_case(name, top=True, case=None):
    """The case file format of tests/labels/test-labels-profile.c."""
    case = case if case is not None else {"labels": {}, "args": [], "config": "",
                                          "machine": None, "error": None, "profile": None}
    with open(os.path.join(CASES, name), encoding="utf-8") as f:
        for line in f.read().splitlines():
            if top and line.startswith("# profile: "):
                case["profile"] = line[len("# profile: "):]
            elif top and line.startswith("# args: "):
                case["args"] = line[len("# args: "):].split()
            elif top and line.startswith("# machine-type: "):
                case["machine"] = line[len("# machine-type: "):]
            elif top and line.startswith("# | "):
                case["config"] += line[4:] + "\n"
            elif not line or line.startswith("#"):
                continue
            elif line.startswith("@include "):
                read_case(line[len("@include "):], False, case)
            elif line.startswith("!error "):
                case["error"] = line[len("!error "):]
            elif line.startswith("-"):
                for k in [k for k in case["labels"] if k.startswith(line[1:])]:
                    del case["labels"][k]
            else:
                k, v = line.split("=", 1)
                case["labels"][k] = v
    return case


def parse_labels(text):
    out = {}
    for line in text.splitlines():
        k, v = line.split("=", 1)
        out[k] = v
    return out


class Labels(harness.PluginTestCase):
    def profile_of(self, case):
        p = case["profile"]
        if p == "builtin":
            return os.path.join(harness.SOURCE, "sim", "nvml", "default-node")
        return os.path.join(harness.SOURCE, p[:-len(".yaml")])

    def labels(self, case, extra=(), timestamp=False, env_extra=None, nvml=True):
        """Runs `labels` for a case; returns (CompletedProcess, args used)."""
        self.render(self.profile_of(case))
        machine = os.path.join(self.tmp, "machine")
        if case["machine"] != "-":
            with open(machine, "w", encoding="utf-8") as f:
                f.write(case["machine"] or "  NVIDIA DGX H100 (P/N 965-24387)\n")
        elif os.path.exists(machine):
            os.unlink(machine)
        args = ["labels", "--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                "--machine-type-file", machine] + ([] if timestamp else ["--no-timestamp"])
        if case["config"]:
            path = os.path.join(self.tmp, "config.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(case["config"])
            args += ["--config-file", path]
        args += case["args"] + list(extra)
        env = self.plugin_env(nvml=nvml, extra=env_extra)
        if case["profile"] == "builtin":
            env.pop("MOCK_NVML_CONFIG", None)
        return self.run_plugin(args, env=env), args

    def test_cases(self):
        for name in ["builtin.txt", "mock-t4.txt", "topo-16gpu-nvswitch.txt",
                     "a100-mig-single-single.txt", "a100-mig-mixed-mixed.txt",
                     "a100-mig-mixed-single.txt", "h100-mig-mixed.txt", "time-slicing.txt",
                     "time-slicing-renamed.txt", "mps.txt", "machine-type.txt",
                     "h100-mig-mps.txt"]:
            with self.subTest(case=name):
                case = read_case(name)
                r, _ = self.labels(case)
                if case["error"]:
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    errors = [l for l in r.stderr.splitlines() if l.startswith("E")]
                    self.assertEqual(len(errors), 1, r.stderr)
                    self.assertIn(case["error"], errors[0])
                    self.assertEqual(r.stdout, "")
                    continue
                self.assertEqual(r.returncode, 0, r.stderr)
                lines = r.stdout.splitlines()
                self.assertEqual(lines, sorted(lines), "sorted, one key=value a line")
                self.assertEqual(parse_labels(r.stdout), case["labels"])

    def test_timestamp(self):
        before = int(time.time())
        r, _ = self.labels(read_case("mock-t4.txt"), timestamp=True)
        after = int(time.time())
        self.assertEqual(r.returncode, 0, r.stderr)
        ts = int(parse_labels(r.stdout)["nvidia.com/gfd.timestamp"])
        self.assertTrue(before <= ts <= after, (before, ts, after))

    def test_output_file(self):
        case = read_case("a100-mig-mixed-mixed.txt")
        out = os.path.join(self.tmp, "features.d", "gfd")
        os.makedirs(os.path.dirname(out))
        r, _ = self.labels(case, extra=["--output-file", out])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "")
        with open(out, encoding="utf-8") as f:
            self.assertEqual(parse_labels(f.read()), case["labels"])
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o644)
        self.assertEqual(os.listdir(os.path.dirname(out)), ["gfd"])
        # the environment variable; and GFD's file mode writes the (given) path too
        os.unlink(out)
        r, _ = self.labels(case, env_extra={"GFD_OUTPUT_FILE": out})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(out))
        # file mode with an empty path: stdout, as GFD
        r, _ = self.labels(case, extra=["--use-node-feature-api=false", "--output-file="])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(parse_labels(r.stdout), case["labels"])

    def test_nvml_missing(self):
        case = read_case("mock-t4.txt")
        r, _ = self.labels(case, nvml=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len([l for l in r.stderr.splitlines() if l.startswith("E")]), 1, r.stderr)
        # GFD's null manager: only the timestamp and vGPU labels
        r, _ = self.labels(case, nvml=False, timestamp=True, extra=["--fail-on-init-error=false"])
        self.assertEqual(r.returncode, 0, r.stderr)
        got = parse_labels(r.stdout)
        self.assertEqual(sorted(got), ["nvidia.com/gfd.timestamp", "nvidia.com/vgpu.present"])
        self.assertEqual(got["nvidia.com/vgpu.present"], "false")

    def listed_counts(self, case):
        args = ["list", "--output", "json", "--sysfs-root", self.sys_root,
                "--proc-root", self.proc_root] + case["args"]
        if case["config"]:
            args += ["--config-file", os.path.join(self.tmp, "config.yaml")]
        env = self.plugin_env()
        if case["profile"] == "builtin":
            env.pop("MOCK_NVML_CONFIG", None)
        r = self.run_plugin(args, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        counts = {}
        for resource, _ in device_rows(json.loads(r.stdout)):
            counts[resource] = counts.get(resource, 0) + 1
        return counts

    def test_agrees_with_list_and_serve(self):
        """Per labelled resource, count x replicas is what list advertises. (gpu.count
        counts physical GPUs of the model, MIG-enabled ones too, as GFD: compared only
        where every GPU is a full GPU or single strategy relabels it.)"""
        checks = {
            # (a100-mig-mixed's 1c.2g.10gb makes the plugin refuse that node, as NVIDIA's)
            "compat-a100-mixed.txt": ["1g.5gb", "1g.5gb.me", "3g.20gb", "4g.20gb", "2g.10gb"],
            "a100-mig-single-single.txt": [None],
            "time-slicing.txt": [None],
            "time-slicing-renamed.txt": [None],
            "mock-t4.txt": [None],
        }
        for name, profiles in checks.items():
            with self.subTest(case=name):
                case = read_case(name)
                r, _ = self.labels(case)
                self.assertEqual(r.returncode, 0, r.stderr)
                got = parse_labels(r.stdout)
                listed = self.listed_counts(case)
                for p in profiles:
                    key = "nvidia.com/gpu" if p is None else "nvidia.com/mig-" + p
                    n = int(got[key + ".count"]) * int(got[key + ".replicas"])
                    advertised = listed.get(key, 0) + listed.get(key + ".shared", 0)
                    self.assertEqual(n, advertised, (key, got, listed))

        # serve: the kubelet sees count x replicas devices of the labelled resource
        case = read_case("time-slicing.txt")
        r, _ = self.labels(case)
        got = parse_labels(r.stdout)
        self.start_kubelet()
        args = ["--config-file", os.path.join(self.tmp, "config.yaml")]
        env = self.plugin_env()
        env.pop("MOCK_NVML_CONFIG", None)
        self.start_plugin(args, env=env)
        w = self.kubelet.call({"cmd": "wait-devices", "resource": "nvidia.com/gpu", "count": 1})
        self.assertNotIn("error", w, w)
        self.assertEqual(len(w["devices"]),
                         int(got["nvidia.com/gpu.count"]) * int(got["nvidia.com/gpu.replicas"]))

    def test_sleep_interval(self):
        """Accepted (GFD's Go durations and infinite), never a timer: one info line
        when it is not GFD's default; a bad value is refused like any flag."""
        self.render("t4")
        r = self.run_plugin(["labels", "--no-timestamp", "--sleep-interval", "1m30s"])
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_plugin(["labels", "--sleep-interval", "soon"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("invalid --sleep-interval \"soon\"", r.stderr)
        self.start_kubelet()
        p = self.start_plugin(["--sleep-interval=infinite"])
        at, _ = p.wait_log("--sleep-interval is accepted for compatibility")
        # serving (signals handled) before the teardown stops it
        p.wait_log(harness.REGISTERED_LINE, start=at)

    def test_serve_publishes_what_labels_prints(self):
        """serve --gfd in feature-file mode writes the same set `labels` prints (host facts
        included: machine type, PCI class), rewrites it after a reload that turns on
        time-slicing, and removes it when it stops, as GFD does."""
        case = read_case("mock-t4.txt")
        self.assertEqual(case["args"], [])
        r, _ = self.labels(case)
        self.assertEqual(r.returncode, 0, r.stderr)
        expected = parse_labels(r.stdout)
        out = os.path.join(self.tmp, "features.d", "gfd")
        os.makedirs(os.path.dirname(out))
        cfg = self.write_config("version: v1\n", name="serve.yaml")
        self.start_kubelet()
        p = self.start_plugin(["--machine-type-file", os.path.join(self.tmp, "machine"),
                               "--no-timestamp", "--gfd", "--use-node-feature-api=false",
                               "--output-file", out, "--config-file", cfg])

        def published():
            try:
                with open(out, encoding="utf-8") as f:
                    return parse_labels(f.read())
            except FileNotFoundError:
                return None

        def wait(pred, what):
            deadline = time.monotonic() + harness.TIMEOUT
            while not pred(published()):
                if time.monotonic() > deadline:
                    self.fail("%s: feature file is %r" % (what, published()))
                time.sleep(0.05)
        wait(lambda got: got == expected, "serve's labels equal `labels`")
        before = attacklib.Snapshot(p.pid)
        self.write_config("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                          "    - name: nvidia.com/gpu\n      replicas: 4\n", name="serve.yaml")
        p.signal(signal.SIGHUP)
        wait(lambda got: (got or {}).get("nvidia.com/gpu.replicas") == "4",
             "labels republished after the reload")
        got = published()
        self.assertEqual(got["nvidia.com/gpu.sharing-strategy"], "time-slicing")
        self.assertEqual(got["nvidia.com/gpu.product"], "NVIDIA-T4-SHARED")
        attacklib.assert_flat(self, before, attacklib.settled(p.pid, before), what="reload")
        self.assertEqual(p.finish(), [])
        self.assertFalse(os.path.exists(out), "feature file removed at exit")

if __name__ == "__main__":
    harness.main()
