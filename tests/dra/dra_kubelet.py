"""The 1.34 kubelet's side of a DRA plugin, for tests/dra/test_dra_serve.py and
bench/bench-dra.py: the kubelet stand-in (registration through the registrar directory,
NodePrepareResources / NodeUnprepareResources v1, the NodeWatchResources stream) with the
message classes of api/ compiled in memory, the real 1.34 claim objects moved to a node's
pool, and a check of a CDI spec against tests/data/cdi-schema."""
import copy
import json
import os
import re
import subprocess
import threading
import time

import grpc
from google.protobuf import descriptor_pb2, message_factory

SOURCE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.environ.get("GDP_TEST_DATA") or os.path.join(SOURCE, "tests", "data")
TIMEOUT = 20.0  # upper bound for one expected event
NODE = "n1"      # the node the tests and the benchmark play
DRIVER = "gpu.nvidia.com"
CDI_KIND = "k8s.gpu.nvidia.com/claim"
OBJECTS = os.path.join(DATA, "dra", "objects")
CDI_SCHEMA = os.path.join(DATA, "cdi-schema")
V1 = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
REG = "/pluginregistration.Registration/"
HEALTH = "/v1alpha1.DRAResourceHealth/NodeWatchResources"


def _messages():
    """The message classes of the kubelet APIs in api/, compiled by protoc in memory (as
    tools/test-kubelet/dpapi.py does): nothing generated touches the disk."""
    api = os.path.join(SOURCE, "api")
    r = subprocess.run(["protoc", "--proto_path=" + api, "--include_imports",
                        "--descriptor_set_out=/dev/stdout"] +
                       [os.path.join(api, f) for f in ("pluginregistration.proto", "dra_v1.proto",
                                                        "dra_health_v1alpha1.proto")],
                       check=True, stdout=subprocess.PIPE)
    files = descriptor_pb2.FileDescriptorSet.FromString(r.stdout).file
    return {name.rsplit(".", 1)[1] if name.startswith(("pluginregistration.", "v1alpha1.")) else
            "dra." + name.rsplit(".", 1)[1]: cls
            for name, cls in message_factory.GetMessages(files).items()}


PB = _messages()


def obj(name):
    with open(os.path.join(OBJECTS, name + ".json")) as f:
        return json.load(f)


def on_node(o, name=None, uid=None, node=NODE):
    """A real claim object moved to node's pool (its results and its node selector)."""
    o = copy.deepcopy(o)
    if name:
        o["metadata"]["name"] = name
    if uid:
        o["metadata"]["uid"] = uid
    alloc = o["status"]["allocation"]
    for r in alloc["devices"]["results"]:
        r["pool"] = node
    for t in alloc.get("nodeSelector", {}).get("nodeSelectorTerms", []):
        for m in t.get("matchFields", []):
            m["values"] = [node]
    return o


def ref(o):
    md = o["metadata"]
    return (md["namespace"], md["name"], md["uid"])


# ---- CDI: the schema of tests/data/cdi-schema (the subset of JSON Schema it uses) and the
# names CDI's own parser accepts

def _schema_check(node, value, defs, where, errs):
    if "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[1]]
    t = node.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool,
             "integer": int, "number": (int, float)}
    if t and not isinstance(value, types[t]):
        errs.append("%s: not a %s" % (where, t))
        return
    for k in node.get("required", []):
        if k not in value:
            errs.append("%s: %s missing" % (where, k))
    if isinstance(value, dict):
        for k, v in value.items():
            sub = node.get("properties", {}).get(k)
            for pat, s in node.get("patternProperties", {}).items():
                if re.search(pat, k):
                    sub = s
            if sub is not None:
                _schema_check(sub, v, defs, where + "." + k, errs)
    if isinstance(value, list) and "items" in node:
        for i, v in enumerate(value):
            _schema_check(node["items"], v, defs, "%s[%d]" % (where, i), errs)


def cdi_errors(spec):
    with open(os.path.join(CDI_SCHEMA, "schema.json")) as f:
        schema = json.load(f)
    with open(os.path.join(CDI_SCHEMA, "defs.json")) as f:
        defs = json.load(f)["definitions"]
    errs = []
    _schema_check(schema, spec, defs, "spec", errs)
    if spec.get("cdiVersion") not in ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0"):
        errs.append("cdiVersion %r" % spec.get("cdiVersion"))
    if not re.fullmatch(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?",
                        spec.get("kind", "")):
        errs.append("kind %r" % spec.get("kind"))
    for d in spec.get("devices", []):
        if not re.fullmatch(r"[a-zA-Z0-9]([a-zA-Z0-9_.:-]*[a-zA-Z0-9])?", d.get("name", "")):
            errs.append("device name %r" % d.get("name"))
    return errs


# ---- the kubelet stand-in

