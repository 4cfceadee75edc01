"""The DRA service (src/dra/dra-service.c) as the 1.34 kubelet sees it: registration,
NodePrepareResources / NodeUnprepareResources on both API versions, answered later or at
once, cancelled, bounded, the health stream and its re-send, sockets removed and bound
again. dra-test-service runs the service with made-up ops whose answers are the content
of the kubelet-made vectors (tests/data/dra/wire), so replies are compared byte for byte;
this script plays the kubelet with grpcio, sending the vectors themselves."""
import collections
import os
import random
import select
import subprocess
import sys
import time
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import scratch  # noqa: E402

BINARY = None
WRAPPER = []  # --valgrind: memcheck, any error or leak fails the exit status
WIRE = os.path.join(os.environ.get("GDP_TEST_DATA", ""), "dra", "wire")
DRIVER = "gpu.nvidia.com"
V1 = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
V1BETA1 = "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
HEALTH = "/v1alpha1.DRAResourceHealth/NodeWatchResources"
REG = "/pluginregistration.Registration/"
UID_A = "3f2a6c1e-8b4d-4e7a-9c15-2d0b7e4f6a81"


def vector(name):
    with open(os.path.join(WIRE, name), "rb") as f:
        return f.read()


# A few lines of protobuf encoding (length-delimited fields only) for requests the
# vectors do not have and for PluginInfo with our endpoint.
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def claim(uid, namespace="default", name="c"):
    return field(1, field(1, namespace) + field(2, uid) + field(3, name))


