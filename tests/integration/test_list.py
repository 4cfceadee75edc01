#!/usr/bin/python3
"""`gpu-device-plugin list`, text and JSON, without a kubelet."""
import json
import os
import socket

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


class ListConfig(harness.PluginTestCase):
    """Which configuration `list` lists, said in its first line and its "config" field."""

    def env(self):
        return self.plugin_env(extra={"GDP_SYSFS_ROOT": self.sys_root})

    def test_per_node_config_off(self):
        self.render("t4")
        r = self.run_plugin(["list"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[0], "Config: flags and --config-file", r.stdout)
        r = self.run_plugin(["list", "--output", "json"], env=self.env())
        self.assertEqual(json.loads(r.stdout)["config"], {
            "name": None, "how": "flags and --config-file", "source": "flags and --config-file",
            "note": None, "file": None})
        # --config-dir without a node name: off, as in serve, and said so.
        r = self.run_plugin(["--config-dir", self.tmp, "list"], env=self.env())
        self.assertEqual(r.stdout.splitlines()[0], "Config: flags and --config-file "
                         "(per-node config (--config-dir %s) off: no node name "
                         "(--node-name, NODE_NAME))" % self.tmp, r.stdout)
        # ... and with a node name that is not a DNS-1123 subdomain: off, said as such.
        r = self.run_plugin(["--config-dir", self.tmp, "--node-name", "N1/../x", "list"],
                            env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[0], "Config: flags and --config-file "
                         "(per-node config (--config-dir %s) off: invalid node name "
                         "(--node-name, NODE_NAME))" % self.tmp, r.stdout)

    def test_api_server_unreachable(self):
        """Per-node config on, nothing listening at the API server's address: one warning
        naming the node and the true cause (connection refused, not a timeout: issue 18
        A6), then the selection without the label. Waits for the API client's request
        deadline, at its default (10 s): there is no option for it."""
        self.render("t4")
        configs = os.path.join(self.tmp, "configs")
        os.mkdir(configs)
        for name in ("default", "other"):
            with open(os.path.join(configs, name), "w") as f:
                f.write("version: v1\n")
        with socket.socket() as s:  # a port nothing listens on once closed
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        kubeconfig = os.path.join(self.tmp, "kubeconfig")
        with open(kubeconfig, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "t",
                       "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
                       "clusters": [{"name": "t", "cluster": {
                           "server": "https://127.0.0.1:%d" % port,
                           "insecure-skip-tls-verify": True}}],
                       "users": [{"name": "t", "user": {"token": "x"}}]}, f)
        r = self.run_plugin(["--kubeconfig", kubeconfig, "--node-name", "n1", "--config-dir",
                             configs, "list", "--output", "json"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        warn = [l for l in r.stderr.splitlines() if "Node n1 not read from the API server" in l]
        self.assertEqual(len(warn), 1, r.stderr)
        self.assertTrue(warn[0].startswith("W"), warn[0])
        self.assertIn("Connection refused", warn[0])
        config = json.loads(r.stdout)["config"]
        self.assertEqual((config["name"], config["how"]), ("default", "fallback named"), config)
        self.assertEqual(config["note"], "node label nvidia.com/device-plugin.config not read: "
                         "Connection refused", config)


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
