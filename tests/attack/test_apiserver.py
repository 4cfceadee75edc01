#!/usr/bin/python3
"""A hostile or merely busy API server against the real plugin with per-node config on
(issue 18 A1, A4, A6): tests/kube's fake API server (TLS + HTTP/2) streams Nodes the
field selector does not match, a foreign Node with another label, deletes and re-creates
the plugin's own Node; and a NODE_NAME that is no Node's name. Default timeouts; the
figures measured are printed.

usage: test_apiserver.py <fake-apiserver>"""
import json
import os
import signal
import sys
import time

import attacklib
import harness
from harness import RESOURCE

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
import kubetest as kt  # noqa: E402

FAKE = None
KEY = kt.CONFIG_LABEL
TS = kt.TS_CONFIG
FLOOD = 50000
RSS_LIMIT_KIB = 24 * 1024
APPLIED = "Applied per-node config "
FOREIGN = "ignoring an object named"


def vm_kib(pid, field):
    with open("/proc/%d/status" % pid, encoding="utf-8") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (field, pid))


class HostileApiServer(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        if not FAKE or not os.path.exists(FAKE):
            self.skipTest("fake API server not built")
        self.render("t4")
        self.ngpus = len(harness.load_profile("t4"))
        self.srv, self.kubeconfig, self.configs = kt.fake_apiserver(
            self, FAKE, {"default": "version: v1\n", "ts": TS})
        self.cmd("add n1")
        self.cmd("label n1 %s=ts" % KEY)

    def cmd(self, line, timeout=kt.WAIT):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0], timeout=timeout)

    def start(self, node="n1", wrap=()):
        """The plugin serving the ts config (4 replicas per GPU) read from the label."""
        self.start_kubelet()
        self.start_plugin(["--kubeconfig", self.kubeconfig, "--node-name", node,
                           "--config-dir", self.configs, "--events=false", "-v", "0"],
                          extra_env={"GDP_SYSFS_ROOT": self.sys_root}, wrap=wrap)
        _, devs = self.kubelet.registered()
        return devs

    def allocate(self):
        ids = [d["id"] for d in self.kubelet.call(
            {"cmd": "wait-devices", "resource": RESOURCE, "count": 0})["devices"]]
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE, "containers": [ids[:1]]})
        self.assertNotIn("error", r, r)
        return r

    def settle(self):
        """Every event sent so far is on the wire, and the plugin had a moment to read it."""
        self.cmd("bookmark")
        time.sleep(1.0)

    def test_flood_of_other_nodes_is_bounded(self):
        """50,000 ADDED events of Nodes the field selector does not match: the watch keeps
        none, says so once, the config stays, RSS stays under 24 MiB, Allocate works."""
        self.start()
        self.plugin.wait_log(APPLIED)
        mark = self.plugin.stderr.mark()
        ev_mark = self.kubelet.events.mark()
        base = vm_kib(self.plugin.pid, "VmRSS")
        t0 = time.monotonic()
        self.cmd("flood %d other" % FLOOD, timeout=180)
        sent_s = time.monotonic() - t0
        self.settle()
        self.allocate()
        rss, hwm = vm_kib(self.plugin.pid, "VmRSS"), vm_kib(self.plugin.pid, "VmHWM")
        warned = self.plugin.stderr.count(lambda l: FOREIGN in l, mark)
        switches = self.plugin.stderr.count(lambda l: APPLIED in l, mark)
        regs = self.kubelet.count("register", ev_mark, resource=RESOURCE)
        print("flood: %d foreign Nodes in %.1f s; RSS %d KiB before, %d KiB after, peak %d KiB "
              "(limit %d); foreign-object warnings %d; config switches %d; registrations %d" %
              (FLOOD, sent_s, base, rss, hwm, RSS_LIMIT_KIB, warned, switches, regs))
        self.assertEqual(warned, 1, self.plugin.stderr.text()[-3000:])
        self.assertEqual((switches, regs), (0, 0))
        if not attacklib.sanitized(self.plugin.pid):
            self.assertLess(hwm, RSS_LIMIT_KIB)
        self.assertTrue(self.plugin.alive())

    def test_insecure_skip_tls_verify_is_said(self):
        """A kubeconfig with insecure-skip-tls-verify: true works (as kubectl's does) but
        says once, at start, that the server's certificate is not checked; with the CA
        given instead, nothing is said."""
        self.start()
        self.plugin.wait_log(APPLIED)
        self.assertEqual(self.plugin.stderr.count(lambda l: "insecure-skip-tls-verify" in l), 0)
        self.plugin.signal(signal.SIGTERM)
        self.assertEqual(self.plugin.wait_exit(), 0)
        with open(self.kubeconfig) as f:
            doc = json.load(f)
        cluster = doc["clusters"][0]["cluster"]
        del cluster["certificate-authority"]
        cluster["insecure-skip-tls-verify"] = True
        with open(self.kubeconfig, "w") as f:
            json.dump(doc, f)
        self.start_plugin(["--kubeconfig", self.kubeconfig, "--node-name", "n1",
                           "--config-dir", self.configs, "--events=false", "-v", "0"],
                          extra_env={"GDP_SYSFS_ROOT": self.sys_root})
        self.plugin.wait_log(APPLIED)
        said = [l for l in self.plugin.stderr.lines if "insecure-skip-tls-verify" in l]
        print("insecure-skip-tls-verify: %r" % said)
        self.assertEqual(len(said), 1, self.plugin.stderr.text()[-3000:])
        self.assertEqual(said[0][:1], "W", said)

    def test_foreign_node_label_is_not_ours(self):
        """other-1 with another config label, sent on the own Node's watch: the plugin's
        label and config stay; its own Node's next change still counts."""
        self.start()
        self.plugin.wait_log(APPLIED)
        mark = self.plugin.stderr.mark()
        ev_mark = self.kubelet.events.mark()
        self.cmd("inject ADDED other-1 %s=default" % KEY)
        self.cmd("inject MODIFIED other-1")
        self.cmd("inject DELETED other-1")
        self.settle()
        labels = self.plugin.stderr.count(lambda l: "Node label " in l, mark)
        switches = self.plugin.stderr.count(lambda l: APPLIED in l, mark)
        regs = self.kubelet.count("register", ev_mark, resource=RESOURCE)
        print("foreign other-1: label lines %d, config switches %d, registrations %d" %
              (labels, switches, regs))
        self.assertEqual((labels, switches, regs), (0, 0, 0), self.plugin.stderr.text()[-3000:])
        self.allocate()
        # The own Node still drives it.
        self.cmd("label n1 %s=default" % KEY)
        self.plugin.wait_log(APPLIED + "default", mark)

    def test_node_deleted_and_recreated_keeps_the_config(self):
        """The own Node deleted and re-created 2.5 s later with the same label: no config
        switch, no registration; the new object gets the annotations back."""
        self.start()
        self.plugin.wait_log(APPLIED)
        self.srv.expect(r"^patch n1 ")
        mark = self.plugin.stderr.mark()
        ev_mark = self.kubelet.events.mark()
        self.cmd("delete n1")
        self.settle()
        time.sleep(1.5)  # re-created 2.5 s after the delete
        deleted = self.plugin.stderr.count(lambda l: "Node n1 deleted" in l, mark)
        self.cmd("add n1")
        self.srv.expect(r"^patch n1 ")  # the re-created Node is annotated again
        self.settle()
        switches = self.plugin.stderr.count(lambda l: APPLIED in l, mark)
        regs = self.kubelet.count("register", ev_mark, resource=RESOURCE)
        print("Node delete + re-create (same label): config switches %d, registrations %d, "
              "'deleted' lines %d" % (switches, regs, deleted))
        self.assertEqual((switches, regs, deleted), (0, 0, 1), self.plugin.stderr.text()[-3000:])
        self.allocate()
        # A re-created Node that says otherwise is followed.
        self.cmd("label n1 %s=default" % KEY)
        self.plugin.wait_log(APPLIED + "default", mark)

    def test_config_dir_checked_without_inotify(self):
        """inotify_init1 fails (the user's instances used up): one warning per watcher,
        and a ConfigMap update of the selected config (the kubelet's ..data swap) is still
        applied, found by the directory check every 10 s (the ConfigMap volume's atomic
        swap changes the directory, a rename the file's inode)."""
        sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "integration"))
        import test_lifecycle as tl
        if not tl.no_inotify_possible():
            self.skipTest("no user namespaces here (unshare --user)")
        devs = self.start(wrap=tl.NO_INOTIFY)
        self.plugin.wait_log(APPLIED)
        self.assertEqual(len(devs["devices"]), 4 * self.ngpus)
        mark = self.plugin.stderr.mark()
        ev_mark = self.kubelet.events.mark()
        t0 = time.monotonic()
        tmp = os.path.join(self.configs, ".ts.new")  # replaced as a whole, atomically
        with open(tmp, "w") as f:
            f.write(TS.replace("replicas: 4", "replicas: 2"))
        os.rename(tmp, os.path.join(self.configs, "ts"))
        self.plugin.wait_log(APPLIED, mark, timeout=30)
        _, devs = self.kubelet.registered(ev_mark)
        took = time.monotonic() - t0
        warned = [l for l in self.plugin.stderr.lines if "max_user_instances" in l]
        print("without inotify: config update applied after %.1f s (check every 10 s); "
              "warnings %d" % (took, len(warned)))
        self.assertEqual(len(devs["devices"]), 2 * self.ngpus, devs)
        self.assertEqual(len(warned), 2, warned)  # kubelet directory, config directory
        self.assertLess(took, 25)

    def test_bad_node_name_turns_the_api_off_and_serves(self):
        """NODE_NAME that is no DNS-1123 subdomain: one error line naming it (escaped),
        no API request, the device plugin serves the flags' config."""
        bad = "N1/../x\x01"
        self.start_kubelet()
        self.start_plugin(["--kubeconfig", self.kubeconfig, "--config-dir", self.configs,
                           "--events=true", "-v", "0"],
                          extra_env={"GDP_SYSFS_ROOT": self.sys_root, "NODE_NAME": bad})
        _, devs = self.kubelet.registered()
        self.allocate()
        self.settle()
        text = self.plugin.stderr.text()
        errors = [l for l in text.splitlines() if l.startswith("E")]
        named = [l for l in errors if "Invalid node name" in l]
        reqs = [l for l in self.srv.seen + self.srv.pending if l.startswith("req ")]
        print("bad NODE_NAME: error lines %d (%r), API requests %d, devices served %d" %
              (len(errors), named[:1], len(reqs), len(devs["devices"])))
        self.assertEqual(len(named), 1, text)
        self.assertEqual(len(errors), 1, text)
        self.assertIn(r"N1/../x\x01", named[0])
        self.assertEqual(reqs, [])
        self.assertEqual(len(devs["devices"]), self.ngpus, devs)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        FAKE = sys.argv.pop(1)
    harness.main()
