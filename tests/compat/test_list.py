#!/usr/bin/python3
"""`gpu-device-plugin list` after MIG and sharing: resource → devices → physical GPU,
checked against compat.py's model of what the reference would advertise."""
import json
import os
import subprocess
import unittest

import compat
from compat import harness


class List(unittest.TestCase):
    def listing(self, profile, mig, id_strategy, sharing):
        if not os.path.exists(harness.PLUGIN) or not os.path.exists(harness.SIM_RENDER):
            self.skipTest("plugin or simulator not built")
        c = compat.Case(profile, mig, ("envvar",), id_strategy, sharing)
        c.setup()
        self.addCleanup(c.cleanup)
        if sharing:
            base = compat.expected_resources(c.gpus, c.minors, mig, id_strategy, None)
            names = sorted(base)
            sharing["names"] = names[:-1] if len(names) > 2 else names
        want = compat.expected_resources(c.gpus, c.minors, mig, id_strategy, sharing)
        with open(c.config, "w", encoding="utf-8") as f:
            f.write(c.config_text())
        out = {}
        for fmt in ("json", "text"):
            args = [harness.PLUGIN] + c.args() + ["list"] + (["--output", "json"] if fmt == "json" else [])
            r = subprocess.run(args, env=c.env(), capture_output=True, text=True, timeout=harness.TIMEOUT)
            self.assertEqual(r.returncode, 0, "%s\n%s" % (args, r.stderr))
            out[fmt] = r.stdout
        return want, json.loads(out["json"]), out["text"]

    def check(self, want, doc, text):
        got = {r["resource"]: r for r in doc["resources"]}
        self.assertEqual(sorted(got), sorted(want), doc)
        text_lines = text.splitlines()
        # "Config: ..." (which configuration is listed), then the header, then the rows.
        self.assertTrue(text_lines[0].startswith("Config: flags and --config-file"), text)
        self.assertTrue(text_lines[1].startswith("RESOURCE"), text)
        lines = [l.split() for l in text_lines[2:]]
        for name, devs in want.items():
            self.assertEqual(got[name].get("socket"), compat.resource_socket(name))
            rows = {d["id"]: d for d in got[name]["devices"]}
            self.assertEqual(sorted(rows), sorted(d["id"] for d in devs), name)
            for d in devs:
                row = rows[d["id"]]
                self.assertEqual(row["gpu"], d["gpu"], row)
                self.assertEqual(row["uuid"], d["uuid"], row)
                self.assertEqual(row["index"], d["index"], row)
                self.assertEqual(row["replicas"], d["replicas"], row)
                self.assertEqual(row["numa"], d["numa"], row)
                # Text: RESOURCE ID HEALTH NUMA GPU ...
                mine = [l for l in lines if l[:2] == [name, d["id"]]]
                self.assertEqual(len(mine), 1, "one text row for %s %s in:\n%s" % (name, d["id"], text))
                self.assertEqual(mine[0][4], d["gpu"], mine[0])
        self.assertEqual(len(lines), sum(len(v) for v in want.values()), text)

    def test_mixed_layout_shared_renamed(self):
        self.check(*self.listing("compat-a100-mixed", "mixed", "uuid",
                                 {"kind": "ts", "replicas": 2, "rename": True}))

    def test_single_shared(self):
        self.check(*self.listing("a100-mig-single", "single", "uuid",
                                 {"kind": "ts", "replicas": 3, "rename": False}))

    def test_mixed_index(self):
        self.check(*self.listing("h100-mig", "mixed", "index", None))

    def test_full_gpus_shared_index(self):
        self.check(*self.listing("t4", "none", "index", {"kind": "ts", "replicas": 2, "rename": False}))


if __name__ == "__main__":
    harness.main()
