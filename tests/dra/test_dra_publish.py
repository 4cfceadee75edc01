"""The ResourceSlice publisher (src/dra/dra-publish.c, through dra-publish-probe and the
real API client) against the fake API server, which checks every write against the
1.34.9 validation rules: first publish with the Node as owner, zero writes at steady
state, slices deleted (the kubelet's wipe) or changed by someone are restored, failed
writes are retried with backoff, more than 128 devices are split and shrink back, a stale
slice of this node is deleted, and unhealthy devices are tainted when the API server keeps
taints and withdrawn when it drops them (then restored on recovery).

The fake API server's own validation (a second copy of the rules, in Go) is checked too:
each case of objects/validation.md sent through kube-probe gets the 1.34.9 message.

usage: test_dra_publish.py [--valgrind] <dra-publish-probe> <fake-apiserver> <kube-probe>
(--valgrind: the probe under memcheck; an error or a leak fails its exit status)"""
import json
import os
import re
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kube"))
import kubetest as kt  # noqa: E402

PROBE = FAKE = KUBE_PROBE = None
VALGRIND = []
NODE = "gpu-node-1"
WRITE = re.compile(r"^req (POST|PUT|DELETE) /apis/resource\.k8s\.io/v1/resourceslices")


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = kt.scratch.mkdtemp("dra-publish-")
        self.addCleanup(kt.scratch.remove, self.dir)  # after tearDown stopped the children
        self.srv = kt.LineProc([FAKE, self.dir])
        self.port = int(self.srv.expect(r"^listening (\d+)$").group(1))
        self.kubeconfig = kt.write_kubeconfig(os.path.join(self.dir, "kubeconfig"),
                                              "https://127.0.0.1:%d" % self.port,
                                              ca=os.path.join(self.dir, "ca.crt"), token="tok1")
        self.probe = None
        self.cmd("add " + NODE)

    def tearDown(self):
        code = self.probe.stop() if self.probe else 0
        self.srv.stop()
        self.assertEqual(code, 0, self.probe.errlines[-10:] if self.probe else None)

    def cmd(self, line):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0])

    def start(self):
        self.probe = kt.LineProc(VALGRIND + [PROBE, "--kubeconfig", self.kubeconfig, "--node", NODE])
        self.probe.expect(r"^ready$")

    def set(self, line):
        self.probe.send("set " + line)
        self.probe.expect(r"^set \d+$")

    def stats(self):
        self.probe.send("stats")
        m = self.probe.expect(r"^stats (.*)$")
        return dict(kv.split("=") for kv in m.group(1).split())

    def converged(self, timeout=20.0, **want):
        """Stats once the publisher says it converged with `want` (e.g. taints="dropped")."""
        end = time.monotonic() + timeout
        while True:
            st = self.stats()
            if st["converged"] == "1" and all(st[k] == str(v) for k, v in want.items()):
                return st
            if time.monotonic() > end:
                raise AssertionError("not converged: %s; stderr: %s" % (st, self.probe.errlines[-10:]))
            time.sleep(0.05)

    def dump(self):
        """The slices the server holds (name -> object), every request line read before."""
        self.srv.send("rs-dump")
        slices = {}
        while True:
            m = self.srv.expect(r"^rs(-count)? (\S+)(?: (.*))?$")
            if m.group(1):
                self.assertEqual(int(m.group(2)), len(slices))
                self.srv.expect(r"^ok rs-dump$")
                return slices
            slices[m.group(2)] = json.loads(m.group(3))

    def writes(self):
        self.dump()  # every request line so far is read
        return sum(1 for line in self.srv.seen if WRITE.search(line))

    @staticmethod
    def devices(slices):
        return [d for s in sorted(slices) for d in slices[s]["spec"]["devices"]]


