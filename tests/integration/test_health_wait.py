#!/usr/bin/python3
"""A GPU registered while the NVML event thread sits in its wait gets Xid monitoring
at once, at the DEFAULT health config (waitTimeout 1 h: the wait in progress does not
end by itself during the test). The simulator models the driver conservatively: a
registration made during a wait is not seen by that wait, so the plugin has to start a
new one. The GPU is added by a reload: it is lost when the plugin starts (left out of
the inventory), restored, and found by the discovery of a SIGHUP. Threads, fds and RSS
are counted around it."""
import os
import re
import signal
import sys
import time

import harness

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "attack"))
import attacklib  # noqa: E402  (threads, fds and RSS around a lifecycle step)

RETARGET_LINE = "Health monitor watching"
# Registration, and the switch to a wait that sees it, take milliseconds; the bound
# leaves room for a loaded CI machine but is far below waitTimeout (1 h).
LATENCY_S = 2.0


class HealthWait(harness.PluginTestCase):
    def late_gpu_profile(self):
        """a100 with its last GPU lost at start; returns (profile, that GPU's UUID)."""
        with open(harness.profile_path("a100"), encoding="utf-8") as f:
            text = f.read()
        uuid = harness.load_profile("a100")[-1]["uuid"]
        line = '    uuid: "%s"\n' % uuid
        self.assertIn(line, text)
        path = os.path.join(self.tmp, "late-gpu")
        with open(path + ".yaml", "w", encoding="utf-8") as f:
            f.write(text.replace(line, line + "    lost: true\n"))
        return path, uuid

    def test_gpu_added_mid_wait_is_monitored(self):
        profile, late = self.late_gpu_profile()
        self.render(profile)
        self.start_kubelet()
        self.ack = os.path.join(self.tmp, "nvml.ack")
        self.start_plugin(extra_env={"MOCK_NVML_CONTROL_ACK": self.ack})
        self.kubelet.registered()
        first = [g["uuid"] for g in harness.load_profile("a100")][:-1]
        self.wait_health(0, lambda h: set(first) <= set(h), "first device list")
        self.assertNotIn(late, self.health_by_id(0))
        # An ignored Xid ends the first wait: from here on the thread is in a wait that
        # began before the new GPU exists (1 h).
        log = self.plugin.stderr.mark()
        self.inject("xid %s 43" % first[0])
        self.plugin.wait_log("Skipping event", log)
        time.sleep(0.2)
        before = attacklib.Snapshot(self.plugin.pid)

        # The reload adds the GPU; it is registered while that wait is in progress.
        self.inject("restore %s" % late)
        self.wait_acks(2)   # the Xid 43 and the restore: the GPU answers before the reload
        mark = self.kubelet.events.mark()
        log = self.plugin.stderr.mark()
        self.plugin.signal(signal.SIGHUP)
        self.plugin.wait_log(RETARGET_LINE, log)
        self.wait_health(mark, lambda h: h.get(late) == "Healthy", "the new GPU listed")

        mark = self.kubelet.events.mark()
        t0 = time.monotonic()
        self.inject("xid %s 48" % late)
        try:
            self.wait_health_within(mark, late, LATENCY_S * 2)
        except AssertionError:
            self.fail("GPU %s registered mid-wait not Unhealthy %.0fs after Xid 48 (the "
                      "wait in progress does not see it)\n%s" % (late, LATENCY_S * 2,
                                                                 self.failure_context()))
        took = time.monotonic() - t0
        print("\nXid on the GPU added mid-wait: Unhealthy after %.3fs" % took)
        self.assertLess(took, LATENCY_S)

        # An event on a GPU of the first wait ends it: that thread forwards nothing
        # twice and is gone; threads and fds are back at their count.
        mark = self.kubelet.events.mark()
        log = self.plugin.stderr.mark()
        self.inject("xid %s 48" % first[1])
        self.wait_health(mark, lambda h: h.get(first[1]) == "Unhealthy", "GPU 1 out")
        after = attacklib.settled(self.plugin.pid, before)
        print("GPU added mid-wait: before %s, after %s" % (before, after))
        attacklib.assert_flat(self, before, after, what="GPU added mid-wait")
        self.plugin.wait_log("Xid 48", log)
        xid_lines = [l for l in self.plugin.stderr.lines[log:]
                     if re.search(r"%s.*is Unhealthy: Xid 48" % re.escape(first[1]), l)]
        self.assertEqual(len(xid_lines), 1, xid_lines)

        # The thread still waits at 1 h: exit does not wait for it.
        self.plugin.signal(signal.SIGTERM)
        self.assertEqual(self.plugin.wait_exit(), 0, self.failure_context())

    def wait_acks(self, n):
        """Until the simulator has applied n control commands (one ack line each)."""
        deadline = time.monotonic() + harness.TIMEOUT
        while True:
            try:
                with open(self.ack, encoding="utf-8") as f:
                    if f.read().count("\n") >= n:
                        return
            except FileNotFoundError:
                pass
            self.assertLess(time.monotonic(), deadline, "simulator did not apply %d commands" % n)
            time.sleep(0.02)

    def wait_health_within(self, start, uuid, timeout):
        self.kubelet.events.wait_for(
            lambda _e: self.health_by_id(start).get(uuid) == "Unhealthy", start,
            timeout=timeout, what="%s Unhealthy" % uuid)


if __name__ == "__main__":
    harness.main()
