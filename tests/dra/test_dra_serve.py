#!/usr/bin/python3
"""The real binary in DRA mode, end to end over real sockets: `serve --dra` (and the
`gpu-kubelet-plugin` name through a symlink) on the simulated 8-GPU a100 host, against the
fake API server of tests/kube (which checks every ResourceSlice write against the 1.34.9
rules and serves the real 1.34 ResourceClaim objects of tests/data/dra/objects, moved to
this node's pool), with the kubelet played by dra_kubelet.py (grpcio): registration through
the registrar directory, NodePrepareResources / NodeUnprepareResources, the health stream.
Also: the device-plugin side (the test kubelet) and the split between the two APIs,
restarts of the plugin and of the kubelet stand-in (one slice write in all), the slice
wiped by the kubelet and published again, bad input, a CDI root that is not writable, an
Xid that takes a device out of the slice (or taints it) until it recovers, TimeSlicing's
nvidia-smi run off the loop (other calls answered meanwhile, the tool reaped, killed at
stop) and its GPU reset on unprepare, and threads / fds / RSS flat around the lifecycle.

usage: test_dra_serve.py <fake-apiserver>"""
import json
import os
import re
import signal
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "attack"))
import attacklib  # noqa: E402
from kubetest import scratch  # noqa: E402
from dra_kubelet import (FakeApi, CDI_KIND, DRIVER, HEALTHY, NODE, UNHEALTHY, Kubelet, cdi_errors,  # noqa: E402
                         obj, on_node, ref)

FAKE = None
SLICE = NODE + "-" + DRIVER + "-0"
SLICE_WRITE = re.compile(r"^req (POST|PUT|DELETE) /apis/resource\.k8s\.io/v1/resourceslices")
# Health settings short enough that a recoverable Xid clears within a second
# (tests/health/test_health_recovery.py uses the same).
FAST_HEALTH = {"GDP_HEALTH_QUIET_PERIOD": "200ms", "GDP_HEALTH_MAX_QUIET_PERIOD": "800ms",
               "GDP_HEALTH_FLAP_WINDOW": "1m", "GDP_HEALTH_WAIT_TIMEOUT": "100ms"}


