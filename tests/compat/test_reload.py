#!/usr/bin/python3
"""SIGHUP with a config that became invalid: the plugin keeps serving its previous state
and names the file, line and field; a valid config afterwards is applied (§1.3, §3)."""
import os
import re
import signal

import compat
from compat import harness

RES = "nvidia.com/gpu"
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
TS2 = ("version: v1\n"
       "sharing:\n"
       "  timeSlicing:\n"
       "    resources:\n"
       "    - name: nvidia.com/gpu\n"
       "      replicas: 2\n")
# The bad replacements. Each: (text, regex the error line must match).
GARBAGE = ("version: v1\nflags: {migStrategy: [none\n  ::: }}\n\x00\x01garbage\n", r":\d+(:\d+)?:")
TRUNCATED = (TS2[:TS2.index("replicas")] + "repl", r":\d+(:\d+)?:")
# Cut right after a key: still YAML, but the field has no value.
TRUNCATED_VALUE = (TS2[:TS2.index("replicas") + len("replicas:")],
                   r":5(:\d+)?:.*sharing\.timeSlicing\.resources\[0\].*no replicas specified")
REPLICAS_ONE = (TS2.replace("replicas: 2", "replicas: 1"),
                r":6(:\d+)?:.*sharing\.timeSlicing\.resources\[0\]\.replicas.*number of replicas must be >= 2")


class Reload(harness.PluginTestCase):
    def start(self, text):
        self.config = os.path.join(self.tmp, "config.yaml")
        self.write(text)
        self.render("a100")
        self.start_kubelet()
        self.start_plugin(["--config-file", self.config])
        reg, devs = self.kubelet.registered()
        self.uuids = sorted(g["uuid"] for g in harness.load_profile("a100"))
        return devs

    def write(self, text):
        # Replace atomically, like a ConfigMap symlink swap: never a half-written file.
        tmp = self.config + ".new"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.rename(tmp, self.config)

    def ids(self, devs):
        return sorted(d["id"] for d in devs["devices"])

    def allocate_ok(self, dev_id, want_env):
        got = self.kubelet.call({"cmd": "allocate", "resource": RES, "containers": [[dev_id]]})
        self.assertIn("containers", got, "%r\n%s" % (got, self.failure_context()))
        self.assertEqual(got["containers"][0]["envs"], {"NVIDIA_VISIBLE_DEVICES": want_env}, got)

    def allocate_unknown(self, dev_id):
        got = self.kubelet.call({"cmd": "allocate", "resource": RES, "containers": [[dev_id]]})
        msg = 'invalid allocation request for "%s": invalid request: unknown device: %s' % (RES, dev_id)
        self.assertIn(msg, (got.get("error") or {}).get("message", ""), got)

    def bad_reload(self, bad, old_ids):
        """Replaces the config with `bad`, sends SIGHUP and checks that nothing changed."""
        text, pattern = bad
        ev_mark = self.kubelet.events.mark()
        log_mark = self.plugin.stderr.mark()
        self.write(text)
        self.plugin.signal(signal.SIGHUP)
        name = re.escape(os.path.basename(self.config))
        rx = re.compile(name + pattern)
        _, line = self.plugin.stderr.wait_for(lambda l: rx.search(l) is not None, log_mark,
                                              what="an error line matching %r" % rx.pattern)
        self.assertTrue(self.plugin.alive(), self.failure_context())
        # Still the old state: old IDs allocate, the would-be new ones do not.
        self.allocate_ok(old_ids[0], old_ids[0].split("::")[0])
        # No re-registration with another resource set, no other device list.
        for e in self.kubelet.events.lines[ev_mark:]:
            if e.get("event") == "register":
                self.assertEqual(e["resource"], RES, e)
            if e.get("event") == "devices":
                self.assertEqual(self.ids(e), old_ids, e)
        return line

    def good_reload_to_ts2(self):
        mark = self.kubelet.events.mark()
        self.write(TS2)
        self.plugin.signal(signal.SIGHUP)
        reg, devs = self.kubelet.registered(mark)
        self.assertEqual(reg["endpoint"], "nvidia-gpu.sock")
        want = sorted("%s::%d" % (u, k) for u in self.uuids for k in range(2))
        self.assertEqual(self.ids(devs), want)
        self.allocate_ok(self.uuids[3] + "::1", self.uuids[3])
        self.allocate_unknown(self.uuids[3])

    def check(self, bad):
        devs = self.start(PLAIN)
        self.assertEqual(self.ids(devs), self.uuids)
        line = self.bad_reload(bad, self.uuids)
        self.allocate_unknown(self.uuids[0] + "::0")
        self.good_reload_to_ts2()
        return line

    def test_garbage(self):
        self.check(GARBAGE)

    def test_truncated(self):
        self.check(TRUNCATED)

    def test_truncated_value(self):
        self.check(TRUNCATED_VALUE)

    def test_replicas_one(self):
        self.check(REPLICAS_ONE)

    def test_shared_state_survives_every_bad_kind(self):
        # Start shared; each bad config in turn leaves the ::n state serving.
        devs = self.start(TS2)
        old = sorted("%s::%d" % (u, k) for u in self.uuids for k in range(2))
        self.assertEqual(self.ids(devs), old)
        for bad in (GARBAGE, TRUNCATED, TRUNCATED_VALUE, REPLICAS_ONE):
            self.bad_reload(bad, old)
            self.allocate_unknown(self.uuids[0])
        # Back to unshared: plain UUIDs again.
        mark = self.kubelet.events.mark()
        self.write(PLAIN)
        self.plugin.signal(signal.SIGHUP)
        reg, devs = self.kubelet.registered(mark)
        self.assertEqual(self.ids(devs), self.uuids)
        self.allocate_ok(self.uuids[5], self.uuids[5])


if __name__ == "__main__":
    harness.main()
