"""The claim preparer (src/dra/dra-claims.c) through dra-claims-probe, on the real API
client, against the fake API server serving the real 1.34 ResourceClaim objects
(tests/data/dra/objects) and edits of them: prepare and its CDI spec, idempotent
re-prepare without a GET, restart with the checkpoint, another boot, unprepare (also of a
UID never prepared), UID mismatch, missing claim, server error, another node's pool,
unknown device, a device held by another claim, opaque config, MPS, a CDI root that is
not writable, 10,000 claims in one call; on unprepare, the GPU of a sharing config reset
(through the probe's reset_config) before the record goes, a failed reset failing the
unprepare until a retry, a GPU two claims share reset by the last, a cancelled unprepare
or a freed engine stopping the reset.

usage: test_dra_claims.py <dra-claims-probe> <fake-apiserver>"""
import copy
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kube"))
import kubetest as kt  # noqa: E402

PROBE = FAKE = None
OBJECTS = os.path.join(os.environ.get("GDP_TEST_DATA", ""), "dra", "objects")
CDI_KIND = "k8s.gpu.nvidia.com/claim"


def obj(name):
    with open(os.path.join(OBJECTS, name + ".json")) as f:
        return json.load(f)


def ref(o):
    md = o["metadata"]
    return "%s/%s/%s" % (md["namespace"], md["name"], md["uid"])


