#!/usr/bin/python3
"""Independent client: drives the real plugin with grpcio only.

The Registration server here is written directly against grpcio (not the test
kubelet), and every DevicePlugin RPC is called with grpcio, so the plugin's gRPC
layer is checked against a real gRPC implementation and not only against itself.
"""
import os
import queue
import signal
import subprocess
import sys
import threading
import unittest
from concurrent import futures

import grpc

SOURCE = os.environ["GDP_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE, "tools", "test-kubelet"))   # dpapi: messages only
sys.path.insert(0, os.path.join(SOURCE, "tests", "integration"))    # profiles, host render
import dpapi  # noqa: E402
import harness  # noqa: E402
import scratch  # noqa: E402  (on the path through harness)

pb = dpapi.pb
TIMEOUT = 20
UNKNOWN_MSG = 'invalid allocation request for "nvidia.com/gpu": invalid request: unknown device: %s'


class Client(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(harness.PLUGIN) or not os.path.exists(harness.SIM_RENDER):
            raise unittest.SkipTest("plugin or simulator not built")
        cls.tmp = t = scratch.mkdtemp("gdp-py-")
        cls.dp = os.path.join(t, "dp")
        os.makedirs(cls.dp)
        r = subprocess.run([harness.SIM_RENDER, "--profile", harness.profile_path("a100"),
                            "--sysfs-root", t + "/sys", "--proc-root", t + "/proc",
                            "--dev-root", t + "/dev"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("nvml-sim-render: " + r.stderr)
        cls.gpus = harness.load_profile("a100")

        # Our own Registration service: records requests, answers Empty.
        cls.registrations = queue.Queue()

        def register(req, context):
            cls.registrations.put(req)
            return pb.Empty()

        handler = grpc.method_handlers_generic_handler("v1beta1.Registration", {
            "Register": grpc.unary_unary_rpc_method_handler(
                register, request_deserializer=pb.RegisterRequest.FromString,
                response_serializer=pb.Empty.SerializeToString)})
        cls.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        cls.server.add_generic_rpc_handlers((handler,))
        cls.server.add_insecure_port("unix:" + os.path.join(cls.dp, "kubelet.sock"))
        cls.server.start()

        env = dict(os.environ, LD_LIBRARY_PATH=harness.SIM_DIR,
                   MOCK_NVML_CONFIG=harness.profile_path("a100"),
                   MOCK_NVML_CONTROL=os.path.join(t, "nvml.ctl"))
        cls.stderr = open(os.path.join(t, "plugin.log"), "w+")
        cls.plugin = scratch.adopt(subprocess.Popen(
            [harness.PLUGIN, "--kubelet-socket", os.path.join(cls.dp, "kubelet.sock"),
             "--sysfs-root", t + "/sys", "--proc-root", t + "/proc", "--dev-root", t + "/dev"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=cls.stderr))
        try:
            cls.register_request = cls.registrations.get(timeout=TIMEOUT)
        except queue.Empty:
            cls.tearDownClass()
            raise RuntimeError("plugin did not register")
        cls.channel = grpc.insecure_channel(
            "unix:" + os.path.join(cls.dp, cls.register_request.endpoint),
            options=[("grpc.default_authority", "localhost")])
        cls.stub = dpapi.PluginStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "channel", None):
            cls.channel.close()
        rc = None
        if getattr(cls, "plugin", None) and cls.plugin.poll() is None:
            cls.plugin.send_signal(signal.SIGTERM)
            try:
                rc = cls.plugin.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                cls.plugin.kill()
                cls.plugin.wait()
        cls.server.stop(None)
        cls.stderr.seek(0)
        log = cls.stderr.read()
        sys.stderr.write("--- plugin stderr (tail)\n" + log[-3000:])
        cls.stderr.close()
        scratch.remove(cls.tmp)
        # A clean stop after all those calls, and no sanitizer report on the way.
        if rc != 0:
            raise AssertionError("plugin exit status after SIGTERM: %r" % rc)
        for mark in harness.Plugin.SANITIZER_MARKS:
            if mark in log:
                raise AssertionError("sanitizer report in plugin stderr")

    def uuids(self):
        return [g["uuid"] for g in self.gpus]

    def test_register_request(self):
        r = self.register_request
        self.assertEqual(r.version, "v1beta1")
        self.assertEqual(r.endpoint, "nvidia-gpu.sock")
        self.assertEqual(r.resource_name, "nvidia.com/gpu")
        self.assertTrue(r.HasField("options"))
        self.assertFalse(r.options.pre_start_required)
        self.assertTrue(r.options.get_preferred_allocation_available)

    def test_options(self):
        o = self.stub.GetDevicePluginOptions(pb.Empty(), timeout=TIMEOUT)
        self.assertFalse(o.pre_start_required)
        self.assertTrue(o.get_preferred_allocation_available)

    def test_list_and_watch(self):
        call = self.stub.ListAndWatch(pb.Empty(), timeout=TIMEOUT)
        first = next(call)
        call.cancel()
        got = {d.ID: d for d in first.devices}
        self.assertEqual(set(got), set(self.uuids()))
        for g in self.gpus:
            d = got[g["uuid"]]
            self.assertEqual(d.health, "Healthy")
            self.assertEqual([n.ID for n in d.topology.nodes], [g["numa"]])

    def test_preferred(self):
        u = self.uuids()
        req = dpapi.preferred_request([{"available": u, "must_include": [u[1]], "size": 3}])
        resp = self.stub.GetPreferredAllocation(req, timeout=TIMEOUT)
        self.assertEqual(len(resp.container_responses), 1)
        ids = list(resp.container_responses[0].deviceIDs)
        self.assertEqual(len(ids), 3)
        self.assertEqual(len(set(ids)), 3)
        self.assertIn(u[1], ids)
        self.assertTrue(set(ids) <= set(u))

    def test_allocate(self):
        u = self.uuids()
        resp = self.stub.Allocate(dpapi.allocate_request([[u[4], u[0]], [u[7]]]), timeout=TIMEOUT)
        self.assertEqual(len(resp.container_responses), 2)
        self.assertEqual(resp.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"], u[4] + "," + u[0])
        self.assertEqual(resp.container_responses[1].envs["NVIDIA_VISIBLE_DEVICES"], u[7])

    def test_allocate_unknown_id(self):
        bad = "GPU-not-a-real-one"
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.Allocate(dpapi.allocate_request([[self.uuids()[0], bad]]), timeout=TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNKNOWN)
        self.assertEqual(cm.exception.details(), UNKNOWN_MSG % bad)

    def test_prestart(self):
        resp = self.stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=self.uuids()[:1]),
                                           timeout=TIMEOUT)
        self.assertEqual(resp.ByteSize(), 0)

    def test_unknown_method(self):
        bogus = self.channel.unary_unary("/v1beta1.DevicePlugin/NoSuchMethod",
                                         request_serializer=pb.Empty.SerializeToString,
                                         response_deserializer=pb.Empty.FromString)
        with self.assertRaises(grpc.RpcError) as cm:
            bogus(pb.Empty(), timeout=TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_concurrent_calls(self):
        # grpcio multiplexes these on one HTTP/2 connection.
        u = self.uuids()
        out = []
        lock = threading.Lock()

        def one(i):
            r = self.stub.Allocate(dpapi.allocate_request([[u[i % 8]]]), timeout=TIMEOUT)
            with lock:
                out.append((i, r.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"]))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(out), [(i, u[i % 8]) for i in range(32)])


if __name__ == "__main__":
    harness.main()
