"""The C gRPC client (test-grpc-client --peer) against a Debian grpcio server.

usage: test_client_vs_grpcio.py <test-grpc-client>"""
import os
import subprocess
import sys
from concurrent import futures

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import scratch  # noqa: E402


def echo(request, context):
    return request


def fail(request, context):
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad request: ünïcode % 100%\n")


def main():
    client = sys.argv[1]
    tmp = scratch.socket_dir("gdp-grpcio-")  # its socket: sun_path's 108 bytes
    sock = os.path.join(tmp, "peer.sock")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(echo),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo",
                                                                           handlers),))
    server.add_insecure_port("unix://" + sock)
    server.start()
    try:
        rc = subprocess.run([client, "--peer", sock], timeout=60).returncode
    finally:
        server.stop(None)
        scratch.remove(tmp)
    sys.exit(rc)


if __name__ == "__main__":
    main()
