#!/usr/bin/python3
"""Run gpu-device-plugin on the built-in simulated 8-GPU node against the test kubelet,
and show what the kubelet sees: registration, the device list, one Allocate and one
GetPreferredAllocation. Usage: scripts/demo.py <build dir>"""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build-demo")
src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
tmp = tempfile.mkdtemp(prefix="gdp-demo-")
atexit.register(shutil.rmtree, tmp, True)  # the demo leaves nothing behind
dp = os.path.join(tmp, "device-plugins")
os.makedirs(dp)

# The fake host tree the plugin reads NUMA from, rendered from the simulator's
# built-in node description.
subprocess.run([os.path.join(build, "sim/nvml/nvml-sim-render"),
                "--profile", os.path.join(src, "sim/nvml/default-node.yaml"),
                "--sysfs-root", os.path.join(tmp, "sys")], check=True)

kubelet = subprocess.Popen([sys.executable, os.path.join(src, "tools/test-kubelet/test-kubelet"),
                            "--dir", dp], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def event(name, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = kubelet.stdout.readline()
        if not line:
            break
        ev = json.loads(line)
        if ev["event"] == name:
            return ev
    sys.exit(f"demo: no '{name}' event from the test kubelet")


def send(cmd):
    kubelet.stdin.write(json.dumps(cmd) + "\n")
    kubelet.stdin.flush()


event("serving")
env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "sim/nvml"))
env.pop("MOCK_NVML_CONFIG", None)  # no profile: the simulator's built-in DGX-A100-like node
log = open(os.path.join(tmp, "plugin.log"), "w")
plugin = subprocess.Popen([os.path.join(build, "src/gpu-device-plugin"),
                           "--kubelet-socket", os.path.join(dp, "kubelet.sock"),
                           "--sysfs-root", os.path.join(tmp, "sys")], env=env, stderr=log)
try:
    reg = event("register")
    print(f"1. registered: resource={reg['resource']} endpoint={reg['endpoint']} "
          f"version={reg['version']} options={json.dumps(reg['options'])}")
    devs = event("devices")["devices"]
    print(f"2. ListAndWatch: {len(devs)} devices")
    for d in devs:
        print(f"     {d['id']}  {d['health']:<9}  NUMA {d['numa']}")
    ids = [d["id"] for d in devs]
    send({"cmd": "allocate", "resource": reg["resource"], "containers": [[ids[3]]]})
    alloc = event("allocate")
    print(f"3. Allocate([{ids[3]}]) -> envs {json.dumps(alloc['containers'][0]['envs'])}")
    send({"cmd": "preferred", "resource": reg["resource"],
          "containers": [{"available": ids[:6], "must_include": [ids[5]], "size": 2}]})
    pref = event("preferred")
    print(f"4. GetPreferredAllocation(available=GPUs 0-5, must_include=GPU 5, size=2) -> "
          f"{pref['containers'][0]}")
finally:
    plugin.send_signal(signal.SIGTERM)
    rc = plugin.wait(timeout=10)
    send({"cmd": "quit"})
    kubelet.wait(timeout=10)
    log.close()
print(f"5. plugin stopped on SIGTERM, exit code {rc}; its log: {log.name}")
with open(log.name) as f:
    for line in f:
        if any(k in line for k in ("Registered", "Starting to serve", "Loaded NVML", "Stopped")):
            print("     " + line.rstrip())
sys.exit(rc)