class DraServe(FakeApi, harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.render("a100")
        self.uuids = [g["uuid"] for g in harness.load_profile("a100")]
        self.start_fake_api(FAKE)
        socks = scratch.socket_dir("gdp-dra-")  # the DRA directories' bound (78 bytes)
        self.registrar = os.path.join(socks, "plugins_registry")
        self.plugins = os.path.join(socks, "plugins")
        self.cdi = os.path.join(self.tmp, "cdi")
        self.kl = Kubelet(self.registrar)
        self.addCleanup(self.kl.close)  # before the plugin's finish (cleanups run LIFO)

    # -- fake API server

    def slice_devices(self):
        return {d["name"]: d for s in self.slices().values() for d in s["spec"]["devices"]}

    def wait_slice(self, pred, what, timeout=harness.TIMEOUT):
        end = time.monotonic() + timeout
        while True:
            devs = self.slice_devices()
            if pred(devs):
                return devs
            if time.monotonic() > end:
                raise AssertionError("slice never had %s: %s\n%s" % (
                    what, sorted(devs), self.failure_context()))
            time.sleep(0.05)

    def claim_gets(self):
        self.cmd("rc-delete sync sync")  # every request line so far is read
        return [line for line in self.srv.seen
                if line.startswith("req GET /apis/resource.k8s.io/v1/namespaces/")]

    # -- the plugin
    def dra_args(self, cdi=None):
        return ["--dra", "--node-name", NODE, "--kubeconfig", self.kubeconfig,
                "--kubelet-registrar-directory-path", self.registrar,
                "--kubelet-plugins-directory-path", self.plugins, "--cdi-root", cdi or self.cdi]

    def start_dra(self, extra=(), cdi=None, wrap=()):
        p = self.start_plugin(self.dra_args(cdi) + list(extra), extra_env=FAST_HEALTH, wrap=wrap)
        p.wait_log("ResourceSlices of node %s are up to date" % NODE)
        return p

    def restart_plugin(self, extra=()):
        self.plugin.signal(signal.SIGTERM)
        self.assertEqual(self.plugin.wait_exit(), 0, self.plugin.stderr.text()[-3000:])
        self.kl.close()
        return self.start_dra(extra)

    def spec_path(self, uid):
        return os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)

    def assertPrepared(self, res, o, devices, requests):
        uid = o["metadata"]["uid"]
        self.assertEqual(res[uid]["error"], "", res)
        self.assertEqual(res[uid]["devices"], [
            (NODE, dev, [req], ["%s=%s-%s" % (CDI_KIND, uid, dev)]) for dev, req in zip(devices, requests)])
        with open(self.spec_path(uid)) as f:
            spec = json.load(f)  # JSON is YAML; what the plugin writes is JSON
        self.assertEqual(cdi_errors(spec), [], spec)
        self.assertEqual(spec["kind"], CDI_KIND)
        self.assertEqual([d["name"] for d in spec["devices"]], ["%s-%s" % (uid, d) for d in devices])
        for d, dev in zip(spec["devices"], devices):
            self.assertEqual([n["path"] for n in d["containerEdits"]["deviceNodes"]],
                             ["/dev/nvidia" + dev.split("-")[1]])

    # ---------------------------------------------------------------------------------

    def test_lifecycle(self):
        self.start_kubelet()
        self.start_dra()
        info = self.kl.register()
        self.assertEqual((info.type, info.name), ("DRAPlugin", DRIVER))
        self.assertEqual(info.endpoint, os.path.join(self.plugins, DRIVER, "dra.sock"))
        self.assertEqual(list(info.supported_versions),
                         ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"])
        self.plugin.wait_log("registered with the kubelet")

        # The slice: one pool named after the node, gpu-<minor>, the Node as owner; the
        # fake server accepted it, so it passed the 1.34 validation.
        slices = self.slices()
        self.assertEqual(list(slices), [SLICE])
        s = slices[SLICE]
        self.assertEqual(s["metadata"]["ownerReferences"],
                         [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "uid-" + NODE,
                           "controller": True}])
        self.assertEqual((s["spec"]["driver"], s["spec"]["nodeName"]), (DRIVER, NODE))
        self.assertEqual(s["spec"]["pool"], {"name": NODE, "generation": 1, "resourceSliceCount": 1})
        self.assertEqual([d["name"] for d in s["spec"]["devices"]], ["gpu-%d" % i for i in range(8)])
        self.assertEqual([d["attributes"]["uuid"]["string"] for d in s["spec"]["devices"]], self.uuids)
        # Every GPU is DRA's: the device-plugin side registers nothing.
        self.plugin.wait_log("Every GPU is served through DRA")
        self.assertEqual(self.kubelet.count("register"), 0)

        # An empty call answers an empty map (NVIDIA's health probe relies on it).
        self.assertEqual(self.kl.prepare(), {})

        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        two = self.load(on_node(obj("resourceclaim-two-gpus-allocated")))
        res = self.kl.prepare(ref(one), ref(two))
        self.assertEqual(sorted(res), sorted([one["metadata"]["uid"], two["metadata"]["uid"]]))
        self.assertPrepared(res, one, ["gpu-1"], ["gpu"])
        self.assertPrepared(res, two, ["gpu-2", "gpu-3"], ["gpus", "gpus"])
        self.assertEqual(len(self.claim_gets()), 2)
        # The kubelet repeats it after its restarts: the same answer.
        self.assertEqual(self.kl.prepare(ref(one), ref(two)), res)

        # Plugin restart: the prepared claims are answered from the checkpoint, even with
        # the claims gone from the API.
        self.restart_plugin()
        self.kl.register()
        self.cmd("rc-delete default %s" % one["metadata"]["name"])
        self.cmd("rc-delete default %s" % two["metadata"]["name"])
        gets = len(self.claim_gets())
        self.assertEqual(self.kl.prepare(ref(one), ref(two)), res)
        self.assertEqual(len(self.claim_gets()), gets)

        # Threads, fds and RSS around the rest of the lifecycle.
        before = attacklib.Snapshot(self.plugin.pid)
        print("\nbefore: %s" % before)

        # The kubelet stand-in "restarts": its registration socket removed, the plugin
        # binds it again within milliseconds, and the kubelet registers again.
        log = self.plugin.stderr.mark()
        os.unlink(self.kl.reg_path)
        took = self.kl.wait_socket()  # a socket there now is a new one (inode numbers recur)
        self.plugin.wait_log("the kubelet registers us anew", log)
        print("registration socket back after %.1f ms" % (took * 1000))
        self.assertLess(took, 1.0)
        self.kl.close()
        self.kl.register()
        self.assertEqual(self.kl.prepare(ref(one), ref(two)), res)

        # Unprepare: specs gone; again, and a UID never prepared: success.
        never = ("default", "never", "aaaaaaaa-0000-0000-0000-0000000000ff")
        self.assertEqual(self.kl.unprepare(ref(one), ref(two)),
                         {one["metadata"]["uid"]: "", two["metadata"]["uid"]: ""})
        self.assertFalse(os.path.exists(self.spec_path(one["metadata"]["uid"])))
        self.assertEqual(os.listdir(self.cdi), [])
        self.assertEqual(self.kl.unprepare(ref(one), never),
                         {one["metadata"]["uid"]: "", never[2]: ""})

        # A second round on the same process, then the counts.
        three = self.load(on_node(obj("resourceclaim-two-gpus-allocated"),
                                  uid="aaaaaaaa-0000-0000-0000-000000000003", name="three"))
        self.assertPrepared(self.kl.prepare(ref(three)), three, ["gpu-2", "gpu-3"], ["gpus", "gpus"])
        self.assertEqual(self.kl.unprepare(ref(three)), {three["metadata"]["uid"]: ""})
        self.kl.close()
        self.kl.register()
        after = attacklib.settled(self.plugin.pid, before)
        print("after: %s" % after)
        attacklib.assert_flat(self, before, after, what="DRA lifecycle")
        # One slice write in all: the first publish. Claims, registrations and the restart
        # (the same devices, found in the watch's list) write nothing.
        self.slices()  # every request line so far is read
        self.assertEqual([line.split()[1] for line in self.srv.seen if SLICE_WRITE.search(line)],
                         ["POST"])

    def test_bad_input(self):
        self.start_dra()
        self.kl.register()
        good = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        mismatch = ("default", good["metadata"]["name"], "00000000-0000-0000-0000-000000000000")
        other_driver = on_node(obj("resourceclaim-two-gpus-allocated"), name="other-driver",
                               uid="aaaaaaaa-0000-0000-0000-000000000001")
        for r in other_driver["status"]["allocation"]["devices"]["results"]:
            r["driver"] = "other.example.com"
        self.load(other_driver)
        garbage = on_node(obj("resourceclaim-opaque-config-allocated"), name="garbage",
                          uid="aaaaaaaa-0000-0000-0000-000000000002")
        garbage["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"] = {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "colour": 7}
        self.load(garbage)
        other_pool = self.load(on_node(obj("resourceclaim-from-template-allocated"), name="other-pool",
                                       uid="aaaaaaaa-0000-0000-0000-000000000003", node="n2"))
        missing = ("default", "missing", "aaaaaaaa-0000-0000-0000-000000000004")
        res = self.kl.prepare(ref(good), mismatch, ref(other_driver), ref(garbage),
                              ref(other_pool), missing)
        self.assertEqual(len(res), 6)
        self.assertEqual(res[good["metadata"]["uid"]]["error"], "")
        want = {
            mismatch[2]: "claim got replaced: the API server has UID " + good["metadata"]["uid"],
            other_driver["metadata"]["uid"]: "no device of gpu.nvidia.com is allocated in pool n1",
            garbage["metadata"]["uid"]: 'invalid GpuConfig: strict decoding error: unknown field "colour"',
            other_pool["metadata"]["uid"]: "no device of gpu.nvidia.com is allocated in pool n1",
            missing[2]: "claim not found in the API server",
        }
        for uid, w in want.items():
            self.assertIn(w, res[uid]["error"], uid)
            self.assertEqual(res[uid]["devices"], [], uid)
        self.assertEqual(os.listdir(self.cdi), ["k8s.gpu.nvidia.com-claim_%s.yaml" % good["metadata"]["uid"]])

        # 10,000 claims in one call: refused whole (dra-service.h: more than any kubelet
        # sends), and the plugin still serves.
        many = [("default", "c%d" % i, "u-%d" % i) for i in range(10000)]
        with self.assertRaises(grpc.RpcError) as cm:
            self.kl.prepare(*many)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(cm.exception.details(), "10000 claims in one call, at most 256")
        with self.assertRaises(grpc.RpcError) as cm:
            self.kl.unprepare(*many)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(self.kl.prepare(ref(good))[good["metadata"]["uid"]]["error"], "")

    def test_cdi_root_not_writable(self):
        blocked = os.path.join(self.tmp, "not-a-dir")
        with open(blocked, "w") as f:
            f.write("x")
        self.start_dra(cdi=os.path.join(blocked, "cdi"))
        self.kl.register()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        res = self.kl.prepare(ref(one))
        self.assertIn("CDI spec k8s.gpu.nvidia.com-claim_%s.yaml" % one["metadata"]["uid"],
                      res[one["metadata"]["uid"]]["error"])
        self.assertEqual(res[one["metadata"]["uid"]]["devices"], [])
        # not recorded: a retry fails the same way, and unprepare is a success
        self.assertNotEqual(self.kl.prepare(ref(one))[one["metadata"]["uid"]]["error"], "")
        self.assertEqual(self.kl.unprepare(ref(one)), {one["metadata"]["uid"]: ""})

    def test_split_between_device_plugin_and_dra(self):
        self.start_kubelet()
        self.start_dra(["--dra-device-plugin-gpus", "0,1"])
        _, devs = self.kubelet.registered()
        dp = sorted(d["id"] for d in devs["devices"])
        self.assertEqual(dp, sorted(self.uuids[:2]))
        dra = self.slice_devices()
        self.assertEqual(sorted(dra), ["gpu-%d" % i for i in range(2, 8)])
        self.assertEqual(sorted(d["attributes"]["uuid"]["string"] for d in dra.values()),
                         sorted(self.uuids[2:]))
        self.assertFalse(set(dp) & {d["attributes"]["uuid"]["string"] for d in dra.values()})
        # A claim for a device-plugin GPU is not prepared through DRA.
        self.kl.register()
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))  # gpu-1
        err = self.kl.prepare(ref(one))[one["metadata"]["uid"]]["error"]
        self.assertIn("device gpu-1 is not a device of node n1", err)

    def test_slices_wiped_by_the_kubelet_come_back(self):
        self.start_dra()
        self.cmd("rs-delete all")  # the kubelet's wipe of this node's slices at its start
        devs = self.wait_slice(lambda d: len(d) == 8, "8 devices again")
        self.assertEqual(sorted(devs), ["gpu-%d" % i for i in range(8)])
        self.assertEqual([line.split()[1] for line in self.srv.seen if SLICE_WRITE.search(line)],
                         ["POST", "POST"])  # published, then restored
        self.plugin.wait_log("deleted by someone else")

    def _xid_round(self, tainted):
        self.kl.register()
        w = self.kl.watch_health()
        Kubelet.wait_health(w, lambda m: len(m) == 8 and set(m.values()) == {HEALTHY}, "8 healthy")
        start = len(w["msgs"])
        self.inject("xid %s 94" % self.uuids[3])  # contained ECC: recovers after the quiet period
        m = Kubelet.wait_health(w, lambda m: m.get((NODE, "gpu-3")) == UNHEALTHY, "gpu-3 UNHEALTHY",
                                start)
        self.assertEqual({k: v for k, v in m.items() if v != HEALTHY}, {(NODE, "gpu-3"): UNHEALTHY})
        if tainted:
            devs = self.wait_slice(lambda d: "taints" in d.get("gpu-3", {}), "gpu-3 tainted")
            self.assertEqual([(t["key"], t.get("value"), t["effect"]) for t in devs["gpu-3"]["taints"]],
                             [("gpu.nvidia.com/xid", "94", "NoSchedule")])
            self.assertEqual(len(devs), 8)
        else:
            devs = self.wait_slice(lambda d: "gpu-3" not in d, "gpu-3 withdrawn")
            self.assertEqual(sorted(devs), ["gpu-%d" % i for i in range(8) if i != 3])
        start = len(w["msgs"])
        Kubelet.wait_health(w, lambda m: m.get((NODE, "gpu-3")) == HEALTHY, "gpu-3 HEALTHY again",
                            start)
        devs = self.wait_slice(lambda d: len(d) == 8 and not any("taints" in v for v in d.values()),
                               "every device back, untainted")
        self.plugin.wait_log("is Healthy again")

    def test_xid_withdraws_from_the_slice_and_recovery_restores(self):
        self.start_dra()
        self._xid_round(tainted=False)

    def test_xid_taints_when_the_api_server_keeps_taints(self):
        self.cmd("rs-taints on")
        self.start_dra()
        self._xid_round(tainted=True)

    def test_gpu_kubelet_plugin_symlink_is_dra_only(self):
        link = os.path.join(self.tmp, "gpu-kubelet-plugin")
        os.symlink(harness.PLUGIN, link)
        self.start_kubelet()
        # the harness runs PLUGIN ARGS...: exec the symlink instead, with ARGS
        wrap = [sys.executable, "-c", "import os, sys; os.execv(sys.argv[1], sys.argv[1:2] + sys.argv[3:])",
                link]
        args = [a for a in self.dra_args() if a != "--dra"]
        p = self.start_plugin(args, extra_env=FAST_HEALTH, wrap=wrap)
        p.wait_log("ResourceSlices of node %s are up to date" % NODE)
        info = self.kl.register()
        self.assertEqual((info.type, info.name), ("DRAPlugin", DRIVER))
        self.assertEqual(len(self.slice_devices()), 8)
        one = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        self.assertPrepared(self.kl.prepare(ref(one)), one, ["gpu-1"], ["gpu"])
        # No device-plugin side at all: nothing registered, no socket in its directory.
        self.assertEqual(self.kubelet.count("register"), 0)
        self.assertEqual(sorted(os.listdir(self.dp)), ["kubelet.sock"])

    def test_timeslicing_applied(self):
        """A claim's TimeSlicing config applied (src/dra/dra-sharing.c): compute mode
        DEFAULT through NVML (the simulator's settings log) and nvidia-smi compute-policy
        from --driver-root-ctr-path (a recording stand-in); a failing tool is that claim's
        error and leaves no spec. Unprepare puts the GPU back: compute mode DEFAULT and
        time slice 0 (Default), before the spec goes; a claim without a config runs
        nothing; a failing tool fails the unprepare and a retry resets; an unprepare the
        kubelet cancels kills the tool and leaves the claim to its retry."""
        root = os.path.join(self.tmp, "driver-root")
        os.makedirs(os.path.join(root, "usr", "bin"))
        smi = os.path.join(root, "usr", "bin", "nvidia-smi")
        calls, settings = os.path.join(self.tmp, "smi-calls"), os.path.join(self.tmp, "settings")
        with open(smi, "w") as f:
            f.write('#!/bin/sh\n[ -e "$0.fail" ] && { echo Insufficient Permissions; exit 4; }\n'
                    '[ -e "$0.hang" ] && { echo $$ > "$0.pid"; exec sleep 60; }\n'
                    'echo "$*" >> "%s"\n' % calls)
        os.chmod(smi, 0o755)

        def read(path):
            with open(path) as f:
                return f.read()

        p = self.start_plugin(self.dra_args() + ["--driver-root-ctr-path", root],
                              extra_env=dict(FAST_HEALTH, MOCK_NVML_SETTINGS_LOG=settings))
        p.wait_log("ResourceSlices of node %s are up to date" % NODE)
        self.kl.register()
        # class config Medium, then the claim's Long: the last wins
        o = self.load(on_node(obj("resourceclaim-opaque-config-allocated")))
        uid = o["metadata"]["uid"]
        res = self.kl.prepare(ref(o))
        self.assertEqual(res[uid]["error"], "", res)
        minor = int(res[uid]["devices"][0][1].split("-")[1])
        uuid = next(g["uuid"] for g in harness.load_profile("a100") if g["index"] == minor)
        set_long = "compute-policy -i %s --set-timeslice 3\n" % uuid
        set_default = "compute-policy -i %s --set-timeslice 0\n" % uuid
        mode_default = "nvmlDeviceSetComputeMode %s 0\n" % uuid
        self.assertEqual(read(calls), set_long)
        self.assertEqual(read(settings), mode_default)
        # A claim without a sharing config: nothing run or set on its unprepare.
        plain = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        self.assertEqual(self.kl.prepare(ref(plain))[plain["metadata"]["uid"]]["error"], "")
        self.assertEqual(self.kl.unprepare(ref(plain)), {plain["metadata"]["uid"]: ""})
        self.assertEqual(read(calls), set_long)
        self.assertEqual(read(settings), mode_default)
        # The claim's: compute mode DEFAULT again, time slice 0.
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
        self.assertEqual(read(calls), set_long + set_default)
        self.assertEqual(read(settings), mode_default * 2)
        self.assertFalse(os.path.exists(self.spec_path(uid)))

        open(smi + ".fail", "w").close()
        res = self.kl.prepare(ref(o))
        self.assertIn("applying TimeSlicing to gpu-%d: setting the time slice of %s to Long: %s "
                      "failed (exit status 4): Insufficient Permissions" % (minor, uuid, smi),
                      res[uid]["error"])
        self.assertEqual(res[uid]["devices"], [])
        self.assertEqual(os.listdir(self.cdi), [])
        os.unlink(smi + ".fail")
        self.assertEqual(self.kl.prepare(ref(o))[uid]["error"], "")

        # The tool fails on unprepare: that claim's error, the claim kept (spec and record)
        # for the kubelet's retry, which resets once the tool works.
        open(smi + ".fail", "w").close()
        res = self.kl.unprepare(ref(o))
        self.assertEqual(res[uid].rstrip(),  # the tool's output, its newline a space
                         "error unpreparing devices for claim default/shared-gpu:%s: resetting "
                         "TimeSlicing on gpu-%d: setting the time slice of %s to Default: %s failed "
                         "(exit status 4): Insufficient Permissions" % (uid, minor, uuid, smi))
        self.assertTrue(os.path.exists(self.spec_path(uid)))
        os.unlink(smi + ".fail")
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
        self.assertEqual(read(calls), set_long + set_default + set_long + set_default)
        self.assertFalse(os.path.exists(self.spec_path(uid)))

        # The kubelet cancels an unprepare (its deadline) while the tool hangs: the tool is
        # killed, the claim kept; its retry resets.
        self.assertEqual(self.kl.prepare(ref(o))[uid]["error"], "")
        open(smi + ".hang", "w").close()
        with self.assertRaises(grpc.RpcError) as cm:
            self.kl.unprepare(ref(o), timeout=1)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        pid = int(read(smi + ".pid"))
        deadline = time.monotonic() + harness.TIMEOUT
        while os.path.exists("/proc/%d" % pid):
            self.assertLess(time.monotonic(), deadline, "the cancelled nvidia-smi lives on")
            time.sleep(0.01)
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            self.assertEqual(f.read().split(), [])
        self.assertTrue(os.path.exists(self.spec_path(uid)))
        os.unlink(smi + ".hang")
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
        self.assertTrue(read(calls).endswith(set_long + set_default))
        self.assertEqual(os.listdir(self.cdi), [])


    def test_timeslicing_tool_runs_off_the_loop(self):
        """nvidia-smi taking 2 s (a stand-in) stalls only its own claim: another claim's
        Prepare and a registration's GetInfo are answered meanwhile; the tool is reaped
        (no zombie, fds and threads as before); one that hangs is killed at the real
        default of 10 s with the claim's timeout error; a plugin stopped while it runs
        kills it."""
        root = os.path.join(self.tmp, "driver-root")
        os.makedirs(os.path.join(root, "usr", "bin"))
        smi = os.path.join(root, "usr", "bin", "nvidia-smi")
        calls = os.path.join(self.tmp, "smi-calls")
        with open(smi, "w") as f:
            f.write('#!/bin/sh\necho "$$ $*" >> "%s"\n[ -e "$0.hang" ] && exec sleep 60\n'
                    'exec sleep 2\n' % calls)
        os.chmod(smi, 0o755)
        p = self.start_plugin(self.dra_args() + ["--driver-root-ctr-path", root], extra_env=FAST_HEALTH)
        p.wait_log("ResourceSlices of node %s are up to date" % NODE)
        self.kl.register()
        slow = self.load(on_node(obj("resourceclaim-opaque-config-allocated")))
        other = self.load(on_node(obj("resourceclaim-from-template-allocated")))
        uid = slow["metadata"]["uid"]

        def tool_runs(n):
            deadline = time.monotonic() + harness.TIMEOUT
            while time.monotonic() < deadline:
                if os.path.exists(calls):
                    with open(calls) as f:
                        lines = f.read().splitlines()
                    if len(lines) >= n:
                        return int(lines[n - 1].split()[0])
                time.sleep(0.005)
            raise AssertionError("nvidia-smi was not run %d times" % n)

        def prepare_in_background(box):
            def go():
                try:
                    box["res"] = self.kl.prepare(ref(slow))
                except grpc.RpcError as e:
                    box["err"] = e.code()
            th = threading.Thread(target=go, daemon=True)
            th.start()
            return th

        before = attacklib.Snapshot(p.pid)
        box = {}
        t0 = time.monotonic()
        th = prepare_in_background(box)
        tool_runs(1)
        t = time.monotonic()
        self.assertPrepared(self.kl.prepare(ref(other)), other, ["gpu-1"], ["gpu"])
        self.assertEqual(self.kl.register().name, DRIVER)
        took = time.monotonic() - t
        print("\nanswered in %.1f ms while nvidia-smi ran" % (took * 1000))
        self.assertLess(took, 0.2)
        th.join(harness.TIMEOUT)
        self.assertGreaterEqual(time.monotonic() - t0, 2.0)
        self.assertEqual(box["res"][uid]["error"], "", box)
        dev = box["res"][uid]["devices"][0][1]
        uuid = next(g["uuid"] for g in harness.load_profile("a100") if "gpu-%d" % g["index"] == dev)
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            self.assertEqual(f.read().split(), [], "a child of the plugin is left (a zombie?)")
        self.kl.close()
        self.kl.register()
        attacklib.assert_flat(self, before, attacklib.settled(p.pid, before), what="nvidia-smi run")

        # Unprepared (the tool run again: time slice 0, 2 s). Hanging: killed at 10 s, the
        # claim's error says so, nothing of it is left.
        self.assertEqual(self.kl.unprepare(ref(slow)), {uid: ""})
        tool_runs(2)
        with open(calls) as f:
            self.assertTrue(f.read().splitlines()[1].endswith("--set-timeslice 0"))
        open(smi + ".hang", "w").close()
        t = time.monotonic()
        res = self.kl.prepare(ref(slow))
        self.assertGreaterEqual(time.monotonic() - t, 10.0)
        self.assertIn("applying TimeSlicing to %s: setting the time slice of %s to Long: %s did "
                      "not finish within 10000 ms" % (dev, uuid, smi), res[uid]["error"])
        self.assertFalse(os.path.exists("/proc/%d" % tool_runs(3)), "the hung nvidia-smi lives on")
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            self.assertEqual(f.read().split(), [])
        self.assertFalse(os.path.exists(self.spec_path(uid)))

        # Stopped while the tool runs: the plugin exits at once and the tool is gone.
        box = {}
        th = prepare_in_background(box)
        pid = tool_runs(4)
        t = time.monotonic()
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_exit(), 0, p.stderr.text()[-3000:])
        self.assertLess(time.monotonic() - t, 1.5)
        self.assertFalse(os.path.exists("/proc/%d" % pid), "nvidia-smi outlived the plugin")
        th.join(harness.TIMEOUT)

if __name__ == "__main__":
    FAKE = sys.argv.pop(1)
    harness.main()
