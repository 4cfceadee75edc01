#!/usr/bin/python3
"""Device IDs as the kubelet and the container runtime see them.

- --device-id-strategy=index never changes the IDs the kubelet sees: ListAndWatch,
  Allocate, GetPreferredAllocation, health updates and `list` use UUIDs (MIG UUIDs,
  "<uuid>::<k>" replicas); only what the runtime is told is an index
  (NVIDIA_VISIBLE_DEVICES=0,3, volume-mount paths, CDI names, "<gpu>:<slot>" for MIG)
  (nvidia-plugin-behavior.md §4.1 "ID (kubelet)" vs "Index", §5).
- GetPreferredAllocation for more devices than available: the greedy policy (MIG,
  replicas) fails like the reference, the aligned one (full GPUs) answers empty; a huge
  allocation_size is answered, not allocated; an unknown must-include ID is refused by name.
- An NVML UUID that is not a plain identifier ("GPU-...,all") is left out with one
  error line naming it; the other GPUs are served.
"""
import json
import os

import harness
from harness import RESOURCE

MIXED = os.path.join(harness.SOURCE, "sim", "profiles", "compat-a100-mixed")
UNSAFE = os.path.join(harness.SOURCE, "tests", "integration", "profiles", "unsafe-uuid")
NOT_ENOUGH = ("error getting list of preferred allocation devices: "
              "not enough available devices to satisfy allocation")
INT32_MAX = 2**31 - 1


