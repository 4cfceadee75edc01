#!/usr/bin/python3
"""`gpu-device-plugin list`, text and JSON, without a kubelet."""
import json

import harness


class List(harness.PluginTestCase):
    def env(self):
        return self.plugin_env(extra={"GDP_SYSFS_ROOT": self.sys_root})

    def test_text(self):
        self.render("a100")
        r = self.run_plugin(["list"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        gpus = harness.load_profile("a100")
        for g in gpus:
            self.assertIn(g["uuid"], r.stdout)
        self.assertIn("nvidia.com/gpu", r.stdout)
        self.assertIn(gpus[0]["name"], r.stdout)

    def test_json(self):
        self.render("h100")
        r = self.run_plugin(["list", "--output", "json"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        rows = find_rows(doc)
        gpus = {g["uuid"]: g for g in harness.load_profile("h100")}
        self.assertEqual({row["id"] for row in rows}, set(gpus), doc)
        for row in rows:
            g = gpus[row["id"]]
            self.assertEqual(row.get("resource"), "nvidia.com/gpu", row)
            self.assertEqual(row.get("health"), "Healthy", row)
            numa = row.get("numa")
            self.assertIn(numa, (g["numa"], [g["numa"]]), row)
            self.assertEqual(row.get("name"), g["name"], row)
            self.assertIn("memory", row)
            self.assertTrue(row["memory"], row)

    def test_json_equals_flag_form(self):
        self.render("t4")
        a = self.run_plugin(["list", "--output", "json"], env=self.env())
        b = self.run_plugin(["list", "--output=json"], env=self.env())
        self.assertEqual(a.returncode, 0, a.stderr)
        self.assertEqual(json.loads(a.stdout), json.loads(b.stdout))


def find_rows(doc):
    """The device rows, whether the document is a list or an object holding one."""
    if isinstance(doc, list) and all(isinstance(x, dict) and "id" in x for x in doc):
        return doc
    if isinstance(doc, dict):
        for v in doc.values():
            rows = find_rows(v)
            if rows:
                return rows
    if isinstance(doc, list):
        out = []
        for v in doc:
            out.extend(find_rows(v) or [])
        return out
    return []


if __name__ == "__main__":
    harness.main()
