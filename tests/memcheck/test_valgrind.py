#!/usr/bin/python3
"""The real plugin under valgrind memcheck through a whole life: start, register,
ListAndWatch, Allocate (good and unknown IDs), GetPreferredAllocation, an Xid, a kubelet
restart, SIGHUP (unchanged and changed config), SIGTERM. Any memcheck error or definite leak fails the test."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import scratch  # noqa: E402

BUILD = os.environ["GDP_BUILD_DIR"]
SOURCE = os.environ["GDP_SOURCE_DIR"]
PROFILE = os.path.join(os.environ["GDP_TEST_DATA"], "nvml-mock-profiles", "a100.yaml")
if not os.path.exists(PROFILE):  # a broken checkout: fail, naming the file
    sys.exit("%s: missing fixture %s" % (os.path.basename(__file__), PROFILE))


class Kubelet:
    def __init__(self, directory):
        self.proc = scratch.adopt(subprocess.Popen(
            ["/usr/bin/python3", os.path.join(SOURCE, "tools/test-kubelet/test-kubelet"),
             "--dir", directory],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))

    def send(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def wait(self, name, pred=lambda ev: True, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            ev = json.loads(line)
            if ev["event"] == "error":
                raise AssertionError(f"test kubelet: {ev}")
            if ev["event"] == name and pred(ev):
                return ev
        raise AssertionError(f"no {name} event")

    def close(self):
        try:
            self.send(cmd="quit")
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


def main():
    valgrind = shutil.which("valgrind")
    if not valgrind:
        print("valgrind not installed")
        return 77
    tmp = scratch.mkdtemp("gdp-memcheck-")  # removed at exit, whichever way main() ends
    dp = os.path.join(tmp, "dp")
    os.mkdir(dp)
    subprocess.run([os.path.join(BUILD, "sim/nvml/nvml-sim-render"), "--profile", PROFILE,
                    "--sysfs-root", os.path.join(tmp, "sys")], check=True)
    ctl = os.path.join(tmp, "nvml.ctl")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(BUILD, "sim/nvml"),
               MOCK_NVML_CONFIG=PROFILE, MOCK_NVML_CONTROL=ctl)
    log = os.path.join(tmp, "valgrind.log")
    config = os.path.join(tmp, "config.yaml")
    with open(config, "w") as f:
        f.write("version: v1\n")
    kubelet = Kubelet(dp)
    kubelet.wait("serving")
    plugin = scratch.adopt(subprocess.Popen(
        [valgrind, "--quiet", "--error-exitcode=99", "--leak-check=full",
         "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite",
         f"--log-file={log}",
         os.path.join(BUILD, "src/gpu-device-plugin"),
         "--kubelet-socket", os.path.join(dp, "kubelet.sock"),
         "--sysfs-root", os.path.join(tmp, "sys"),
         "--config-file", config],
        env=env, stderr=subprocess.DEVNULL))
    try:
        kubelet.wait("register")
        devs = kubelet.wait("devices")["devices"]
        ids = [d["id"] for d in devs]
        kubelet.send(cmd="allocate", resource="nvidia.com/gpu", containers=[ids[:2], [ids[3]]])
        assert "containers" in kubelet.wait("allocate")
        kubelet.send(cmd="allocate", resource="nvidia.com/gpu", containers=[["GPU-nope"]])
        assert "error" in kubelet.wait("allocate")
        kubelet.send(cmd="preferred", resource="nvidia.com/gpu",
                     containers=[{"available": ids, "must_include": [ids[6]], "size": 4}])
        assert len(kubelet.wait("preferred")["containers"][0]) == 4
        with open(ctl, "w") as f:
            f.write(f"xid {ids[1]} 48\n")
        kubelet.wait("devices", lambda ev: any(d["health"] == "Unhealthy" for d in ev["devices"]))
        kubelet.send(cmd="restart")
        kubelet.wait("register")
        kubelet.wait("devices")
        # An unchanged reload (hitless: nothing registers again), then one that turns
        # time-slicing on (the resource's IDs change: it registers again).
        plugin.send_signal(signal.SIGHUP)
        kubelet.send(cmd="allocate", resource="nvidia.com/gpu", containers=[[ids[0]]])
        assert "containers" in kubelet.wait("allocate")
        with open(config, "w") as f:
            f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                    "    - name: nvidia.com/gpu\n      replicas: 2\n")
        plugin.send_signal(signal.SIGHUP)
        kubelet.wait("register")
        kubelet.wait("devices", lambda ev: any("::" in d["id"] for d in ev["devices"]))
        plugin.send_signal(signal.SIGTERM)
        rc = plugin.wait(timeout=120)
    finally:
        if plugin.poll() is None:
            plugin.kill()
        kubelet.close()
    with open(log) as f:
        report = f.read()
    print(report)
    print("valgrind exit code", rc)
    return 0 if rc == 0 and not report.strip() else 1


if __name__ == "__main__":
    sys.exit(main())
