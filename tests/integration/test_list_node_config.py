#!/usr/bin/python3
"""`list` with per-node configuration on, against the fake API server (tests/kube): it
reads the Node's label once and lists the config serve would select (cluster-select.h's
rules), and says which, in the text's first line and the JSON's "config" object.

usage: test_list_node_config.py <fake-apiserver>"""
import json
import os
import shutil
import sys

import harness

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
import kubetest as kt  # noqa: E402

FAKE = None
KEY = kt.CONFIG_LABEL
TS = kt.TS_CONFIG


class ListNodeConfig(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        if not FAKE or not os.path.exists(FAKE):
            self.skipTest("fake API server not built")
        self.render("t4")
        self.ngpus = len(harness.load_profile("t4"))
        self.srv, self.kubeconfig, self.configs = kt.fake_apiserver(
            self, FAKE, {"default": "version: v1\n", "ts": TS})
        self.cmd("add n1")

    def cmd(self, line):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0])

    def list(self, *extra):
        env = self.plugin_env(extra={"GDP_SYSFS_ROOT": self.sys_root})
        r = self.run_plugin(["--kubeconfig", self.kubeconfig, "--node-name", "n1",
                             "--config-dir", self.configs, "list"] + list(extra), env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def rows(self, doc):
        return [d for res in doc["resources"] for d in res["devices"]]

    def test_label_names_the_config(self):
        self.cmd("label n1 %s=ts" % KEY)
        r = self.list()
        self.assertEqual(r.stdout.splitlines()[0], "Config: ts (node label %s=ts)" % KEY, r.stdout)
        self.srv.expect(r"^req GET /api/v1/nodes/n1 Bearer tok1 ")
        doc = json.loads(self.list("--output", "json").stdout)
        self.assertEqual(doc["config"], {
            "name": "ts", "how": "node label", "source": "node label %s=ts" % KEY, "note": None,
            "file": os.path.join(self.configs, "ts")}, doc["config"])
        # What is listed is that config: 4 replicas of each GPU.
        self.assertEqual(len(self.rows(doc)), 4 * self.ngpus, doc)
        self.assertTrue(all(d["replicas"] == 4 for d in self.rows(doc)), doc)

    def test_a_config_directory_of_any_size(self):
        """Issue 18, A5: more than 256 files turned per-node config off (8 devices instead
        of the labelled config's replicas). A ConfigMap can hold thousands of keys."""
        for i in range(10000):
            with open(os.path.join(self.configs, "c%05d" % i), "w") as f:
                f.write("version: v1\n")
        self.cmd("label n1 %s=ts" % KEY)
        doc = json.loads(self.list("--output", "json").stdout)
        self.assertEqual((doc["config"]["name"], doc["config"]["how"]), ("ts", "node label"),
                         doc["config"])
        self.assertEqual(len(self.rows(doc)), 4 * self.ngpus, doc)

    def test_no_label_is_the_fallback(self):
        r = self.list()
        self.assertEqual(r.stdout.splitlines()[0], "Config: default (fallback named)", r.stdout)
        doc = json.loads(self.list("--output", "json").stdout)
        self.assertEqual((doc["config"]["name"], doc["config"]["how"], doc["config"]["note"]),
                         ("default", "fallback named", None), doc["config"])
        self.assertEqual(len(self.rows(doc)), self.ngpus, doc)

    def test_unknown_name_is_the_default_with_the_note(self):
        self.cmd("label n1 %s=nope" % KEY)
        note = 'config "nope" named by node label %s does not exist in %s' % (KEY, self.configs)
        r = self.list()
        self.assertEqual(r.stdout.splitlines()[0],
                         "Config: default (fallback named; %s)" % note, r.stdout)
        doc = json.loads(self.list("--output", "json").stdout)
        self.assertEqual(doc["config"], {
            "name": "default", "how": "fallback named", "source": "fallback named",
            "note": note, "file": os.path.join(self.configs, "default")}, doc["config"])
        self.assertEqual(len(self.rows(doc)), self.ngpus, doc)
        # --config-default picks it then, as in serve.
        r = self.list("--config-default", "ts")
        self.assertEqual(r.stdout.splitlines()[0], "Config: ts (default; %s)" % note, r.stdout)

    def test_node_not_found_warns_and_selects_without_the_label(self):
        self.cmd("delete n1")
        r = self.list()
        warn = [l for l in r.stderr.splitlines() if "Node n1 not read from the API server" in l]
        self.assertEqual(len(warn), 1, r.stderr)
        self.assertIn("HTTP 404", warn[0])
        self.assertTrue(r.stdout.splitlines()[0].startswith(
            "Config: default (fallback named; node label %s not read: HTTP 404" % KEY), r.stdout)

    def test_selected_config_rejected_lists_the_flags_config(self):
        with open(os.path.join(self.configs, "bad"), "w") as f:
            f.write("version: v1\nflags:\n  migStrategy: bogus\n")
        self.cmd("label n1 %s=bad" % KEY)
        r = self.list()
        self.assertIn("Config bad (node label %s=bad) rejected" % KEY, r.stderr)
        first = r.stdout.splitlines()[0]
        self.assertTrue(first.startswith("Config: flags and --config-file (per-node config bad "
                                         "(node label %s=bad) rejected: " % KEY), first)
        self.assertIn("migStrategy", first)

    def test_serve_and_list_say_the_same(self):
        """serve's log line, its annotations and `list` describe the selection in the same
        words (cluster_selection_describe)."""
        self.cmd("label n1 %s=ts" % KEY)
        self.start_kubelet()
        p = self.start_plugin(["--kubeconfig", self.kubeconfig, "--node-name", "n1",
                               "--config-dir", self.configs, "--events=false"],
                              extra_env={"GDP_SYSFS_ROOT": self.sys_root})
        _, line = p.wait_log("Applied per-node config ")
        served = line.split("Applied per-node config ", 1)[1]
        self.assertEqual(served, "ts (node label %s=ts)" % KEY, line)
        patch = json.loads(self.srv.expect(r"^patch n1 (.*)$").group(1))
        self.assertEqual(patch["metadata"]["annotations"], {
            "gpu-device-plugin.github.io/config": "ts",
            "gpu-device-plugin.github.io/config-source": "node label %s=ts" % KEY}, patch)
        r = self.list()
        self.assertEqual(r.stdout.splitlines()[0], "Config: " + served, r.stdout)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        FAKE = sys.argv.pop(1)
    harness.main()