class HeldProxy:
    """A TCP forwarder between the probe and the fake API server whose server-to-probe
    direction can be held: what the server sends meanwhile reaches the probe at once, in one
    write, on release (as a busy machine delivers it: the probe descheduled while its write
    is answered, the event after the answer in the same read)."""

    def __init__(self, port):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target = port
        self.cv = threading.Condition()
        self.holding = False
        self.held = {}  # probe-side socket -> bytes held for it
        self.socks = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
                s = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                return
            self.socks += [c, s]
            threading.Thread(target=self._pump, args=(c, s, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c, True), daemon=True).start()

    def _pump(self, src, dst, down):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self.cv:
                    if down and self.holding:
                        self.held[dst] = self.held.get(dst, b"") + data
                        self.cv.notify_all()
                        continue
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def hold(self):
        with self.cv:
            self.holding = True

    def held_bytes(self):
        with self.cv:
            return sum(len(b) for b in self.held.values())

    def release(self):
        with self.cv:
            self.holding = False
            for dst, data in self.held.items():
                dst.sendall(data)
            self.held = {}

    def close(self):
        self.listener.close()
        for s in self.socks:
            s.close()


class Publish(Base):
    def test_first_publish_then_steady(self):
        self.start()
        self.set("8")
        self.converged()
        slices = self.dump()
        self.assertEqual(list(slices), [NODE + "-gpu.nvidia.com-0"])
        s = slices[NODE + "-gpu.nvidia.com-0"]
        self.assertEqual(s["metadata"]["ownerReferences"],
                         [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "uid-" + NODE,
                           "controller": True}])
        self.assertEqual(s["spec"]["pool"], {"name": NODE, "generation": 1, "resourceSliceCount": 1})
        self.assertEqual(s["spec"]["driver"], "gpu.nvidia.com")
        self.assertEqual(s["spec"]["nodeName"], NODE)
        self.assertEqual([d["name"] for d in s["spec"]["devices"]], ["gpu-%d" % i for i in range(8)])
        self.assertEqual(self.writes(), 1)
        # steady state: the same set again, and time passing, write nothing
        self.set("8")
        time.sleep(3)
        self.assertEqual(self.writes(), 1)
        self.assertEqual(self.stats()["converged"], "1")
        # the watch asked only for this node's slices of this driver
        self.assertTrue(any("fieldSelector=spec.nodeName%3D" + NODE + "%2Cspec.driver%3Dgpu.nvidia.com"
                            in line for line in self.srv.seen), self.srv.seen[:10])

    def test_deleted_slices_come_back(self):
        self.start()
        self.set("2")
        self.converged()
        self.cmd("rs-delete all")  # the kubelet wipes a plugin's slices when it starts
        end = time.monotonic() + 20
        while not self.dump() and time.monotonic() < end:
            time.sleep(0.05)
        st = self.converged()
        self.assertEqual(len(self.devices(self.dump())), 2)
        self.assertGreaterEqual(int(st["restores"]), 1)
        self.assertEqual(self.writes(), 2)
        self.probe.stderr_has(r"ResourceSlice %s-gpu\.nvidia\.com-0 deleted by someone else" % NODE)
        # the Node's UID comes from its watch (a streaming list of its metadata), never
        # from a GET, and the slices' own list through their watch too
        self.assertEqual(sum(1 for line in self.srv.seen if line.startswith("req GET /api/v1/nodes/" + NODE)), 0)
        self.assertEqual(sum(1 for line in self.srv.seen if line.startswith("req GET /api/v1/nodes?")
                             and "sendInitialEvents=true" in line and "metadata.name%3D" + NODE in line), 1,
                         self.srv.seen[:10])
        self.assertFalse(any(line.startswith("req GET /apis/resource.k8s.io/v1/resourceslices?limit=")
                             for line in self.srv.seen), self.srv.seen[:10])

    def test_node_recreated_gives_the_new_owner(self):
        """A Node deleted and created again has a new UID: the slices get it as owner at
        once, from the Node's watch."""
        self.start()
        self.set("2")
        self.converged()
        owners = {s["metadata"]["ownerReferences"][0]["uid"] for s in self.dump().values()}
        self.assertEqual(owners, {"uid-" + NODE})
        self.cmd("recreate " + NODE)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            owners = {s["metadata"]["ownerReferences"][0]["uid"] for s in self.dump().values()}
            if owners != {"uid-" + NODE}:
                break
            time.sleep(0.05)
        self.assertEqual(len(owners), 1)
        self.assertRegex(owners.pop(), r"^uid-%s-\d+$" % NODE)
        self.probe.stderr_has(r"Node %s has a new UID" % NODE)

    def test_node_read_when_its_watch_is_forbidden(self):
        """A ClusterRole granting only get on nodes: the Node is read (one GET) and the
        slices published all the same; a server without streaming lists: paged lists."""
        self.cmd("forbid WATCH")
        self.cmd("watchlist off")
        self.start()
        self.set("2")
        self.converged()
        self.assertEqual(len(self.devices(self.dump())), 2)
        self.assertEqual(sum(1 for line in self.srv.seen if line.startswith("req GET /api/v1/nodes/" + NODE)), 1)
        self.probe.stderr_has(r"Not allowed to watch Node %s" % NODE)
        self.probe.stderr_has(r"listing page by page instead of through the watch")
        self.assertTrue(any(line.startswith("req GET /apis/resource.k8s.io/v1/resourceslices?limit=")
                            for line in self.srv.seen), self.srv.seen[:10])

    def test_restores_are_paced(self):
        """Someone deleting the slice again and again gets 5 restores at once, then one per
        10 s, with one warning."""
        self.start()
        self.set("1")
        self.converged()
        t = []
        for _ in range(6):
            self.cmd("rs-delete all")
            t0 = time.monotonic()
            end = t0 + 30
            while not self.dump() and time.monotonic() < end:
                time.sleep(0.05)
            self.assertTrue(self.dump())
            t.append(time.monotonic() - t0)
        self.assertLess(max(t[:5]), 3.0, t)
        self.assertGreater(t[5], 5.0, t)
        self.probe.stderr_has("keep being deleted or changed by someone else; restoring them at most "
                              "once every 10s")

    def held_round(self, proxy, devices):
        """Our update to `devices` devices answered, echoed and the slice deleted after
        it, all held and then read at once; the seconds until the slice is back."""
        proxy.hold()
        self.set(str(devices))  # an update: its answer and its echo held
        end = time.monotonic() + 20
        while len(self.devices(self.dump())) != devices and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual(len(self.devices(self.dump())), devices)
        before = proxy.held_bytes()
        self.cmd("rs-delete all")  # the DELETED, held behind them
        while proxy.held_bytes() == before and time.monotonic() < end:
            time.sleep(0.01)
        time.sleep(0.2)
        t0 = time.monotonic()
        proxy.release()
        end = t0 + 30
        while not self.dump() and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual(len(self.devices(self.dump())), devices, self.probe.errlines[-10:])
        return time.monotonic() - t0

    def test_slice_deleted_while_our_write_is_answered_comes_back(self):
        """The paced-restore case's flake under load: the slice deleted right after our
        write of it, the write's answer, its echo and the DELETED read at once. The API
        client hands the watch's bytes over before the answers; the answer must not put
        back the slice the DELETED took out of the store (it did: counted as there,
        converged, never restored). And that restore is paced like any other (it was
        made at once, whatever the bucket held)."""
        proxy = HeldProxy(self.port)
        self.addCleanup(proxy.close)
        self.kubeconfig = kt.write_kubeconfig(os.path.join(self.dir, "kubeconfig-proxy"),
                                              "https://127.0.0.1:%d" % proxy.port,
                                              ca=os.path.join(self.dir, "ca.crt"), token="tok1")
        self.start()
        self.set("1")
        self.converged()
        self.assertLess(self.held_round(proxy, 2), 3.0)  # a token in the bucket
        self.converged()
        for _ in range(4):  # the rest of the burst
            self.cmd("rs-delete all")
            end = time.monotonic() + 20
            while not self.dump() and time.monotonic() < end:
                time.sleep(0.05)
            self.converged()
        self.assertGreater(self.held_round(proxy, 3), 5.0)  # none: paced
        self.converged()

    def test_changed_slice_is_restored(self):
        self.start()
        self.set("2")
        self.converged()
        self.cmd("rs-modify %s-gpu.nvidia.com-0" % NODE)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            attrs = self.devices(self.dump())[0]["attributes"]
            if "productName" not in attrs:
                break
            time.sleep(0.05)
        self.assertNotIn("productName", self.devices(self.dump())[0]["attributes"])
        self.converged()

    def test_failed_writes_are_retried_with_backoff(self):
        self.cmd("rs-fail 3 503")
        self.start()
        t0 = time.monotonic()
        self.set("2")
        st = self.converged(timeout=30)
        took = time.monotonic() - t0
        self.assertEqual(st["failures"], "3")
        self.assertEqual(len(self.devices(self.dump())), 2)
        # backoff: 0.5-1 s, 1-2 s, 2-4 s (jittered) before the 4th try
        self.assertGreater(took, 3.0)
        self.assertEqual(self.writes(), 4)
        # one warning for the run of failures, not one per retry
        warn = [l for l in self.probe.errlines if l.startswith("W") and "Publishing ResourceSlices" in l]
        self.assertEqual(len(warn), 1, warn)
        self.probe.stderr_has("Publishing ResourceSlices works again")

    def test_split_beyond_128_and_back(self):
        self.start()
        self.set("300")
        self.converged()
        slices = self.dump()
        self.assertEqual(sorted(slices), ["%s-gpu.nvidia.com-%d" % (NODE, i) for i in range(3)])
        self.assertEqual([len(slices[n]["spec"]["devices"]) for n in sorted(slices)], [128, 128, 44])
        self.assertEqual({json.dumps(s["spec"]["pool"], sort_keys=True) for s in slices.values()},
                         {json.dumps({"name": NODE, "generation": 1, "resourceSliceCount": 3},
                                     sort_keys=True)})
        self.set("100")
        self.converged()
        slices = self.dump()
        self.assertEqual(list(slices), [NODE + "-gpu.nvidia.com-0"])
        self.assertEqual(slices[NODE + "-gpu.nvidia.com-0"]["spec"]["pool"],
                         {"name": NODE, "generation": 2, "resourceSliceCount": 1})
        self.assertEqual(len(self.devices(slices)), 100)

    def test_stale_slice_of_this_node_is_deleted(self):
        self.cmd("rs-add old-slice %s gpu.nvidia.com" % NODE)
        self.cmd("rs-add other-node-slice other-node gpu.nvidia.com")
        self.cmd("rs-add other-driver-slice %s example.com" % NODE)
        self.start()
        self.set("1")
        self.converged()
        self.assertEqual(sorted(self.dump()),
                         sorted([NODE + "-gpu.nvidia.com-0", "other-node-slice", "other-driver-slice"]))

    def test_taints_dropped_withdraw_the_device(self):
        self.start()
        self.set("4 gpu-2=xid:79")
        self.converged(taints="dropped")
        self.assertEqual([d["name"] for d in self.devices(self.dump())], ["gpu-0", "gpu-1", "gpu-3"])
        n = self.writes()
        time.sleep(2)
        self.assertEqual(self.writes(), n)
        self.set("4")  # recovered
        self.converged(taints="dropped")
        self.assertEqual([d["name"] for d in self.devices(self.dump())], ["gpu-%d" % i for i in range(4)])

    def test_taints_kept_taint_the_device(self):
        self.cmd("rs-taints on")
        self.start()
        self.set("4 gpu-2=xid:79 gpu-3=lost")
        self.converged(taints="kept")
        devices = self.devices(self.dump())
        self.assertEqual(len(devices), 4)
        t2, t3 = devices[2]["taints"], devices[3]["taints"]
        self.assertEqual([(t["key"], t.get("value"), t["effect"]) for t in t2],
                         [("gpu.nvidia.com/xid", "79", "NoSchedule")])
        self.assertEqual([(t["key"], t.get("value"), t["effect"]) for t in t3],
                         [("gpu.nvidia.com/gpu-lost", None, "NoSchedule")])
        self.assertIn("timeAdded", t2[0])
        self.assertNotIn("taints", devices[0])
        n = self.writes()
        time.sleep(2)  # the server's timeAdded is no difference to write again for
        self.assertEqual(self.writes(), n)
        self.set("4")
        self.converged(taints="kept")
        self.assertFalse(any("taints" in d for d in self.devices(self.dump())))


LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
         "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
         "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def base(name, n=1):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": NODE,
                     "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-%d" % i,
                                  "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-%d" % i}},
                                  "capacity": {"memory": {"value": "80Gi"}}} for i in range(n)]}}


class FakeValidation(Base):
    """What the fake API server refuses, with the real one's messages (validation.md)."""

    def post(self, obj):
        if not hasattr(self, "kprobe"):
            self.kprobe = kt.Probe(KUBE_PROBE, "--kubeconfig", self.kubeconfig)
            self.addCleanup(self.kprobe.stop)
        return self.kprobe.request("POST", "/apis/resource.k8s.io/v1/resourceslices",
                                   json.dumps(obj, separators=(",", ":")))

    def refused(self, obj, detail):
        status, body = self.post(obj)
        self.assertEqual(status, 422, body)
        self.assertEqual(json.loads(body)["message"], 'ResourceSlice.resource.k8s.io "%s" is invalid: %s'
                         % (obj["metadata"]["name"], detail))

    def accepted(self, obj):
        status, body = self.post(obj)
        self.assertEqual(status, 201, body)

    def test_validation_messages(self):
        self.accepted(base("val-128", 128))
        self.refused(base("val-129", 129), "spec.devices: Too many: 129: must have at most 128 items")
        s = base("val-attrs-33")
        del s["spec"]["devices"][0]["capacity"]
        s["spec"]["devices"][0]["attributes"].update({"a%d" % i: {"int": i} for i in range(31)})
        self.refused(s, "spec.devices[0]: Invalid value: 33: the total number of attributes and "
                        "capacities must not exceed 32")
        s = base("val-upper")
        s["spec"]["devices"][0]["name"] = "GPU-0"
        self.refused(s, 'spec.devices[0].name: Invalid value: "GPU-0": ' + LABEL)
        s = base("val-2types")
        s["spec"]["devices"][0]["attributes"]["uuid"] = {"string": "GPU-0", "int": 1}
        self.refused(s, 'spec.devices[0].attributes[uuid]: Invalid value: {"IntValue":1,"BoolValue":null,'
                        '"StringValue":"GPU-0","VersionValue":null}: exactly one value must be specified')
        s = base("val-taints5")
        s["spec"]["devices"][0]["taints"] = [{"key": "k%d" % i, "effect": "NoSchedule"} for i in range(5)]
        self.refused(s, "spec.devices[0].taints: Too many: 5: must have at most 4 items")
        s = base("val-taintnone")
        s["spec"]["devices"][0]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}]
        self.refused(s, 'spec.devices[0].taints[0].effect: Unsupported value: "None": supported values: '
                        '"NoExecute", "NoSchedule"')
        s = base("val-ver")
        s["spec"]["devices"][0]["attributes"]["driverVersion"] = {"version": "570.133"}
        self.refused(s, 'spec.devices[0].attributes[driverVersion].version: Invalid value: "570.133": '
                        'must be a string compatible with semver.org spec 2.0.0')
        s = base("val-name33")
        s["spec"]["devices"][0]["attributes"]["cudaComputeCapabilityMajorMinorXY"] = {"string": "x"}
        self.refused(s, "spec.devices[0].attributes[cudaComputeCapabilityMajorMinorXY]: Too long: may "
                        "not be more than 32 bytes")
        s = base("val-str65")
        s["spec"]["devices"][0]["attributes"]["productName"] = {"string": "x" * 65}
        self.refused(s, "spec.devices[0].attributes[productName].string: Too long: may not be more than "
                        "64 bytes")
        s = base("val-dup", 2)
        s["spec"]["devices"][1]["name"] = "gpu-0"
        self.refused(s, 'spec.devices[1].name: Duplicate value: "gpu-0"')
        s = base("val-count0")
        s["spec"]["pool"]["resourceSliceCount"] = 0
        self.refused(s, "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero")
        s = base("val-both")
        s["spec"]["allNodes"] = True
        self.refused(s, 'spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, '
                        '`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple '
                        'fields are set')
        # and the field selector the API server refuses for slices
        status, body = self.kprobe.request("GET", "/apis/resource.k8s.io/v1/resourceslices?"
                                           "fieldSelector=spec.pool.name%3Dx")
        self.assertEqual(status, 400)
        self.assertIn("field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: "
                      "spec.pool.name", body)


if __name__ == "__main__":
    if sys.argv[1] == "--valgrind":
        VALGRIND = ["valgrind", "-q", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                    "--error-exitcode=9"]
        del sys.argv[1]
    PROBE, FAKE, KUBE_PROBE = sys.argv[1], sys.argv[2], sys.argv[3]
    unittest.main(argv=sys.argv[:1], verbosity=2)
