#!/usr/bin/python3
"""`gpu-device-plugin list`, text and JSON, without a kubelet."""
import json
import os

import harness


class List(harness.PluginTestCase):
    def env(self):
        return self.plugin_env(extra={"GDP_SYSFS_ROOT": self.sys_root})

    def test_text(self):
        self.render("a100")
        r = self.run_plugin(["list"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        for g in harness.load_profile("a100"):
            mine = [l for l in lines if g["uuid"] in l.split()]
            self.assertEqual(len(mine), 1, "one line for %s in:\n%s" % (g["uuid"], r.stdout))
            line = mine[0]
            self.assertTrue(line.startswith("nvidia.com/gpu"), line)
            self.assertIn("Healthy", line.split())
            self.assertIn(str(g["numa"]), line.split())
            self.assertIn(g["name"], line)
            self.assertIn("%d MiB" % (g["memory"] // (1 << 20)), line)

    def test_json(self):
        self.render("h100")
        r = self.run_plugin(["list", "--output", "json"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        rows = list(device_rows(doc))
        gpus = {g["uuid"]: g for g in harness.load_profile("h100")}
        self.assertEqual(sorted(row["id"] for _, row in rows), sorted(gpus), doc)
        for resource, row in rows:
            g = gpus[row["id"]]
            self.assertEqual(resource, "nvidia.com/gpu", row)
            self.assertEqual(row.get("health"), "Healthy", row)
            self.assertIn(row.get("numa"), (g["numa"], [g["numa"]]), row)
            self.assertEqual(row.get("name"), g["name"], row)
            memory = [v for k, v in row.items() if k.startswith("memory")]
            self.assertEqual(len(memory), 1, row)
            if isinstance(memory[0], int):
                self.assertEqual(memory[0], g["memory"], row)

    def test_json_equals_flag_form(self):
        self.render("t4")
        a = self.run_plugin(["list", "--output", "json"], env=self.env())
        b = self.run_plugin(["list", "--output=json"], env=self.env())
        self.assertEqual(a.returncode, 0, a.stderr)
        self.assertEqual(json.loads(a.stdout), json.loads(b.stdout))


def device_rows(doc, resource=None):
    """(resource, row) for every device row (an object with "id"), wherever it is
    nested; a row's resource is its own "resource" or the nearest enclosing one."""
    if isinstance(doc, dict):
        resource = doc.get("resource", resource)
        if "id" in doc:
            yield resource, doc
            return
        for v in doc.values():
            yield from device_rows(v, resource)
    elif isinstance(doc, list):
        for v in doc:
            yield from device_rows(v, resource)


class ListLive(harness.PluginTestCase):
    """With a plugin serving, `list` shows its live health and the reason."""

    def test_live_health_and_reason(self):
        self.start_all("t4")
        uuids = [g["uuid"] for g in harness.load_profile("t4")]
        mark = self.kubelet.events.mark()
        self.inject("xid %s 48" % uuids[2])
        self.kubelet.events.wait_for(
            lambda e: e.get("event") == "devices" and any(
                d["id"] == uuids[2] and d["health"] == "Unhealthy" for d in e["devices"]),
            mark, what="GPU 2 Unhealthy")
        r = self.run_plugin(["--kubelet-socket", os.path.join(self.dp, "kubelet.sock"),
                             "--sysfs-root", self.sys_root, "list", "--output", "json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        devs = {d["id"]: d for res in json.loads(r.stdout)["resources"] for d in res["devices"]}
        self.assertEqual(devs[uuids[2]]["health"], "Unhealthy", devs)
        self.assertIn("Xid 48", devs[uuids[2]]["reason"])
        self.assertTrue(all(devs[u]["health"] == "Healthy" for u in uuids if u != uuids[2]), devs)


if __name__ == "__main__":
    harness.main()
