#!/usr/bin/python3
"""Checks that test-wire notices wrong content: runs it against copies of the
vectors whose manifest was altered one way at a time and expects each run to fail,
naming the altered field."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import scratch  # noqa: E402

WIRE = os.path.join(os.environ["GDP_TEST_DATA"], "deviceplugin-wire")
BIN = os.path.join(os.environ["GDP_BUILD_DIR"], "tests", "wire", "test-wire")
if not os.path.exists(os.path.join(WIRE, "manifest.json")):  # a broken checkout: fail, naming the file
    sys.exit("%s: missing fixture %s" % (os.path.basename(__file__), os.path.join(WIRE, "manifest.json")))


def entry(m, name):
    return next(f for f in m["files"] if f["file"] == name)


MUTATIONS = {
    "numa0-unset": (lambda m: entry(m, "ListAndWatchResponse_gpus.bin")["content"]["devices"][0]
                    .__setitem__("topology", None), "devices[0].topology"),
    "health": (lambda m: entry(m, "ListAndWatchResponse_gpus.bin")["content"]["devices"][2]
               .__setitem__("health", "Healthy"), "devices[2].health"),
    "map-extra-key": (lambda m: entry(m, "AllocateResponse.bin")["content"]["container_responses"][0]
                      ["envs"].__setitem__("EXTRA", "1"), "envs"),
    "map-value": (lambda m: entry(m, "AllocateResponse_nocdi.bin")["content"]["container_responses"][1]
                  ["envs"].__setitem__("NVIDIA_DRIVER_CAPABILITIES", "compute"), "envs"),
    "renamed-field-order": (lambda m: entry(m, "PreStartContainerRequest.bin")["content"]["devicesIDs"]
                            .reverse(), "devices_ids[0]"),
    "bool-default": (lambda m: entry(m, "DevicePluginOptions_none.bin")["content"]
                     .__setitem__("pre_start_required", True), "pre_start_required"),
    "int": (lambda m: entry(m, "PreferredAllocationRequest.bin")["content"]["container_requests"][0]
            .__setitem__("allocation_size", 99), "allocation_size"),
    "unknown-key": (lambda m: entry(m, "Empty.bin")["content"].__setitem__("bogus", 1), "bogus"),
    "missing-file": (lambda m: m["files"].append(
        {"file": "Nope.bin", "message": "v1beta1.Empty", "content": {}}), "Nope.bin"),
}


def main():
    failed = 0
    for name, (mutate, needle) in MUTATIONS.items():
        with scratch.directory("gdp-wire-") as tmp:
            wire = os.path.join(tmp, "deviceplugin-wire")
            shutil.copytree(WIRE, wire)
            with open(os.path.join(wire, "manifest.json")) as f:
                m = json.load(f)
            mutate(m)
            with open(os.path.join(wire, "manifest.json"), "w") as f:
                json.dump(m, f)
            r = subprocess.run([BIN], env=dict(os.environ, GDP_TEST_DATA=tmp),
                               capture_output=True, text=True)
            if r.returncode == 0 or needle not in r.stderr:
                print("FAIL %s: rc=%d, stderr does not name %r:\n%s" % (name, r.returncode, needle, r.stderr))
                failed += 1
            else:
                print("ok %s detected" % name)
    # An extra .bin nobody describes must fail too.
    with scratch.directory("gdp-wire-") as tmp:
        wire = os.path.join(tmp, "deviceplugin-wire")
        shutil.copytree(WIRE, wire)
        open(os.path.join(wire, "Stray.bin"), "wb").close()
        r = subprocess.run([BIN], env=dict(os.environ, GDP_TEST_DATA=tmp), capture_output=True, text=True)
        if r.returncode == 0 or "Stray.bin" not in r.stderr:
            print("FAIL stray file not detected")
            failed += 1
        else:
            print("ok stray .bin detected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
