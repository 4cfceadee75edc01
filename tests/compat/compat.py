"""Compatibility-matrix helpers: an independent model of what the reference plugin
(NVIDIA k8s-device-plugin v0.20.0) advertises and answers for a simulator profile,
and a runner that starts one plugin + test kubelet per configuration.

The model is computed from the profile YAML and the rules of
nvidia-plugin-behavior.md (§2.7, §3.4, §4.2-4.7, §5). It never calls the plugin's code.
The only simulator-specific rule it needs is how the simulator names MIG devices that
the profile gives no UUID (derive_mig_uuid, FNV-1a over "<gpu uuid>/<gi>/<ci>"), and
the capability-minor table, which it reads from the rendered mig-minors file like the
plugin reads the host's (§4.7).
"""

import os
import re
import signal
import subprocess
import sys
import time


sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402  (tests/integration/harness.py, reused as is)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat_node  # noqa: E402  (profiles -> GPUs / MIG devices, mig-minors)

SOURCE = harness.SOURCE
TIMEOUT = harness.TIMEOUT
CONTROL_NODES = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]
CDI_KIND = "k8s.device-plugin.nvidia.com/gpu"
CDI_SPEC = "k8s.device-plugin.nvidia.com-gpu.json"
ANNOTATION_RE = re.compile(r"^cdi\.k8s\.io/nvidia-device-plugin_"
                           r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
SHARED_PROFILES = ("a100", "h100", "t4")


def profile_path(name):
    return compat_node.profile_path(name, harness, SHARED_PROFILES, SOURCE)


def load_node(name):
    """GPUs of a profile in NVML index order (compat_node.load_node)."""
    return compat_node.load_node(profile_path(name))


read_mig_minors = compat_node.read_mig_minors


# ------------------------------------------------------------------ node model

class ExpectedFailure(Exception):
    """The reference refuses this configuration with `message` (exit 1)."""


# ------------------------------------------------------------------ expected resources

def resource_socket(resource):
    return "nvidia-%s.sock" % resource.split("/", 1)[1]


def mig_resource(profile):
    return "nvidia.com/mig-" + profile.replace("+", ".")


def expected_resources(gpus, minors, mig, id_strategy, sharing):
    """{resource: [device]} the reference advertises; device = {id (kubelet ID: UUID, plus
    "::k" for replicas), base (runtime name: UUID or index), index, uuid,
    gpu (physical UUID), paths, numa}. Raises ExpectedFailure with the reference's message.
    sharing = None or {"kind": "ts"|"mps", "replicas": n, "rename": bool, "names": [...]}."""
    if sharing and sharing["kind"] == "mps" and mig == "mixed":
        raise ExpectedFailure("using --mig-strategy=mixed is not supported with MPS")
    enabled = [g for g in gpus if g["mig_enabled"]]
    use_mig = mig != "none" and bool(enabled)
    # §4.2/§4.3, in the reference's order: the GPU and MIG device maps are built first
    # (a profile no pattern matches fails there), then the single strategy's checks:
    # a MIG-enabled GPU without MIG devices, more than one MIG device type, and last
    # full GPUs beside MIG devices.
    if mig == "mixed":
        for g in enabled:
            for m in g["migs"]:
                if re.match(r"\d+c\.", m["profile"]):
                    raise ExpectedFailure("MIG profile '%s' does not match any resource patterns" % m["profile"])
    if mig == "single" and enabled:
        for g in enabled:
            if not g["migs"]:
                raise ExpectedFailure("device %d has no MIG devices configured" % g["index"])
        if len({m["profile"] for g in enabled for m in g["migs"]}) > 1:
            raise ExpectedFailure("more than one MIG device type present on node")
        if len(enabled) != len(gpus):
            raise ExpectedFailure("all devices on the node must be configured with the same migEnabled value")

    res = {}
    for g in gpus:
        node = "/dev/nvidia%d" % g["minor"]
        if use_mig and g["mig_enabled"]:
            for m in g["migs"]:
                name = "nvidia.com/gpu" if mig == "single" else mig_resource(m["profile"])
                gi = "gpu%d/gi%d/access" % (g["minor"], m["gi"])
                ci = "gpu%d/gi%d/ci%d/access" % (g["minor"], m["gi"], m["ci"])
                index = "%d:%d" % (g["index"], m["j"])
                res.setdefault(name, []).append({
                    "uuid": m["uuid"], "index": index, "gpu": g["uuid"], "numa": g["numa"], "mig": True,
                    "paths": [node, "/dev/nvidia-caps/nvidia-cap%d" % minors[gi],
                              "/dev/nvidia-caps/nvidia-cap%d" % minors[ci]]})
        else:
            res.setdefault("nvidia.com/gpu", []).append({
                "uuid": g["uuid"], "index": str(g["index"]), "gpu": g["uuid"], "numa": g["numa"],
                "mig": False, "paths": [node]})
    # §4.1: the kubelet always sees the UUID ("ID (kubelet)"); the ID strategy only picks
    # what the runtime is told (§5 devIDs: NVIDIA_VISIBLE_DEVICES, mounts, CDI names).
    for devs in res.values():
        for d in devs:
            d["id"] = d["uuid"]
            d["base"] = d["uuid"] if id_strategy == "uuid" else d["index"]
            d["replicas"] = 1

    if sharing:
        if sharing["kind"] == "mps" and any(d["mig"] for n in sharing["names"] for d in res.get(n, [])):
            raise ExpectedFailure("sharing using MPS is not supported for MIG devices")
        out = {}
        for name, devs in res.items():
            if name not in sharing["names"]:
                out.setdefault(name, []).extend(devs)
                continue
            target = name + ".shared" if sharing["rename"] else name
            for d in devs:
                for k in range(sharing["replicas"]):
                    r = dict(d, id="%s::%d" % (d["uuid"], k), replicas=sharing["replicas"])
                    out.setdefault(target, []).append(r)
        res = out
    return res


# ------------------------------------------------------------------ expected Allocate

def expected_allocate(devs_by_id, ids, case):
    """One ContainerAllocateResponse for `ids`, as a dict with lists kept in reference
    order; `unordered` names the parts whose order the reference leaves to map order."""
    devs = [devs_by_id[i] for i in ids]
    dev_ids = []
    for d in devs:
        if d["base"] not in dev_ids:
            dev_ids.append(d["base"])
    strategies = case.list_strategies
    out = {"envs": {}, "mounts": [], "devices": [], "annotations": {}, "cdi_devices": []}
    names = ["k8s.device-plugin.nvidia.com/gpu=%s" % d for d in dev_ids]
    if "cdi-annotations" in strategies:
        out["annotations"] = {"<key>": ",".join(names)}
    if "cdi-cri" in strategies:
        out["cdi_devices"] = names
    if case.sharing and case.sharing["kind"] == "mps":
        res = case.resource_of(ids[0])
        out["envs"]["CUDA_MPS_PIPE_DIRECTORY"] = "/mps/%s/pipe" % res
        out["mounts"] += [
            {"container_path": "/mps/%s/pipe" % res, "host_path": os.path.join(case.mps_root, res, "pipe"),
             "read_only": False},
            {"container_path": "/dev/shm", "host_path": os.path.join(case.mps_root, "shm"), "read_only": False}]
    if all(s.startswith("cdi-") for s in strategies):
        return out
    if "envvar" in strategies:
        out["envs"]["NVIDIA_VISIBLE_DEVICES"] = ",".join(dev_ids)
    if "volume-mounts" in strategies:
        out["envs"]["NVIDIA_VISIBLE_DEVICES"] = "/var/run/nvidia-container-devices"
        out["mounts"] += [{"container_path": "/var/run/nvidia-container-devices/" + d, "host_path": "/dev/null",
                           "read_only": False} for d in dev_ids]
    if case.pass_specs:
        root = case.dev_root_value()
        paths = [p for p in CONTROL_NODES if os.path.exists(join_root(root, p))]
        for d in devs:
            paths += d["paths"]
        out["devices"] = [{"container_path": p, "host_path": join_root(root, p), "permissions": "rw"}
                          for p in paths]
    return out


def join_root(root, path):
    return os.path.join(root, path.lstrip("/"))


def normalise(resp, id_strategy):
    """Comparable form of a ContainerAllocateResponse: the annotation key replaced by its
    pattern check; under the index strategy the reference's device order is map order
    (§5), so comma lists, CDI names and mounts are compared as sorted."""
    r = {k: resp.get(k) for k in ("envs", "mounts", "devices", "annotations", "cdi_devices")}
    r["envs"] = dict(r["envs"] or {})
    r["mounts"] = list(r["mounts"] or [])
    r["devices"] = list(r["devices"] or [])
    r["cdi_devices"] = list(r["cdi_devices"] or [])
    ann = {}
    for k, v in (r["annotations"] or {}).items():
        ann["<key>" if k == "<key>" or ANNOTATION_RE.match(k) else "<bad key %s>" % k] = v
    r["annotations"] = ann
    if id_strategy == "index":
        def srt(s):
            return ",".join(sorted(s.split(",")))
        if "NVIDIA_VISIBLE_DEVICES" in r["envs"]:
            r["envs"]["NVIDIA_VISIBLE_DEVICES"] = srt(r["envs"]["NVIDIA_VISIBLE_DEVICES"])
        r["annotations"] = {k: srt(v) for k, v in r["annotations"].items()}
        r["cdi_devices"] = sorted(r["cdi_devices"])
        r["mounts"] = sorted(r["mounts"], key=lambda m: (m["container_path"], m["host_path"]))
    return r


# ------------------------------------------------------------------ one plugin run

class Case:
    """One configuration: profile × MIG strategy × device-list strategies × ID strategy
    × sharing × device specs. `run()` starts the kubelet and the plugin in a temp dir
    and returns a list of failure texts (empty: all good)."""

    def __init__(self, profile, mig="none", list_strategies=("envvar",), id_strategy="uuid",
                 sharing=None, pass_specs=None):
        self.profile = profile
        self.mig = mig
        self.list_strategies = list(list_strategies)
        self.id_strategy = id_strategy
        self.sharing = sharing  # {"kind", "replicas", "rename"}; "names" filled in run()
        self.pass_specs = pass_specs  # None, "devroot" (--dev-root T/dev) or "plain"
        self.failures = []

    def __str__(self):
        sh = "none"
        if self.sharing:
            sh = "%s-x%d%s" % (self.sharing["kind"], self.sharing["replicas"],
                               "-rename" if self.sharing.get("rename") else "")
        return "%s mig=%s list=%s id=%s sharing=%s specs=%s" % (
            self.profile, self.mig, ",".join(self.list_strategies), self.id_strategy, sh, self.pass_specs)

    # -- environment
    def dev_root_value(self):
        return self.dev_root if self.pass_specs == "devroot" else "/"

    def config_text(self):
        lines = ["version: v1"]
        if self.sharing:
            key = "timeSlicing" if self.sharing["kind"] == "ts" else "mps"
            lines += ["sharing:", "  %s:" % key]
            if self.sharing.get("rename"):
                lines.append("    renameByDefault: true")
            lines.append("    resources:")
            for n in self.sharing["names"]:
                lines += ["    - name: %s" % n, "      replicas: %d" % self.sharing["replicas"]]
        return "\n".join(lines) + "\n"

    def args(self):
        a = ["--kubelet-socket", os.path.join(self.dp, "kubelet.sock"),
             "--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
             "--cdi-spec-dir", self.cdi_dir, "--config-file", self.config,
             "--mig-strategy", self.mig, "--device-list-strategy", ",".join(self.list_strategies),
             "--device-id-strategy", self.id_strategy, "-v", "2"]
        if self.pass_specs:
            a.append("--pass-device-specs")
        if self.pass_specs == "devroot":
            a += ["--dev-root", self.dev_root]
        if self.sharing and self.sharing["kind"] == "mps":
            a += ["--mps-root", self.mps_root]
        return a

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_LIBRARY_PATH", "MOCK_NVML_CONFIG", "MOCK_NVML_CONTROL", "KUBELET_SOCKET",
                            "CONFIG_FILE", "MIG_STRATEGY", "GDP_SYSFS_ROOT", "GDP_PROC_ROOT")}
        env["LD_LIBRARY_PATH"] = harness.SIM_DIR
        env["MOCK_NVML_CONFIG"] = profile_path(self.profile)
        env["MOCK_NVML_CONTROL"] = self.ctl
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        return env

    def setup(self):
        self.tmp = harness.scratch.mkdtemp("gdp-compat-")
        # sockets: under /tmp when $TMPDIR is long (a socket path has 108 bytes)
        self.socks = harness.scratch.socket_dir("gdp-compat-")
        self.dp = os.path.join(self.socks, "dp")
        self.sys_root = os.path.join(self.tmp, "sys")
        self.proc_root = os.path.join(self.tmp, "proc")
        # The reference's dev root is a root that holds dev/ (host path = dev root +
        # "/dev/nvidia0"), while nvml-sim-render --dev-root takes the dev directory.
        self.dev_root = os.path.join(self.tmp, "host")
        self.cdi_dir = os.path.join(self.tmp, "cdi")
        self.mps_root = os.path.join(self.tmp, "mps")
        self.ctl = os.path.join(self.tmp, "nvml.ctl")
        self.config = os.path.join(self.tmp, "config.yaml")
        os.makedirs(self.dp)
        os.mkfifo(self.ctl, 0o600)
        r = subprocess.run([harness.SIM_RENDER, "--profile", profile_path(self.profile),
                            "--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                            "--dev-root", os.path.join(self.dev_root, "dev")], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("nvml-sim-render %s failed: %s%s" % (self.profile, r.stdout, r.stderr))
        self.gpus = load_node(self.profile)
        self.minors = read_mig_minors(self.proc_root)
        self.log = open(os.path.join(self.tmp, "log.txt"), "w", encoding="utf-8")

    def cleanup(self):
        for child in (getattr(self, "plugin", None), getattr(self, "kubelet", None)):
            if child is None:
                continue
            try:
                child.kill() if isinstance(child, harness.Plugin) else child.stop()
            except Exception:  # noqa: BLE001  teardown must go on
                pass
        self.log.close()
        harness.scratch.remove(self.tmp)
        harness.scratch.remove(self.socks)

    def check(self, cond, text):
        if not cond:
            self.failures.append("%s: %s" % (self, text))
        return cond

    def eq(self, got, want, what):
        return self.check(got == want, "%s:\n  expected %r\n  got      %r" % (what, want, got))

    def resource_of(self, dev_id):
        return self.owner[dev_id]

    # -- the run
    def run(self):
        self.setup()
        try:
            self._run()
        except AssertionError as e:
            self.failures.append("%s: %s\n%s" % (self, e, self.context()))
        finally:
            self.cleanup()
        return self.failures

    def context(self):
        parts = []
        if getattr(self, "plugin", None) is not None:
            parts.append("plugin stderr (tail):\n" + self.plugin.stderr.text()[-3000:])
        if getattr(self, "kubelet", None) is not None:
            parts.append("kubelet events (tail):\n" + self.kubelet.events.text()[-2000:])
        return "\n".join(parts)

    def _run(self):
        # Which resources the sharing config names: every resource this node would have
        # without sharing, except under mixed where one MIG resource stays unshared so
        # that "unreplicated resources are unchanged" is covered too.
        expect_error = None
        if self.sharing is not None:
            try:
                base = expected_resources(self.gpus, self.minors, self.mig, self.id_strategy, None)
                names = sorted(base)
                if len(names) > 2:
                    names = names[:-1]
            except ExpectedFailure:
                names = ["nvidia.com/gpu"]
            self.sharing["names"] = names
        try:
            want = expected_resources(self.gpus, self.minors, self.mig, self.id_strategy, self.sharing)
        except ExpectedFailure as e:
            expect_error = str(e)
        with open(self.config, "w", encoding="utf-8") as f:
            f.write(self.config_text())
        if self.sharing and self.sharing["kind"] == "mps":
            os.makedirs(os.path.join(self.mps_root, "shm"))
            for n in self.sharing["names"]:
                target = n + ".shared" if self.sharing.get("rename") else n
                os.makedirs(os.path.join(self.mps_root, target, "pipe"))
                open(os.path.join(self.mps_root, target, ".started"), "w").close()
        self.kubelet = harness.TestKubelet(self.dp, self.log)
        self.plugin = harness.Plugin(self.args(), self.env(), self.log)
        if expect_error is not None:
            self._expect_start_failure(expect_error)
            return
        self._check_registration(want)
        self._check_preferred(want)
        self._check_allocations(want)
        self._check_cdi(want)
        # Nothing else registered meanwhile (one start pass registers everything).
        got = {e["resource"] for e in self.kubelet.events.lines if e.get("event") == "register"}
        self.eq(got, set(want), "registered resources")
        self.check(self.plugin.alive(), "plugin died:\n" + self.context())

    def _expect_start_failure(self, message):
        rc = self.plugin.wait_exit()
        self.plugin.stderr._thread.join(5)
        err = self.plugin.stderr.text()
        self.eq(rc, 1, "exit code of a configuration the reference rejects (%s)" % message)
        self.check(message in err, "stderr does not say %r:\n%s" % (message, err[-2000:]))
        regs = [e for e in self.kubelet.events.lines if e.get("event") == "register"]
        self.eq(regs, [], "registrations before the start-up error")

    def _check_registration(self, want):
        self.owner = {}
        for name, devs in sorted(want.items()):
            got = self.kubelet.call({"cmd": "wait-devices", "resource": name, "count": len(devs),
                                     "timeout": TIMEOUT}, timeout=TIMEOUT + 5)
            if "error" in got:
                raise AssertionError("resource %s never listed %d devices: %r" % (name, len(devs), got))
            reg = self.kubelet.wait("register", resource=name)
            self.eq(reg.get("endpoint"), resource_socket(name), "endpoint of %s" % name)
            self.eq(reg.get("version"), "v1beta1", "version of %s" % name)
            self.eq(reg.get("options"), {"pre_start_required": False, "get_preferred_allocation_available": True},
                    "options of %s" % name)
            path = os.path.join(self.dp, resource_socket(name))
            self.check(os.path.exists(path), "socket %s missing" % path)
            ids = sorted(d["id"] for d in got["devices"])
            self.eq(ids, sorted(d["id"] for d in devs), "device IDs of %s" % name)
            by_id = {d["id"]: d for d in devs}
            for d in got["devices"]:
                w = by_id.get(d["id"])
                if w is None:
                    continue
                self.eq(d.get("health"), "Healthy", "health of %s" % d["id"])
                self.eq(d.get("numa"), [w["numa"]] if w["numa"] is not None else None, "NUMA of %s" % d["id"])
            for d in devs:
                self.owner[d["id"]] = name

    def _check_preferred(self, want):
        """§2.6: answers name advertised IDs only (never indices); a request for more
        devices than available is an empty answer under the aligned policy (full GPUs,
        no replica IDs) and "not enough available devices" under the greedy one."""
        for name, devs in sorted(want.items()):
            ids = [d["id"] for d in devs]
            aligned = not any(d["mig"] for d in devs) and not any("::" in i for i in ids)
            size = min(2, len(ids))
            got = self.kubelet.call({"cmd": "preferred", "resource": name, "containers": [
                {"available": ids, "must_include": ids[-1:], "size": size}]})
            if self.check("containers" in got and len(got["containers"]) == 1,
                          "preferred %s: %r" % (name, got)):
                ans = got["containers"][0]
                self.eq(len(ans), size, "preferred %s answer size" % name)
                self.check(set(ans) <= set(ids), "preferred %s names IDs it never advertised: %r"
                           % (name, sorted(set(ans) - set(ids))))
                self.check(ids[-1] in ans, "preferred %s: must-include %s left out: %r" % (name, ids[-1], ans))
                if not aligned:
                    self.check(ans[:1] == ids[-1:], "preferred %s: must-include first, got %r" % (name, ans))
            got = self.kubelet.call({"cmd": "preferred", "resource": name, "containers": [
                {"available": ids, "must_include": [], "size": len(ids) + 1}]})
            what = "preferred %s for %d of %d" % (name, len(ids) + 1, len(ids))
            if aligned:
                self.eq(got.get("containers"), [[]], what)
            else:
                msg = ("error getting list of preferred allocation devices: "
                       "not enough available devices to satisfy allocation")
                self.check("error" in got and got["error"].get("code") == "UNKNOWN"
                           and got["error"].get("message") == msg,
                           "%s: expected UNKNOWN %r, got %r" % (what, msg, got))

    def allocate(self, name, containers):
        return self.kubelet.call({"cmd": "allocate", "resource": name, "containers": containers})

    def _check_allocations(self, want):
        shared = self.sharing is not None
        fail_gt_one = shared and self.sharing["kind"] == "mps"
        for name, devs in sorted(want.items()):
            by_id = {d["id"]: d for d in devs}
            requests = [[devs[0]["id"]], [devs[-1]["id"]]]
            if len(devs) > 1:
                requests.append([devs[-1]["id"], devs[0]["id"]])
            if not any(d["replicas"] > 1 for d in devs):
                requests.append([d["id"] for d in devs[:16]])
            else:
                n = devs[0]["replicas"]
                # Two replicas of one GPU (de-duplicated env, repeated device nodes) and
                # one replica each of two GPUs.
                requests.append([devs[0]["id"], devs[1]["id"]])
                if len(devs) > n:
                    requests.append([devs[0]["id"], devs[n]["id"]])
            for ids in requests:
                got = self.allocate(name, [ids])
                what = "Allocate %s %s" % (name, ids)
                if fail_gt_one and len(ids) > 1 and any("::" in i for i in ids):
                    msg = ('invalid allocation request for "%s": invalid request: maximum request size for '
                           'shared resources is 1; found %d' % (name, len(ids)))
                    self.check("error" in got and msg in got["error"].get("message", ""),
                               "%s: expected error %r, got %r" % (what, msg, got))
                    continue
                if not self.check("containers" in got and len(got["containers"]) == 1,
                                  "%s: expected one container response, got %r" % (what, got)):
                    continue
                exp = normalise(expected_allocate(by_id, ids, self), self.id_strategy)
                self.eq(normalise(got["containers"][0], self.id_strategy), exp, what)
                if self.pass_specs == "devroot" and exp["devices"]:
                    # The rendered host has every node: all four control nodes are in,
                    # and every host path points at a node that exists.
                    paths = [d["container_path"] for d in exp["devices"]]
                    self.eq(paths[:4], CONTROL_NODES, "control nodes in %s" % what)
                    for d in got["containers"][0]["devices"] or []:
                        self.check(os.path.exists(d["host_path"]), "%s: host path %s does not exist" % (
                            what, d["host_path"]))
            # Two containers in one request: one response each, in order.
            if len(devs) > 1 and not fail_gt_one:
                a, b = [devs[0]["id"]], [devs[-1]["id"]]
                got = self.allocate(name, [a, b])
                if self.check("containers" in got and len(got["containers"]) == 2,
                              "two-container Allocate %s: %r" % (name, got)):
                    for ids, c in zip((a, b), got["containers"]):
                        self.eq(normalise(c, self.id_strategy),
                                normalise(expected_allocate(by_id, ids, self), self.id_strategy),
                                "Allocate %s container %s" % (name, ids))
            bogus = "GPU-00000000-dead-beef-0000-000000000000"
            got = self.allocate(name, [[bogus]])
            msg = 'invalid allocation request for "%s": invalid request: unknown device: %s' % (name, bogus)
            self.check("error" in got and msg in got["error"].get("message", ""),
                       "Allocate unknown ID on %s: expected %r, got %r" % (name, msg, got))

    def _check_cdi(self, want):
        path = os.path.join(self.cdi_dir, CDI_SPEC)
        if not any(s.startswith("cdi-") for s in self.list_strategies):
            return
        if not self.check(os.path.exists(path), "CDI spec %s not written" % path):
            return
        import json
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        self.eq(spec.get("kind"), CDI_KIND, "CDI kind")
        nodes = {}
        for d in spec.get("devices") or []:
            nodes[d.get("name")] = {n.get("path") for n in (d.get("containerEdits") or {}).get("deviceNodes") or []}
        for devs in want.values():
            for d in devs:
                if not self.check(d["base"] in nodes, "CDI spec does not name %s (names: %s)" % (
                        d["base"], sorted(nodes))):
                    continue
                self.check(set(d["paths"]) <= nodes[d["base"]], "CDI device %s: nodes %s lack %s" % (
                    d["base"], sorted(nodes[d["base"]]), d["paths"]))


def run_cases(cases, workers=2):
    """Runs cases `workers` at a time; returns all failure texts."""
    from concurrent.futures import ThreadPoolExecutor
    failures = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for f in pool.map(lambda c: c.run(), cases):
            failures.extend(f)
    return failures


__all__ = ["Case", "ExpectedFailure", "expected_resources", "load_node", "read_mig_minors", "run_cases",
           "profile_path", "resource_socket", "harness", "signal", "time"]
