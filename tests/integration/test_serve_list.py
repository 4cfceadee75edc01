#!/usr/bin/python3
"""`serve` and `list` build the node state through one function (state/node-state.c):
for the same node and config they advertise exactly the same resources and device IDs,
or refuse with exactly the same error. Checked on every simulator profile and NVIDIA's
mock profiles, under each MIG strategy and both device-ID strategies."""
import glob
import json
import os
import re

import harness
from test_list import device_rows

PROFILES = sorted(
    glob.glob(os.path.join(harness.PROFILES, "*.yaml")) +
    glob.glob(os.path.join(harness.SOURCE, "sim", "profiles", "*.yaml")))
CONFIGS = [
    [],
    ["--mig-strategy", "mixed"],
    ["--mig-strategy", "single"],
    ["--mig-strategy", "mixed", "--device-id-strategy", "index"],
]
ERROR_LINE = re.compile(r"^E\d{4} [^\]]*\] (.*)$")


class ServeList(harness.PluginTestCase):
    def listed(self, args):
        env = self.plugin_env(extra={"GDP_SYSFS_ROOT": self.sys_root,
                                     "GDP_PROC_ROOT": self.proc_root})
        r = self.run_plugin(["list", "--output", "json"] + args, env=env)
        if r.returncode != 0:
            return None, [m.group(1) for m in map(ERROR_LINE.match, r.stderr.splitlines()) if m]
        out = {}
        for resource, row in device_rows(json.loads(r.stdout)):
            out.setdefault(resource, []).append(row["id"])
        return {k: sorted(v) for k, v in out.items()}, []

    def served(self, args, resources):
        self.start_kubelet()
        plugin = self.start_plugin(args)
        if not resources:
            code = plugin.wait_exit()
            plugin.stderr._thread.join(10)      # every line read before comparing
            return None, [m.group(1) for m in map(ERROR_LINE.match, plugin.stderr.lines) if m], code
        out = {}
        for res in resources:
            r = self.kubelet.call({"cmd": "wait-devices", "resource": res, "count": 1})
            self.assertNotIn("error", r, "%s: %s\n%s" % (res, r, self.failure_context()))
            out[res] = sorted(d["id"] for d in r["devices"])
        return out, [], None

    def test_every_profile(self):
        # A required IMEX channel that does not exist: serve refuses; list must too.
        imex = os.path.join(self.tmp, "imex.yaml")
        with open(imex, "w") as f:
            f.write("version: v1\nimex:\n  channelIDs: [7]\n  required: true\n")
        configs = CONFIGS + [["--config-file", imex]]
        checked = 0
        for path in PROFILES:
            name = path[:-len(".yaml")]          # harness joins it onto its directory
            for args in configs:
                with self.subTest(profile=os.path.basename(path), args=args):
                    self.render(name)
                    want, list_errors = self.listed(args)
                    got, serve_errors, code = self.served(args, want)
                    if want is None:
                        self.assertEqual(code, 1, "list refused but serve did not exit 1")
                        self.assertEqual(serve_errors, list_errors)
                    else:
                        self.assertEqual(got, want)
                    self.plugin.finish()
                    self.kubelet.stop()
                    checked += 1
        print("%d profile x config cases" % checked)


if __name__ == "__main__":
    harness.main()
