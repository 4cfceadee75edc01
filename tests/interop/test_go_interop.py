#!/usr/bin/python3
"""grpc-go (Debian's, dialled exactly like the kubelet) against the real plugin on the
simulator: every RPC answered and checked by an independent implementation."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import scratch  # noqa: E402

BUILD = os.environ["GDP_BUILD_DIR"]
GO_CLIENT = os.path.join(BUILD, "tools", "go-client", "go-client")
PROFILE = os.path.join(os.environ["GDP_TEST_DATA"], "nvml-mock-profiles", "t4.yaml")
UUIDS = [f"GPU-00000074-0000-0000-0000-00000000000{i}" for i in range(4)]
if not os.path.exists(PROFILE):  # a broken checkout: fail, naming the file
    sys.exit("%s: missing fixture %s" % (os.path.basename(__file__), PROFILE))


def main():
    if not os.path.exists(GO_CLIENT):
        print("go-client not built (Debian golang-go / golang-google-grpc-dev missing)")
        return 77
    with scratch.directory("gdp-interop-") as tmp:
        dp = os.path.join(tmp, "dp")
        os.mkdir(dp)
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(BUILD, "sim", "nvml"),
                   MOCK_NVML_CONFIG=PROFILE)
        # No kubelet: the plugin serves its socket and keeps retrying registration.
        plugin = scratch.adopt(subprocess.Popen(
            [os.path.join(BUILD, "src", "gpu-device-plugin"),
             "--kubelet-socket", os.path.join(dp, "kubelet.sock")],
            env=env, stderr=subprocess.PIPE, text=True))
        try:
            sock = os.path.join(dp, "nvidia-gpu.sock")
            deadline = time.monotonic() + 20
            while not os.path.exists(sock):
                if time.monotonic() > deadline or plugin.poll() is not None:
                    print("plugin socket never appeared", file=sys.stderr)
                    return 1
                time.sleep(0.01)
            r = subprocess.run([GO_CLIENT, "interop", sock] + UUIDS, capture_output=True,
                               text=True, timeout=60)
            print(r.stdout, r.stderr)
            if r.returncode != 0 or "interop ok" not in r.stdout:
                return 1
            # Kubelet <= 1.25 style is covered by the Python tests; this is the >= 1.26 dial.
            return 0
        finally:
            plugin.terminate()
            try:
                plugin.wait(timeout=10)
            except subprocess.TimeoutExpired:
                plugin.kill()


if __name__ == "__main__":
    sys.exit(main())