class Service:
    def __init__(self, resend_ms=0):
        self.dir = scratch.socket_dir("gdp-dra-svc-")  # its sockets: the 78-byte bound
        self.registrar = os.path.join(self.dir, "plugins_registry")
        self.plugins = os.path.join(self.dir, "plugins")
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = scratch.adopt(subprocess.Popen(
            WRAPPER + [BINARY, self.registrar, self.plugins, str(resend_ms)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.err, bufsize=0))
        self.buf = b""
        ready = self.line(10).split()
        assert ready[0] == "ready", ready
        self.sock, self.reg = ready[1], ready[2]
        self.channel = grpc.insecure_channel("unix://" + self.sock)
        self.reg_channel = grpc.insecure_channel("unix://" + self.reg)

    def line(self, timeout=5):
        """The next stdout line (own buffer: select() cannot see what readline() kept)."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            r, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not r:
                raise AssertionError("no line from dra-test-service within %ss" % timeout)
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise AssertionError("dra-test-service exited (%r)" % self.proc.wait(5))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode().strip()

    def cmd(self, c):
        self.proc.stdin.write((c + "\n").encode())
        return self.line()

    def status(self):
        st = self.cmd("status").split()
        assert st[0] == "status", st
        return {k: int(v) for k, v in (f.split("=") for f in st[1:])}

    def unary(self, path, req, channel=None, timeout=5):
        return (channel or self.channel).unary_unary(path)(req, timeout=timeout)

    def stderr(self):
        self.err.flush()
        self.err.seek(0)
        return self.err.read()

    def quit(self):
        """Free the service and exit; returns the lines printed from then on."""
        if self.proc.poll() is not None or self.proc.stdin.closed:
            return []
        self.proc.stdin.write(b"quit\n")
        self.proc.stdin.close()
        rest = self.buf + self.proc.stdout.read()
        self.buf = b""
        return rest.decode().splitlines()

    def close(self):
        """Quit; returns the lines printed from then on."""
        out = self.quit()  # first: closing a channel cancels its calls
        self.channel.close()
        self.reg_channel.close()
        self.returncode = self.proc.wait(10)
        self.proc.stdout.close()
        self.stderr_text = self.stderr()
        self.err.close()
        scratch.remove(self.dir)
        return out


class DraServiceTest(unittest.TestCase):
    def setUp(self):
        self.svc = Service()

    def tearDown(self):
        if self.svc:
            self.svc.close()
            self.assertEqual(self.svc.returncode, 0, self.svc.stderr_text)

    def code(self, fn):
        with self.assertRaises(grpc.RpcError) as cm:
            fn()
        return cm.exception.code(), cm.exception.details()

    def test_sockets_where_the_kubelet_looks(self):
        self.assertEqual(self.svc.sock, os.path.join(self.svc.plugins, DRIVER, "dra.sock"))
        self.assertEqual(self.svc.reg, os.path.join(self.svc.registrar, DRIVER + "-reg.sock"))
        self.assertEqual(os.stat(os.path.dirname(self.svc.sock)).st_mode & 0o777, 0o750)

    def test_registration(self):
        info = self.svc.unary(REG + "GetInfo", vector("pluginregistration_InfoRequest.bin"),
                              self.svc.reg_channel)
        want = (field(1, "DRAPlugin") + field(2, DRIVER) + field(3, self.svc.sock) +
                field(4, "v1.DRAPlugin") + field(4, "v1beta1.DRAPlugin") +
                field(4, "v1alpha1.DRAResourceHealth"))
        self.assertEqual(info, want)
        # the vector's PluginInfo is ours but for the endpoint and the health service
        ref = vector("pluginregistration_PluginInfo.bin")
        ref_ours = ref.replace(field(3, "/var/lib/kubelet/plugins/gpu.nvidia.com/dra.sock"),
                               field(3, self.svc.sock)) + field(4, "v1alpha1.DRAResourceHealth")
        self.assertEqual(info, ref_ours)
        self.assertEqual(self.svc.status()["registered"], 0)
        for _ in range(2):  # the kubelet retries; one error line, not one per retry
            got = self.svc.unary(REG + "NotifyRegistrationStatus",
                                 vector("pluginregistration_RegistrationStatus_error.bin"),
                                 self.svc.reg_channel)
            self.assertEqual(got, vector("pluginregistration_RegistrationStatusResponse.bin"))
        self.assertEqual(self.svc.status()["registered"], 0)
        self.assertEqual(self.svc.stderr().count("the kubelet refused driver gpu.nvidia.com"), 1)
        self.assertIn("none of services supported by the plugin", self.svc.stderr())
        self.svc.unary(REG + "NotifyRegistrationStatus",
                       vector("pluginregistration_RegistrationStatus_ok.bin"), self.svc.reg_channel)
        self.assertEqual(self.svc.status()["registered"], 1)
        self.assertIn("registered with the kubelet", self.svc.stderr())

    def test_prepare_and_unprepare_match_the_vectors_on_both_versions(self):
        for prefix, ver in ((V1, "v1"), (V1BETA1, "v1beta1")):
            got = self.svc.unary(prefix + "NodePrepareResources",
                                 vector("dra-%s_NodePrepareResourcesRequest.bin" % ver))
            self.assertEqual(got, vector("dra-%s_NodePrepareResourcesResponse.bin" % ver))
            got = self.svc.unary(prefix + "NodeUnprepareResources",
                                 vector("dra-%s_NodeUnprepareResourcesRequest.bin" % ver))
            self.assertEqual(got, vector("dra-%s_NodeUnprepareResourcesResponse.bin" % ver))
        st = self.svc.status()
        self.assertEqual((st["prepares"], st["unprepares"]), (2, 2))

    def test_answer_later(self):
        self.assertEqual(self.svc.cmd("hold 1"), "ok")
        fut = self.svc.channel.unary_unary(V1 + "NodePrepareResources").future(
            vector("dra-v1_NodePrepareResourcesRequest.bin"), timeout=10)
        self.assertEqual(self.svc.line(), "held prepare 2")
        time.sleep(0.2)
        self.assertFalse(fut.done())
        self.assertEqual(self.svc.cmd("answer"), "answered 1")
        self.assertEqual(fut.result(), vector("dra-v1_NodePrepareResourcesResponse.bin"))

    def test_kubelet_gives_up_first(self):
        self.svc.cmd("hold 1")
        code, _ = self.code(lambda: self.svc.unary(V1 + "NodePrepareResources",
                                                   claim(UID_A), timeout=0.3))
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(self.svc.line(), "held prepare 1")
        self.assertEqual(self.svc.line(), "cancelled")
        st = self.svc.status()
        self.assertEqual((st["cancelled"], st["held"]), (1, 0))
        self.assertEqual(self.svc.cmd("answer"), "answered 0")

    def test_empty_call_answers_at_once_without_ops(self):
        self.assertEqual(self.svc.unary(V1 + "NodePrepareResources", b""), b"")
        self.assertEqual(self.svc.unary(V1 + "NodeUnprepareResources", b""), b"")
        st = self.svc.status()
        self.assertEqual((st["prepares"], st["unprepares"]), (0, 0))

    def test_bounds(self):
        many = b"".join(claim("uid-%d" % i) for i in range(10000))
        code, msg = self.code(lambda: self.svc.unary(V1 + "NodePrepareResources", many))
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(msg, "10000 claims in one call, at most 256")
        code, msg = self.code(lambda: self.svc.unary(V1 + "NodeUnprepareResources",
                                                   b"".join(claim("u%d" % i) for i in range(257))))
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        got = self.svc.unary(V1 + "NodePrepareResources",
                             b"".join(claim("u%d" % i) for i in range(256)))
        self.assertEqual(got.count(b"gpu-7"), 256)  # the bound itself is served
        code, _ = self.code(lambda: self.svc.unary(V1 + "NodePrepareResources",
                                                   claim(UID_A) + claim(UID_A)))
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        code, _ = self.code(lambda: self.svc.unary(V1 + "NodePrepareResources", claim("")))
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        code, _ = self.code(lambda: self.svc.unary(V1 + "NodePrepareResources", b"\xff\xff"))
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        # a name out of bounds is that claim's error; the other claim is prepared
        got = self.svc.unary(V1 + "NodePrepareResources",
                             claim("u-long", name="n" * 254) + claim("u-ok"))
        entry_long = field(1, field(1, "u-long") + field(2, field(
            2, "ResourceClaim u-long: namespace or name longer than 253")))
        entry_ok = field(1, field(1, "u-ok") + field(2, field(1, field(1, "gpu") + field(
            2, "node-a") + field(3, "gpu-7"))))
        self.assertEqual(got, entry_long + entry_ok)
        self.assertEqual(self.svc.status()["prepares"], 2)  # 256 claims, then u-ok alone

    def test_nul_in_a_claim_string_is_refused(self):
        """A string with a NUL byte is not cut there (it would become another claim's
        UID, namespace or name): the call is refused, on both methods, and nothing reaches
        the ops. Issue 30, row 10."""
        for c in (claim("u-1\0../x"), claim("\0u-1"), claim("u-1", namespace="default\0x"),
                  claim("u-1", name="c\0")):
            for method in ("NodePrepareResources", "NodeUnprepareResources"):
                code, msg = self.code(lambda: self.svc.unary(V1 + method, claim("u-ok") + c))
                self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, (method, c))
                self.assertEqual(msg, "claim 1: a NUL byte in its UID, namespace or name")
        st = self.svc.status()
        self.assertEqual((st["prepares"], st["unprepares"]), (0, 0))
        # a NUL in a field the message does not have is no string of the claim's
        self.assertIn(b"gpu-7", self.svc.unary(V1 + "NodePrepareResources",
                                               field(1, field(1, "ns") + field(2, "u-2") +
                                                     field(9, "x\0y") + field(3, "c"))))

    def test_mutated_requests(self):
        """Any bytes on either method: an answer (OK, or INVALID_ARGUMENT for what does not
        decode or repeats a UID), never a dead service. Fixed seed: the same 400 inputs."""
        rng = random.Random(20)
        base = [vector("dra-v1_NodePrepareResourcesRequest.bin"), claim(UID_A), b""]
        allowed = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
        outcomes = collections.Counter()
        for i in range(400):
            req = bytearray(rng.choice(base))
            for _ in range(rng.randint(1, 4)):
                kind = rng.randrange(3)
                if kind == 0 and req:
                    req[rng.randrange(len(req))] = rng.randrange(256)
                elif kind == 1:
                    at = rng.randrange(len(req) + 1)
                    req[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
                elif req:
                    at = rng.randrange(len(req))
                    del req[at:at + rng.randint(1, 8)]
            method = ("NodePrepareResources", "NodeUnprepareResources")[i // 2 % 2]
            path = (V1, V1BETA1)[i % 2] + method
            try:
                self.svc.unary(path, bytes(req))
                outcomes[grpc.StatusCode.OK] += 1
            except grpc.RpcError as e:
                self.assertIn(e.code(), allowed, "%s %r: %s" % (path, bytes(req), e.details()))
                outcomes[e.code()] += 1
        # both kinds of outcome were reached, or the mutations test nothing
        self.assertGreater(outcomes[grpc.StatusCode.OK], 20, outcomes)
        self.assertGreater(outcomes[grpc.StatusCode.INVALID_ARGUMENT], 20, outcomes)
        self.assertEqual(self.svc.unary(V1 + "NodePrepareResources",
                                        vector("dra-v1_NodePrepareResourcesRequest.bin")),
                         vector("dra-v1_NodePrepareResourcesResponse.bin"))

    def test_health_stream(self):
        self.assertEqual(self.svc.status()["resend_ms"], 15000)  # the default, < 30 s
        self.svc.close()
        self.svc = Service(resend_ms=300)
        call = self.svc.channel.unary_stream(HEALTH)(
            vector("dra-health-v1alpha1_NodeWatchResourcesRequest.bin"), timeout=20)
        want = vector("dra-health-v1alpha1_NodeWatchResourcesResponse.bin")
        t0 = time.monotonic()
        self.assertEqual(next(call), want)  # the complete list at open
        self.assertEqual(self.svc.status()["streams"], 1)
        self.assertEqual(next(call), want)  # unchanged, re-sent
        self.assertGreater(time.monotonic() - t0, 0.25)
        self.svc.cmd("changed")             # unchanged: nothing new sent now
        self.svc.cmd("health gpu-2 1")
        self.svc.cmd("changed")
        changed = next(call)
        self.assertNotEqual(changed, want)
        self.assertIn(b"gpu-2\x10\x01", changed)  # gpu-2 now HEALTHY (field 2 = 1)
        call.cancel()
        for _ in range(100):
            if self.svc.status()["streams"] == 0:
                break
            time.sleep(0.01)
        before = self.svc.status()["health_calls"]
        time.sleep(1.0)  # > 3 re-send periods: no stream, no timer, no snapshot
        self.assertEqual(self.svc.status()["health_calls"], before)

    def test_removed_sockets_are_bound_again(self):
        for path, channel_path in ((self.svc.reg, "reg"), (self.svc.sock, "dra")):
            os.unlink(path)
            for _ in range(500):  # inotify: milliseconds
                if os.path.exists(path):
                    break
                time.sleep(0.002)
            self.assertTrue(os.path.exists(path), path)
            ch = grpc.insecure_channel("unix://" + path)
            if channel_path == "reg":
                self.assertTrue(self.svc.unary(REG + "GetInfo", b"", ch).startswith(
                    field(1, "DRAPlugin")))
            else:
                self.assertEqual(self.svc.unary(V1 + "NodePrepareResources", b"", ch), b"")
            ch.close()
        self.assertEqual(self.svc.cmd("restart"), "rebound 0")  # both are ours again

    def test_fds_and_threads_come_back(self):
        self.svc.unary(V1 + "NodePrepareResources",
                       vector("dra-v1_NodePrepareResourcesRequest.bin"))
        self.svc.cmd("hold 1")
        fut = self.svc.channel.unary_unary(V1 + "NodePrepareResources").future(
            claim(UID_A), timeout=10)
        self.assertEqual(self.svc.line(), "held prepare 1")
        out = self.svc.quit()
        # the kubelet's side hears UNAVAILABLE "server shutting down"
        self.assertEqual(fut.exception(timeout=5).code(), grpc.StatusCode.UNAVAILABLE)
        self.svc.close()
        self.assertEqual(self.svc.returncode, 0)
        self.svc = None
        self.assertEqual(out[0], "cancelled")  # the held call, at free
        fds = out[1].split()
        self.assertEqual(fds[0], "fds")
        self.assertEqual(fds[1], fds[2], "fds before start / after free: %s" % out[1])
        self.assertEqual(fds[4], fds[5], "threads before start / after free: %s" % out[1])


if __name__ == "__main__":
    if sys.argv[1] == "--valgrind":
        sys.argv.pop(1)
        WRAPPER = ["valgrind", "-q", "--leak-check=full",
                   "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=9"]
    BINARY = sys.argv.pop(1)
    unittest.main(verbosity=2)
