"""The gRPC server against Debian's grpcio client (raw bytes, no generated stubs).

usage: test_grpc_interop.py <grpc-test-server>"""
import concurrent.futures
import signal
import sys
import unittest

import grpc

import grpctest

BINARY = None


class Interop(unittest.TestCase):
    def setUp(self):
        self.srv = grpctest.Server(BINARY, "--max-message", 1024 * 1024)

    def tearDown(self):
        self.assertEqual(self.srv.stop(), 0)

    def code_of(self, fn):
        with self.assertRaises(grpc.RpcError) as cm:
            fn()
        return cm.exception.code(), cm.exception.details()

    def test_unary_echo(self):
        self.assertEqual(self.srv.unary("Unary", b"hello"), b"hello")
        self.assertEqual(self.srv.unary("Unary", b""), b"")

    def test_error_status_and_percent_decoded_message(self):
        code, details = self.code_of(lambda: self.srv.unary("Fail", b"x"))
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(details, "bad request: ünïcode % 100%\n")

    def test_unknown_method(self):
        code, details = self.code_of(lambda: self.srv.unary("Nope", b"x"))
        self.assertEqual(code, grpc.StatusCode.UNIMPLEMENTED)
        self.assertIn("/test.Echo/Nope", details)

    def test_oversize_declared_length(self):
        ch = self.srv.open_channel([("grpc.max_send_message_length", 64 * 1024 * 1024)])
        code, _ = self.code_of(lambda: self.srv.unary("Unary", b"x" * (2 * 1024 * 1024),
                                                      channel=ch))
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        # The connection survives and serves the next call.
        self.assertEqual(self.srv.unary("Unary", b"again", channel=ch), b"again")
        ch.close()

    def test_compressed_request_refused(self):
        code, _ = self.code_of(lambda: self.srv.unary("Unary", b"z" * 1000,
                                                      compression=grpc.Compression.Gzip))
        self.assertEqual(code, grpc.StatusCode.UNIMPLEMENTED)

    def test_large_request_and_reply_cross_windows(self):
        req = bytes(i % 253 for i in range(256 * 1024))
        self.assertEqual(self.srv.unary("Unary", req), req)
        reply = self.srv.unary("Big", b"%d" % (900 * 1024))
        self.assertEqual(reply, bytes(i % 251 for i in range(900 * 1024)))

    def test_streaming_receipt(self):
        msgs = list(self.srv.channel.unary_stream("/test.Echo/Stream")(bytes([5, 0]), timeout=10))
        self.assertEqual(msgs, [b"msg %d" % i for i in range(5)])
        st = self.srv.wait_stats(lambda s: s["closed"] == 1, "stream closed once")
        self.assertEqual(st["opened"], 1)

    def test_stream_refused_by_handler(self):
        call = self.srv.channel.unary_stream("/test.Echo/Refuse")(b"x", timeout=10)
        code, details = self.code_of(lambda: list(call))
        self.assertEqual(code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(details, "refused")
        self.assertEqual(self.srv.stats()["closed"], 0)

    def test_stream_cancelled_by_client(self):
        call = self.srv.channel.unary_stream("/test.Echo/Stream")(bytes([3, 1]), timeout=30)
        got = [next(call) for _ in range(3)]
        self.assertEqual(got, [b"msg 0", b"msg 1", b"msg 2"])
        self.assertEqual(self.srv.stats()["closed"], 0)
        call.cancel()
        st = self.srv.wait_stats(lambda s: s["closed"] == 1, "stream_closed after cancel")
        self.assertEqual(st["opened"], 1)
        self.assertIn("stream-closed 1", self.srv.output())

    def test_unary_while_stream_open_on_same_connection(self):
        call = self.srv.channel.unary_stream("/test.Echo/Stream")(bytes([1, 1]), timeout=30)
        self.assertEqual(next(call), b"msg 0")
        self.assertEqual(self.srv.unary("Unary", b"side"), b"side")
        call.cancel()

    def test_200_concurrent_calls(self):
        stub = self.srv.channel.unary_unary("/test.Echo/Unary")
        futures = [stub.future(b"call-%d" % i, timeout=30) for i in range(200)]
        for i, f in enumerate(futures):
            self.assertEqual(f.result(), b"call-%d" % i)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda i: self.srv.unary("Unary", b"t%d" % i), range(200)))
        self.assertEqual(results, [b"t%d" % i for i in range(200)])

    def test_authority_is_socket_path(self):
        # kubelet <= 1.25 (grpc-go with a custom dialer) sends the socket path.
        ch = self.srv.open_channel([("grpc.default_authority", self.srv.sock)])
        self.assertEqual(self.srv.unary("Unary", b"old kubelet", channel=ch), b"old kubelet")
        ch.close()

    def test_shutdown_sends_unavailable_to_open_streams(self):
        call = self.srv.channel.unary_stream("/test.Echo/Stream")(bytes([1, 1]), timeout=30)
        self.assertEqual(next(call), b"msg 0")
        self.srv.proc.send_signal(signal.SIGTERM)
        code, _ = self.code_of(lambda: next(call))
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.srv.proc.wait(timeout=20), 0)
        self.assertIn("exit opened=1 closed=1", self.srv.output())


if __name__ == "__main__":
    BINARY = sys.argv.pop(1)
    unittest.main(verbosity=2)