class Kubelet:
    """What the 1.34 kubelet does with a DRA plugin: finds <registrar>/<driver>-reg.sock,
    GetInfo, NotifyRegistrationStatus, then calls the endpoint PluginInfo names."""

    def __init__(self, registrar):
        self.reg_path = os.path.join(registrar, DRIVER + "-reg.sock")
        self.channels = []
        self.streams = []

    def wait_socket(self, timeout=TIMEOUT):
        """Until the registration socket exists; seconds waited."""
        t0 = time.monotonic()
        while True:
            try:
                st = os.stat(self.reg_path)
                if (st.st_mode & 0o170000) == 0o140000:
                    return time.monotonic() - t0
            except FileNotFoundError:
                pass
            if time.monotonic() - t0 > timeout:
                raise AssertionError("no registration socket %s within %.0fs" % (self.reg_path,
                                                                                  timeout))
            time.sleep(0.001)

    def dial(self, path):
        ch = grpc.insecure_channel("unix:" + path)
        self.channels.append(ch)
        return ch

    def register(self, timeout=1):
        """GetInfo and the OK notification, as the kubelet's reconciler does, on a
        connection closed afterwards (as the kubelet's); returns PluginInfo. timeout: the
        GetInfo's (longer only for a plugin run under callgrind, bench/link-order.py)."""
        self.wait_socket()
        reg = grpc.insecure_channel("unix:" + self.reg_path)
        info = reg.unary_unary(REG + "GetInfo", request_serializer=PB["InfoRequest"].SerializeToString,
                               response_deserializer=PB["PluginInfo"].FromString)(
            PB["InfoRequest"](), timeout=timeout)
        reg.unary_unary(REG + "NotifyRegistrationStatus",
                        request_serializer=PB["RegistrationStatus"].SerializeToString,
                        response_deserializer=PB["RegistrationStatusResponse"].FromString)(
            PB["RegistrationStatus"](plugin_registered=True), timeout=5)
        reg.close()
        self.dra = self.dial(info.endpoint)
        return info

    def _call(self, method, claims, timeout):
        req = PB["dra.Node%sResourcesRequest" % method](claims=[
            PB["dra.Claim"](namespace=ns, name=name, uid=uid) for ns, name, uid in claims])
        resp = self.dra.unary_unary(
            V1 + "Node%sResources" % method, request_serializer=type(req).SerializeToString,
            response_deserializer=PB["dra.Node%sResourcesResponse" % method].FromString)(
            req, timeout=timeout)
        return resp.claims

    def prepare(self, *claims, timeout=45, share_id=False):
        """{uid: {"devices": [(pool, device, [request names], [CDI IDs])], "error": str}};
        with share_id, each device's share_id (field 5, "" when unset) fifth."""
        return {uid: {"devices": [(d.pool_name, d.device_name, list(d.request_names),
                                   list(d.cdi_device_ids)) + ((d.share_id,) if share_id else ())
                                  for d in r.devices],
                      "error": r.error}
                for uid, r in self._call("Prepare", claims, timeout).items()}

    def unprepare(self, *claims, timeout=45):
        return {uid: r.error for uid, r in self._call("Unprepare", claims, timeout).items()}

    def watch_health(self):
        """Opens NodeWatchResources; its messages ({device: health}) collect in a list."""
        w = {"msgs": [], "cond": threading.Condition()}
        call = self.dra.unary_stream(HEALTH, request_serializer=PB["NodeWatchResourcesRequest"].SerializeToString,
                                     response_deserializer=PB["NodeWatchResourcesResponse"].FromString)(
            PB["NodeWatchResourcesRequest"]())
        w["call"] = call

        def pump():
            try:
                for m in call:
                    with w["cond"]:
                        w["msgs"].append({(d.device.pool_name, d.device.device_name): d.health
                                          for d in m.devices})
                        w["cond"].notify_all()
            except grpc.RpcError:
                pass
        w["thread"] = threading.Thread(target=pump, daemon=True)
        w["thread"].start()
        self.streams.append(w)
        return w

    @staticmethod
    def wait_health(w, pred, what, start=0, timeout=TIMEOUT):
        with w["cond"]:
            if not w["cond"].wait_for(lambda: any(pred(m) for m in w["msgs"][start:]), timeout):
                raise AssertionError("health stream: no message with %s; last: %s" % (
                    what, w["msgs"][-1:]))
            return next(m for m in w["msgs"][start:] if pred(m))

    def close(self):
        for w in self.streams:
            w["call"].cancel()
            w["thread"].join(5)
        for ch in self.channels:
            ch.close()
        self.channels, self.streams = [], []


UNHEALTHY, HEALTHY = 2, 1


class FakeApi:
    """The fake API server of tests/kube (tests/kube/fake-apiserver) for a test case (a
    mixin: self.tmp and addCleanup are the case's): started with this node added, and its
    commands. kubetest is found on the path the test set up."""

    def start_fake_api(self, fake, version=None):
        import kubetest as kt
        d = os.path.join(self.tmp, "api")
        os.mkdir(d)
        self.srv = kt.LineProc([fake, d])
        self.addCleanup(self.srv.stop)
        port = int(self.srv.expect(r"^listening (\d+)$").group(1))
        self.kubeconfig = kt.write_kubeconfig(os.path.join(d, "kubeconfig"),
                                              "https://127.0.0.1:%d" % port,
                                              ca=os.path.join(d, "ca.crt"), token="tok1")
        self.cmd("add " + NODE)
        if version:
            self.cmd("version " + version)

    def cmd(self, line):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0])

    def load(self, o):
        self.cmd("rc-json " + json.dumps(o, separators=(",", ":")))
        return o

    def slices(self):
        """name -> object of every slice the server holds."""
        self.srv.send("rs-dump")
        out = {}
        while True:
            m = self.srv.expect(r"^rs(-count)? (\S+)(?: (.*))?$")
            if m.group(1):
                self.srv.expect(r"^ok rs-dump$")
                return out
            out[m.group(2)] = json.loads(m.group(3))