class DeviceIds(harness.PluginTestCase):
    def ids_of(self, devices_event):
        return sorted(d["id"] for d in devices_event["devices"])

    def allocate(self, resource, ids):
        r = self.kubelet.call({"cmd": "allocate", "resource": resource, "containers": [ids]})
        self.assertNotIn("error", r, r)
        return r["containers"][0]

    def preferred(self, resource, available, must, size):
        return self.kubelet.call({"cmd": "preferred", "resource": resource, "containers": [
            {"available": available, "must_include": must, "size": size}]})

    def test_index_strategy_full_gpus(self):
        uuids = [g["uuid"] for g in harness.load_profile("a100")]
        _, devs = self.start_all("a100", ["--device-id-strategy", "index",
                                          "--device-list-strategy", "envvar,cdi-cri",
                                          "--cdi-spec-dir", os.path.join(self.tmp, "cdi")])
        self.assertEqual(self.ids_of(devs), sorted(uuids))

        c = self.allocate(RESOURCE, [uuids[3], uuids[0]])
        self.assertEqual(sorted(c["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")), ["0", "3"])
        self.assertEqual(sorted(c["cdi_devices"]),
                         ["k8s.device-plugin.nvidia.com/gpu=0", "k8s.device-plugin.nvidia.com/gpu=3"])
        with open(os.path.join(self.tmp, "cdi", "k8s.device-plugin.nvidia.com-gpu.json"),
                  encoding="utf-8") as f:
            names = {d["name"] for d in json.load(f)["devices"]}
        self.assertLessEqual({"0", "3"}, names)

        # An index is not a kubelet ID.
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE, "containers": [["3"]]})
        self.assertEqual(r.get("error", {}).get("message"),
                         'invalid allocation request for "nvidia.com/gpu": invalid request: unknown device: 3')

        # Preferred answers name UUIDs only.
        r = self.preferred(RESOURCE, uuids, [uuids[6]], 4)
        self.assertNotIn("error", r, r)
        self.assertEqual(len(r["containers"][0]), 4)
        self.assertLessEqual(set(r["containers"][0]), set(uuids))

        # Health updates name the UUID.
        start = self.kubelet.events.mark()
        self.inject("xid %s 48" % uuids[5])
        ev = self.kubelet.wait("devices", start, resource=RESOURCE)
        bad = [d["id"] for d in ev["devices"] if d["health"] == "Unhealthy"]
        self.assertEqual(bad, [uuids[5]])

        # `list` shows the kubelet's IDs, and the index beside them.
        out = self.run_plugin(["--device-id-strategy", "index", "--sysfs-root", self.sys_root,
                               "--proc-root", self.proc_root, "list", "--output", "json"])
        self.assertEqual(out.returncode, 0, out.stderr)
        listed = json.loads(out.stdout)["resources"][0]["devices"]
        self.assertEqual([(d["id"], d["index"]) for d in listed],
                         [(u, str(i)) for i, u in enumerate(uuids)])

    def test_index_strategy_replicas(self):
        uuids = [g["uuid"] for g in harness.load_profile("t4")]
        cfg = os.path.join(self.tmp, "ts.yaml")
        with open(cfg, "w", encoding="utf-8") as f:
            f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                    "    - name: nvidia.com/gpu\n      replicas: 2\n")
        _, devs = self.start_all("t4", ["--device-id-strategy", "index", "--config-file", cfg,
                                        "--device-list-strategy", "volume-mounts"])
        want = sorted("%s::%d" % (u, k) for u in uuids for k in range(2))
        self.assertEqual(self.ids_of(devs), want)
        c = self.allocate(RESOURCE, ["%s::1" % uuids[2], "%s::0" % uuids[2]])
        self.assertEqual(c["envs"]["NVIDIA_VISIBLE_DEVICES"], "/var/run/nvidia-container-devices")
        self.assertEqual([m["container_path"] for m in c["mounts"]], ["/var/run/nvidia-container-devices/2"])

        r = self.preferred(RESOURCE, want, [], 3)
        self.assertNotIn("error", r, r)
        self.assertLessEqual(set(r["containers"][0]), set(want))
        r = self.preferred(RESOURCE, want[:2], [], INT32_MAX)
        self.assertEqual(r.get("error"), {"code": "UNKNOWN", "message": NOT_ENOUGH})

    def test_index_strategy_mig(self):
        self.render(MIXED)
        args = ["--mig-strategy", "mixed", "--device-id-strategy", "index"]
        out = self.run_plugin(args + ["--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                                      "list", "--output", "json"])
        self.assertEqual(out.returncode, 0, out.stderr)
        res = {r["resource"]: r["devices"] for r in json.loads(out.stdout)["resources"]}
        one_g = res["nvidia.com/mig-1g.5gb"]
        self.assertTrue(all(d["id"].startswith("MIG-") and d["id"] == d["uuid"] for d in one_g), one_g)

        self.start_kubelet()
        self.start_plugin(args + ["--device-list-strategy", "envvar,volume-mounts"])
        got = self.kubelet.call({"cmd": "wait-devices", "resource": "nvidia.com/mig-1g.5gb",
                                 "count": len(one_g), "timeout": harness.TIMEOUT}, timeout=harness.TIMEOUT + 5)
        self.assertEqual(self.ids_of(got), sorted(d["uuid"] for d in one_g))
        c = self.allocate("nvidia.com/mig-1g.5gb", [one_g[0]["uuid"]])
        self.assertEqual([m["container_path"] for m in c["mounts"]],
                         ["/var/run/nvidia-container-devices/" + one_g[0]["index"]])
        self.assertRegex(one_g[0]["index"], r"^\d+:\d+$")

        # More than available: the greedy policy's error, exactly as the reference words it.
        ids = [d["uuid"] for d in one_g]
        r = self.preferred("nvidia.com/mig-1g.5gb", ids, [], len(ids) + 1)
        self.assertEqual(r.get("error"), {"code": "UNKNOWN", "message": NOT_ENOUGH})
        r = self.preferred("nvidia.com/mig-1g.5gb", ids, [], INT32_MAX)
        self.assertEqual(r.get("error"), {"code": "UNKNOWN", "message": NOT_ENOUGH})
        r = self.preferred("nvidia.com/mig-1g.5gb", ids, [ids[1]], 2)
        self.assertEqual(r.get("containers", [[None]])[0][:1], [ids[1]], r)
        self.assertTrue(self.plugin.alive())

    def test_preferred_impossible_full_gpus(self):
        uuids = [g["uuid"] for g in harness.load_profile("a100")]
        self.start_all("a100")
        # Aligned policy: the reference's empty answers, also for INT32_MAX.
        for size in (9, INT32_MAX, 0, -1):
            r = self.preferred(RESOURCE, uuids, [], size)
            self.assertEqual(r.get("containers"), [[]], "size %d: %r" % (size, r))
        # An unknown must-include ID is refused by name, never echoed into the answer.
        bogus = "GPU-00000000-dead-beef-0000-000000000000"
        r = self.preferred(RESOURCE, uuids, [bogus], 2)
        self.assertEqual(r.get("error", {}).get("code"), "UNKNOWN", r)
        self.assertEqual(r["error"]["message"], "error getting list of preferred allocation devices: "
                         "unknown must-include device: " + bogus)
        self.assertTrue(self.plugin.alive())

    def test_unsafe_uuid_left_out(self):
        prof = harness.load_profile(UNSAFE)
        unsafe = [g["uuid"] for g in prof if "," in g["uuid"]]
        safe = [g["uuid"] for g in prof if "," not in g["uuid"]]
        self.assertEqual(len(unsafe), 1)
        _, devs = self.start_all(UNSAFE)
        self.assertEqual(self.ids_of(devs), sorted(safe))
        _, line = self.plugin.wait_log(unsafe[0])
        self.assertIn("left out", line)
        self.assertRegex(line, r"^E\d{4} ")
        c = self.allocate(RESOURCE, safe)
        self.assertEqual(c["envs"]["NVIDIA_VISIBLE_DEVICES"], ",".join(safe))
        self.assertEqual(self.plugin.stderr.text().count(unsafe[0]), 1, "one line names it")
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE, "containers": [[unsafe[0]]]})
        self.assertEqual(r.get("error", {}).get("code"), "UNKNOWN", r)


if __name__ == "__main__":
    harness.main()