class Claims(unittest.TestCase):
    def setUp(self):
        self.dir = kt.scratch.mkdtemp("dra-claims-")
        self.addCleanup(kt.scratch.remove, self.dir)  # after tearDown stopped the children
        self.srv = kt.LineProc([FAKE, self.dir])
        self.srv.expect(r"^h2c (\d+)$")
        port = int(self.srv.expect(r"^listening (\d+)$").group(1))
        token = os.path.join(self.dir, "token")
        with open(token, "w") as f:
            f.write("tok1\n")
        self.kubeconfig = kt.write_kubeconfig(os.path.join(self.dir, "kubeconfig"),
                                              "https://127.0.0.1:%d" % port,
                                              ca=os.path.join(self.dir, "ca.crt"), token_file=token)
        self.cdi = os.path.join(self.dir, "cdi")
        self.plugin = os.path.join(self.dir, "plugins", "gpu.nvidia.com")
        self.boot = os.path.join(self.dir, "boot_id")
        self.set_boot("11111111-2222-3333-4444-555555555555")
        self.probes = []
        self.n = 0
        self.p = self.start()

    def tearDown(self):
        codes = [p.stop() for p in self.probes]
        self.srv.stop()
        self.assertEqual(codes, [0] * len(codes), [p.errlines[-5:] for p in self.probes])

    def set_boot(self, bid):
        with open(self.boot, "w") as f:
            f.write(bid + "\n")

    def start(self, cdi=None):
        p = kt.LineProc([PROBE, "--kubeconfig", self.kubeconfig, "--cdi-root", cdi or self.cdi,
                         "--plugin-dir", self.plugin, "--boot-id-file", self.boot])
        p.expect(r"^ready$")
        self.probes.append(p)
        return p

    def restart(self, **kw):
        self.assertEqual(self.p.stop(), 0, self.p.errlines[-5:])
        self.probes.remove(self.p)
        self.p = self.start(**kw)

    def cmd(self, line):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0])

    def load(self, o):
        self.cmd("rc-json " + json.dumps(o, separators=(",", ":")))
        return o

    def call(self, verb, *refs):
        self.n += 1
        self.p.send("%s c%d %s" % (verb, self.n, " ".join(refs)))
        return json.loads(self.p.expect(r"^done c%d (.*)$" % self.n).group(1))

    def prepare(self, *refs):
        return self.call("prepare", *refs)

    def gets(self):
        """GETs of claims the server saw since the last call of this."""
        self.cmd("rc-delete sync sync")  # the server's lines up to here are read
        seen = [line for line in self.srv.seen
                if line.startswith("req GET /apis/resource.k8s.io/v1/")]
        new = seen[getattr(self, "_gets", 0):]
        self._gets = len(seen)
        return new

    def spec(self, uid):
        with open(os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)) as f:
            return json.load(f)  # JSON is YAML

    def checkpoint(self):
        """The checkpoint; never written yet (nothing was ever recorded) reads as empty."""
        path = os.path.join(self.plugin, "checkpoint.json")
        if not os.path.exists(path):
            return {"preparedClaims": {}}
        with open(path) as f:
            return json.load(f)

    def error(self, res):
        self.assertEqual(len(res), 1)
        self.assertEqual(res[0]["devices"], [])
        return res[0].get("error", "")

    # ---- prepare ------------------------------------------------------------------------

    def test_prepare_writes_spec_and_checkpoint_then_unprepare_removes_them(self):
        o = self.load(obj("resourceclaim-from-template-allocated"))
        uid = o["metadata"]["uid"]
        res = self.prepare(ref(o))
        self.assertEqual(res, [{"uid": uid, "devices": [{
            "requests": ["gpu"], "pool": "gpu-node-1", "device": "gpu-1",
            "cdi": ["%s=%s-gpu-1" % (CDI_KIND, uid)]}]}])
        spec = self.spec(uid)
        self.assertEqual(spec["kind"], CDI_KIND)
        self.assertEqual([d["name"] for d in spec["devices"]], [uid + "-gpu-1"])
        self.assertEqual(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia1")
        self.assertIn("NVIDIA_VISIBLE_DEVICES=void", spec["containerEdits"]["env"])
        ck = self.checkpoint()
        self.assertEqual(ck["preparedClaims"][uid]["checkpointState"], "PrepareCompleted")
        self.assertEqual(ck["nodeBootID"], "11111111-2222-3333-4444-555555555555")
        self.assertEqual(len(self.gets()), 1)

        # The kubelet repeats it: the recorded answer, no GET.
        self.assertEqual(self.prepare(ref(o)), res)
        self.assertEqual(self.gets(), [])

        self.assertEqual(self.call("unprepare", ref(o)), [{"uid": uid, "devices": []}])
        self.assertFalse(os.path.exists(os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)))
        self.assertEqual(self.checkpoint()["preparedClaims"], {})
        # Again, and a UID never prepared: success.
        self.assertEqual(self.call("unprepare", ref(o), "default/x/never-seen-uid"),
                         [{"uid": uid, "devices": []}, {"uid": "never-seen-uid", "devices": []}])
        self.assertEqual(self.gets(), [])

    def test_real_objects(self):
        two = self.load(obj("resourceclaim-two-gpus-allocated"))
        prio = self.load(obj("resourceclaim-prioritized-list-allocated"))
        ext = self.load(obj("resourceclaim-extended-resource-allocated"))
        ts = self.load(obj("resourceclaim-opaque-config-allocated"))
        res = self.prepare(ref(two), ref(prio), ref(ext), ref(ts))
        self.assertEqual([r.get("error") for r in res], [None] * 4, res)
        self.assertEqual([d["device"] for d in res[0]["devices"]], ["gpu-2", "gpu-3"])
        self.assertEqual(res[1]["devices"][0]["requests"], ["gpus"])  # not "gpus/small"
        self.assertEqual(res[2]["devices"][0]["requests"], ["container-0-request-0"])
        dev = self.checkpoint()["preparedClaims"][ts["metadata"]["uid"]]["devices"][0]
        self.assertEqual((dev["sharing"], dev["interval"]), ("TimeSlicing", "Long"))
        # Applied once, to that claim's GPU only; not again on a repeat.
        self.p.expect(r"^applied 0 TimeSlicing Long$")
        self.prepare(ref(ts))
        self.p.send("count")
        self.p.expect(r"^count 4$")
        self.assertEqual([line for line in self.p.seen if line.startswith("applied")],
                         ["applied 0 TimeSlicing Long"])
        self.assertEqual(len(self.spec(two["metadata"]["uid"])["devices"]), 2)

    def test_restart_keeps_prepared_claims_and_another_boot_forgets_them(self):
        o = self.load(obj("resourceclaim-two-gpus-allocated"))
        first = self.prepare(ref(o))
        self.gets()
        self.restart()
        self.assertEqual(self.prepare(ref(o)), first)
        self.assertEqual(self.gets(), [])
        self.p.send("count")
        self.p.expect(r"^count 1$")

        self.set_boot("99999999-2222-3333-4444-555555555555")
        self.restart()
        self.p.stderr_has(r"is of another boot .*: its 1 claims are forgotten")
        self.p.send("count")
        self.p.expect(r"^count 0$")
        self.assertEqual(self.prepare(ref(o)), first)
        self.assertEqual(len(self.gets()), 1)

    def test_corrupt_checkpoint_is_moved_aside(self):
        os.makedirs(self.plugin, exist_ok=True)
        with open(os.path.join(self.plugin, "checkpoint.json"), "w") as f:
            f.write("{not json")
        self.restart()
        line = self.p.stderr_has(r"checkpoint .*checkpoint.json is not JSON: moved to ")
        self.assertTrue(line.startswith("W"), line)  # one warning: the start goes on
        with open(os.path.join(self.plugin, "checkpoint.json.corrupt")) as f:
            self.assertEqual(f.read(), "{not json")
        o = self.load(obj("resourceclaim-from-template-allocated"))
        self.assertNotIn("error", self.prepare(ref(o))[0])

    # ---- per-claim errors ---------------------------------------------------------------

    def test_claim_errors_are_per_claim(self):
        good = self.load(obj("resourceclaim-from-template-allocated"))
        replaced = obj("resourceclaim-two-gpus-allocated")
        asked = "default/two-gpus/00000000-0000-0000-0000-000000000000"
        self.load(replaced)
        pending = self.load(obj("resourceclaim-two-gpus-pending"))
        pending["metadata"]["name"] = "pending"
        self.load(pending)
        other = copy.deepcopy(good)
        other["metadata"].update(name="other-node", uid="aaaaaaaa-0000-0000-0000-000000000001")
        for r in other["status"]["allocation"]["devices"]["results"]:
            r["pool"] = "gpu-node-2"
        self.load(other)
        unknown = copy.deepcopy(good)
        unknown["metadata"].update(name="unknown-dev", uid="aaaaaaaa-0000-0000-0000-000000000002")
        unknown["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-9"
        self.load(unknown)
        mps = copy.deepcopy(obj("resourceclaim-opaque-config-allocated"))
        mps["metadata"].update(name="mps", uid="aaaaaaaa-0000-0000-0000-000000000003")
        mps["status"]["allocation"]["devices"]["config"][1]["opaque"]["parameters"]["sharing"] = {
            "strategy": "MPS", "timeSlicingConfig": {}}
        self.load(mps)
        garbage = copy.deepcopy(mps)
        garbage["metadata"].update(name="garbage", uid="aaaaaaaa-0000-0000-0000-000000000004")
        garbage["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["colour"] = "red"
        self.load(garbage)
        self.cmd("rc-json " + json.dumps(dict(good, metadata=dict(good["metadata"], name="failing")),
                                         separators=(",", ":")))
        self.cmd("rc-fail default failing 500")

        res = self.prepare(ref(good), asked, "default/pending/" + pending["metadata"]["uid"],
                           "default/missing/aaaaaaaa-0000-0000-0000-00000000000f", ref(other),
                           ref(unknown), ref(mps), ref(garbage),
                           "default/failing/aaaaaaaa-0000-0000-0000-00000000000e",
                           "default/bad/../../etc")
        errs = [r.get("error") for r in res]
        self.assertIsNone(errs[0])
        want = [
            "error preparing devices for claim default/two-gpus:00000000-0000-0000-0000-000000000000: "
            "claim got replaced: the API server has UID 2c9c529b-4ff7-4c93-b216-8506d026d54a",
            "claim default/pending is not allocated",
            "claim default/missing:aaaaaaaa-0000-0000-0000-00000000000f: claim not found in the API server",
            "no device of gpu.nvidia.com is allocated in pool gpu-node-1 (allocated to another node?)",
            "device gpu-9 is not a device of node gpu-node-1",
            "claim default/mps: invalid GpuConfig: cannot use TimeSlicingConfig with the 'MPS' strategy",
            "claim default/garbage: invalid GpuConfig: strict decoding error: unknown field \"colour\"",
            "getting the claim: HTTP 500: resourceclaims \"failing\" failed on command",
            "error preparing devices for claim ../../etc: not a claim UID",
        ]
        self.assertEqual(len(errs), 10)
        for got, w in zip(errs[1:], want):
            self.assertIn(w, got or "")
        for r in res[1:]:
            self.assertEqual(r["devices"], [])
        # Nothing of the failed ones was recorded or written.
        self.assertEqual(list(self.checkpoint()["preparedClaims"]), [good["metadata"]["uid"]])
        self.assertEqual(os.listdir(self.cdi), ["k8s.gpu.nvidia.com-claim_%s.yaml" % good["metadata"]["uid"]])

    def test_device_of_another_claim_is_refused(self):
        a = self.load(obj("resourceclaim-two-gpus-allocated"))
        b = copy.deepcopy(obj("resourceclaim-from-template-allocated"))
        b["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-3"
        self.load(b)
        self.assertNotIn("error", self.prepare(ref(a))[0])
        err = self.error(self.prepare(ref(b)))
        self.assertIn("device gpu-3 is already prepared for claim default/two-gpus:%s" %
                      a["metadata"]["uid"], err)
        # Once the first is unprepared, the second gets it.
        self.call("unprepare", ref(a))
        self.assertNotIn("error", self.prepare(ref(b))[0])

    def test_failed_config_apply_fails_the_claim(self):
        o = copy.deepcopy(obj("resourceclaim-opaque-config-allocated"))
        o["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-7"
        self.load(o)
        err = self.error(self.prepare(ref(o)))
        self.assertIn("applying TimeSlicing to gpu-7: simulated failure on GPU GPU-00000007", err)
        self.assertEqual(self.checkpoint()["preparedClaims"], {})  # nothing recorded
        self.assertEqual(os.listdir(self.cdi) if os.path.exists(self.cdi) else [], [])

    def test_failed_config_apply_later_fails_the_claim(self):
        o = copy.deepcopy(obj("resourceclaim-opaque-config-allocated"))
        o["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-6"
        self.load(o)
        err = self.error(self.prepare(ref(o)))
        self.assertIn("applying TimeSlicing to gpu-6: simulated failure later on GPU GPU-00000006", err)
        self.assertEqual(self.checkpoint()["preparedClaims"], {})  # rolled back
        self.assertEqual(os.listdir(self.cdi) if os.path.exists(self.cdi) else [], [])

    def slow_claim(self):
        """A claim whose sharing config takes 1 s to apply (the probe's minor 5), prepared
        as call "s"; returned once it is being applied."""
        o = copy.deepcopy(obj("resourceclaim-opaque-config-allocated"))
        o["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-5"
        self.load(o)
        self.p.send("prepare s " + ref(o))
        self.p.expect(r"^applied 5 TimeSlicing Long$")
        return o

    def test_slow_config_apply_waits_on_the_loop(self):
        t = time.monotonic()
        slow = self.slow_claim()
        uid = slow["metadata"]["uid"]
        # Meanwhile: another claim is prepared, ...
        other = self.load(obj("resourceclaim-from-template-allocated"))
        self.assertNotIn("error", self.prepare(ref(other))[0])
        self.assertLess(time.monotonic() - t, 0.8)
        # ... a claim wanting its device is refused, as for a prepared claim, ...
        thief = copy.deepcopy(obj("resourceclaim-two-gpus-allocated"))
        thief["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-5"
        self.load(thief)
        self.assertIn("device gpu-5 is already prepared for claim default/shared-gpu:" + uid,
                      self.error(self.prepare(ref(thief))))
        # ... and another prepare of it is refused (the kubelet retries).
        self.assertIn("its sharing configs are being applied by another prepare call",
                      self.error(self.prepare(ref(slow))))
        self.assertLess(time.monotonic() - t, 0.8)
        self.assertEqual(self.checkpoint()["preparedClaims"][uid]["checkpointState"], "PrepareStarted")
        res = json.loads(self.p.expect(r"^done s (.*)$").group(1))
        self.assertGreaterEqual(time.monotonic() - t, 1.0)
        self.assertNotIn("error", res[0])
        self.assertEqual([d["device"] for d in res[0]["devices"]], ["gpu-5"])
        self.assertEqual(self.checkpoint()["preparedClaims"][uid]["checkpointState"], "PrepareCompleted")
        self.assertEqual(len(self.spec(uid)["devices"]), 1)
        # The specs, written into the files staged while their GETs were in flight; no
        # temporary file left.
        self.assertEqual(sorted(os.listdir(self.cdi)), sorted(
            "k8s.gpu.nvidia.com-claim_%s.yaml" % o["metadata"]["uid"] for o in (slow, other)))

    def test_spec_file_staged_while_the_get_waits(self):
        o = self.load(obj("resourceclaim-from-template-allocated"))
        uid = o["metadata"]["uid"]
        fds = os.path.join("/proc", str(self.p.p.pid), "fd")
        self.assertNotIn("error", self.prepare(ref(self.load(obj("resourceclaim-two-gpus-allocated"))))[0])
        before = len(os.listdir(fds))  # connected to the API server, nothing staged
        self.cmd("stop")  # the GET waits: no server
        self.p.send("prepare w " + ref(o))
        staged = ".k8s.gpu.nvidia.com-claim_%s.yaml." % uid
        deadline = time.monotonic() + 5
        while not (os.path.isdir(self.cdi) and any(f.startswith(staged) for f in os.listdir(self.cdi))):
            self.assertLess(time.monotonic(), deadline, "no spec file staged during the GET")
            time.sleep(0.01)
        # The kubelet gives up on the call: the staged file goes, nothing else was written.
        self.p.send("cancel-later w")
        self.p.expect(r"^cancelled w$")
        self.assertEqual(len([f for f in os.listdir(self.cdi) if f.startswith(".")]), 0)
        # Bounded: 16 files open at most (DRA_CLAIMS_STAGED_MAX), over two calls of 10.
        many = []
        for i in range(20):
            m = copy.deepcopy(o)
            m["metadata"].update(name="many-%d" % i, uid="aaaaaaaa-0000-0000-0000-%012d" % (100 + i))
            many.append(ref(m))
        self.p.send("prepare m1 " + " ".join(many[:10]))
        self.p.send("prepare m2 " + " ".join(many[10:]))
        staged = lambda: [f for f in os.listdir(self.cdi) if f.startswith(".")]  # noqa: E731
        while len(staged()) < 16:
            self.assertLess(time.monotonic(), deadline + 5, "not staged: %s" % staged())
            time.sleep(0.01)
        time.sleep(0.2)
        self.assertEqual(len(staged()), 16)
        for c in ("m1", "m2"):
            self.p.send("cancel-later " + c)
            self.p.expect(r"^cancelled %s$" % c)
        self.assertEqual(len([f for f in os.listdir(self.cdi) if f.startswith(".")]), 0)
        self.assertEqual(list(self.checkpoint()["preparedClaims"]),
                         [obj("resourceclaim-two-gpus-allocated")["metadata"]["uid"]])
        # A GET that fails: its staged file goes too.
        self.cmd("start")
        self.cmd("rc-fail default %s 500" % o["metadata"]["name"])
        self.assertIn("HTTP 500", self.error(self.prepare(ref(o))))
        self.assertEqual(sorted(os.listdir(self.cdi)), ["k8s.gpu.nvidia.com-claim_%s.yaml" % (
            obj("resourceclaim-two-gpus-allocated")["metadata"]["uid"])])
        self.assertEqual(len(os.listdir(fds)), before)  # every staged file's fd closed

    def test_unprepare_while_config_applies(self):
        slow = self.slow_claim()
        uid = slow["metadata"]["uid"]
        self.assertEqual(self.call("unprepare", ref(slow)), [{"uid": uid, "devices": []}])
        self.p.expect(r"^apply-cancelled 5$")
        # What the stopped apply may have set is reset, as for any claim.
        self.p.expect(r"^reset 5 TimeSlicing$")
        err = self.error(json.loads(self.p.expect(r"^done s (.*)$").group(1)))
        self.assertEqual(err, "error preparing devices for claim default/shared-gpu:%s: unprepared "
                              "while its sharing configs were being applied" % uid)
        self.assertEqual(self.checkpoint()["preparedClaims"], {})
        self.assertEqual(os.listdir(self.cdi) if os.path.exists(self.cdi) else [], [])

    def test_cancelled_call_stops_the_apply(self):
        slow = self.slow_claim()
        uid = slow["metadata"]["uid"]
        self.p.send("cancel-later s")
        self.p.expect(r"^apply-cancelled 5$")
        self.p.expect(r"^cancelled s$")
        self.assertEqual(os.listdir(self.cdi), [])  # its staged spec file went with the call
        # As after a crash: PrepareStarted stays, the kubelet's next prepare finishes it.
        self.assertEqual(self.checkpoint()["preparedClaims"][uid]["checkpointState"], "PrepareStarted")
        time.sleep(1.2)
        self.assertNotIn("done s", " ".join(self.p.seen))
        res = self.prepare(ref(slow))
        self.assertNotIn("error", res[0])
        self.assertEqual(self.checkpoint()["preparedClaims"][uid]["checkpointState"], "PrepareCompleted")

    # ---- unprepare: the GPU put back -----------------------------------------------------

    def timesliced(self, device, name=None, uid=None, admin=False):
        o = copy.deepcopy(obj("resourceclaim-opaque-config-allocated"))
        if name:
            o["metadata"].update(name=name, uid=uid)
        res = o["status"]["allocation"]["devices"]["results"][0]
        res["device"] = device
        if admin:
            res["adminAccess"] = True
        return self.load(o)

    def lines(self, prefix):
        self.p.send("count")  # every line up to here is read
        self.p.expect(r"^count \d+$")
        return [line for line in self.p.seen if line.startswith(prefix)]

    def test_unprepare_resets_the_gpu_before_the_record_goes(self):
        ts = self.timesliced("gpu-5")
        plain = self.load(obj("resourceclaim-from-template-allocated"))
        self.assertEqual([r.get("error") for r in self.prepare(ref(ts), ref(plain))], [None, None])
        uid = ts["metadata"]["uid"]
        # A claim without a sharing config: nothing reset.
        self.assertEqual(self.call("unprepare", ref(plain)), [{"uid": plain["metadata"]["uid"], "devices": []}])
        self.assertEqual(self.lines("reset"), [])
        # With one: reset first (1 s on minor 5), its spec and record still there meanwhile.
        self.p.send("unprepare u " + ref(ts))
        self.p.expect(r"^reset 5 TimeSlicing$")
        self.assertIn(uid, self.checkpoint()["preparedClaims"])
        self.assertEqual(len(self.spec(uid)["devices"]), 1)
        res = json.loads(self.p.expect(r"^done u (.*)$").group(1))
        self.assertEqual(res, [{"uid": uid, "devices": []}])
        self.assertEqual(self.checkpoint()["preparedClaims"], {})
        self.assertEqual(os.listdir(self.cdi), [])
        # Again: not recorded, nothing reset.
        self.assertEqual(self.call("unprepare", ref(ts)), [{"uid": uid, "devices": []}])
        self.assertEqual(self.lines("reset"), ["reset 5 TimeSlicing"])

    def test_failed_reset_fails_the_unprepare_until_a_retry_resets(self):
        ts = self.timesliced("gpu-0")
        uid = ts["metadata"]["uid"]
        self.assertNotIn("error", self.prepare(ref(ts))[0])
        self.p.send("fail-reset 0")
        self.p.expect(r"^ok fail-reset$")
        self.assertEqual(self.error(self.call("unprepare", ref(ts))),
                         "error unpreparing devices for claim default/shared-gpu:%s: resetting "
                         "TimeSlicing on gpu-0: simulated failure later on GPU GPU-00000000-0000-"
                         "0000-0000-000000000000" % uid)
        # Still recorded, with its spec: the kubelet's retry resets again.
        self.assertEqual(self.checkpoint()["preparedClaims"][uid]["checkpointState"], "PrepareCompleted")
        self.assertEqual(len(self.spec(uid)["devices"]), 1)
        self.p.send("fail-reset -1")
        self.p.expect(r"^ok fail-reset$")
        self.assertEqual(self.call("unprepare", ref(ts)), [{"uid": uid, "devices": []}])
        self.assertEqual(self.lines("reset"), ["reset 0 TimeSlicing"] * 2)
        self.assertEqual(self.checkpoint()["preparedClaims"], {})

    def test_shared_gpu_is_reset_by_the_last_claim(self):
        a = self.timesliced("gpu-0", admin=True)
        b = self.timesliced("gpu-0", "shared-b", "aaaaaaaa-0000-0000-0000-0000000000b0", admin=True)
        self.assertEqual([r.get("error") for r in self.prepare(ref(a), ref(b))], [None, None])
        self.assertEqual(self.lines("applied"), ["applied 0 TimeSlicing Long"] * 2)
        # b still holds gpu-0 with its setting: not reset.
        self.assertEqual(self.call("unprepare", ref(a)), [{"uid": a["metadata"]["uid"], "devices": []}])
        self.assertEqual(self.lines("reset"), [])
        self.assertEqual(self.call("unprepare", ref(b)), [{"uid": b["metadata"]["uid"], "devices": []}])
        self.assertEqual(self.lines("reset"), ["reset 0 TimeSlicing"])

    def test_cancelled_unprepare_stops_the_reset(self):
        ts = self.timesliced("gpu-5")
        uid = ts["metadata"]["uid"]
        self.assertNotIn("error", self.prepare(ref(ts))[0])
        self.p.send("unprepare u " + ref(ts))
        self.p.expect(r"^reset 5 TimeSlicing$")
        # Meanwhile another prepare or unprepare of it, and a claim with a sharing config for
        # its device, are refused (the kubelet retries).
        self.assertIn("it is being unprepared (its GPUs reset); try again", self.error(self.prepare(ref(ts))))
        self.assertIn("its GPUs are being reset by another unprepare call; try again",
                      self.error(self.call("unprepare", ref(ts))))
        admin = self.timesliced("gpu-5", "admin", "aaaaaaaa-0000-0000-0000-0000000000a0", admin=True)
        self.assertIn("device gpu-5 is being reset by the unprepare of claim default/shared-gpu:" + uid,
                      self.error(self.prepare(ref(admin))))
        # The kubelet gives up on the call: the reset stopped, the claim still recorded.
        self.p.send("cancel-later u")
        self.p.expect(r"^apply-cancelled 5$")
        self.p.expect(r"^cancelled u$")
        self.assertEqual(self.checkpoint()["preparedClaims"][uid]["checkpointState"], "PrepareCompleted")
        time.sleep(1.2)
        self.assertNotIn("done u", " ".join(self.p.seen))
        self.assertEqual(self.call("unprepare", ref(ts)), [{"uid": uid, "devices": []}])
        self.assertEqual(self.lines("reset"), ["reset 5 TimeSlicing"] * 2)
        self.assertEqual(self.checkpoint()["preparedClaims"], {})

    def test_freed_engine_stops_the_reset(self):
        ts = self.timesliced("gpu-5")
        self.assertNotIn("error", self.prepare(ref(ts))[0])
        self.p.send("unprepare u " + ref(ts))
        self.p.expect(r"^reset 5 TimeSlicing$")
        self.assertEqual(self.p.stop(), 0, self.p.errlines[-5:])  # end of stdin: freed
        rest = list(self.p.pending) + list(self.p.lines.queue)  # what it said before it exited
        self.assertIn("apply-cancelled 5", rest)
        self.assertNotIn("done u", " ".join(rest))
        self.probes.remove(self.p)
        # Recorded still: the next start's unprepare resets.
        self.p = self.start()
        self.assertEqual(self.call("unprepare", ref(ts)), [{"uid": ts["metadata"]["uid"], "devices": []}])
        self.p.expect(r"^reset 5 TimeSlicing$")

    def test_start_removes_staged_files_of_an_earlier_run(self):
        os.makedirs(self.cdi, exist_ok=True)
        ours = [".k8s.gpu.nvidia.com-claim_aaaaaaaa-0000-0000-0000-000000000001.yaml.Ab12Zq",
                ".k8s.gpu.nvidia.com-claim_u-2.yaml.xxxxxx"]
        kept = ["k8s.gpu.nvidia.com-claim_u-2.yaml",           # a written spec
                ".k8s.gpu.nvidia.com-claim_u-2.yaml",          # no temporary suffix
                ".k8s.gpu.nvidia.com-claim_u_2.yaml.xxxxxx",   # not a UID
                ".k8s.gpu.nvidia.com-claim_u-2.yaml.xxxxx",    # 5, not 6
                ".k8s.gpu.nvidia.com-claim_u-2.yaml.xx-xxx",   # not mkstemp's letters
                ".k8s.gpu.nvidia.com-claim_.yaml.xxxxxx",      # no UID
                ".nvidia.com-gpu.json.xxxxxx", "other.yaml"]
        for f in ours + kept:
            with open(os.path.join(self.cdi, f), "w") as fh:
                fh.write("x")
        os.mkdir(os.path.join(self.cdi, ".k8s.gpu.nvidia.com-claim_u-3.yaml.dirdir"))
        kept.append(".k8s.gpu.nvidia.com-claim_u-3.yaml.dirdir")  # a directory: not ours
        self.restart()
        self.assertNotIn("error", self.prepare(ref(self.load(obj("resourceclaim-from-template-allocated"))))[0])
        self.assertEqual(sorted(os.listdir(self.cdi)), sorted(kept + [
            "k8s.gpu.nvidia.com-claim_%s.yaml" % obj("resourceclaim-from-template-allocated")["metadata"]["uid"]]))
        self.assertIn("removed 2 CDI spec file(s) an earlier run staged under %s and never wrote" % self.cdi,
                      "\n".join(self.p.errlines))

    def test_cdi_root_not_writable(self):
        blocked = os.path.join(self.dir, "not-a-dir")
        with open(blocked, "w") as f:
            f.write("x")
        self.restart(cdi=blocked)
        o = self.load(obj("resourceclaim-from-template-allocated"))
        err = self.error(self.prepare(ref(o)))
        self.assertIn("CDI spec k8s.gpu.nvidia.com-claim_%s.yaml: creating temporary file in %s" % (
            o["metadata"]["uid"], blocked), err)
        self.assertEqual(self.checkpoint()["preparedClaims"], {})  # rolled back

    # ---- bounds -------------------------------------------------------------------------

    def test_empty_call_and_10000_claims(self):
        self.assertEqual(self.prepare(), [])
        self.n += 1
        t = time.monotonic()
        self.p.send("prepare-gen c%d 10000" % self.n)
        res = json.loads(self.p.expect(r"^done c%d (.*)$" % self.n).group(1))
        self.assertLess(time.monotonic() - t, 10)
        self.assertEqual(len(res), 10000)
        self.assertEqual(res[9999]["uid"], "u-9999")
        self.assertEqual([r["error"] for r in res],
                         ["error preparing devices for claim u-%d: 10000 claims in one call, more "
                          "than the bound of 256" % i for i in range(10000)])
        self.assertEqual([r["devices"] for r in res], [[]] * 10000)
        self.assertEqual(self.gets(), [])

    def test_cancelled_call_answers_nothing(self):
        o = self.load(obj("resourceclaim-from-template-allocated"))
        self.p.send("cancel x1 " + ref(o))
        self.p.expect(r"^cancelled x1$")
        self.p.send("count")
        self.p.expect(r"^count 0$")
        self.assertNotIn("done x1", " ".join(self.p.seen))


if __name__ == "__main__":
    PROBE, FAKE = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    unittest.main(verbosity=2)
