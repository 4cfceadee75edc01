#!/usr/bin/python3
"""A GPU registered while the NVML event thread sits in its wait gets Xid monitoring
at once, at the DEFAULT health config (waitTimeout 1 h: the wait in progress does not
end by itself during the test). The simulator models the driver conservatively: a
registration made during a wait is not seen by that wait, so the plugin has to start a
new one. The GPU is added by a reload: it is lost when the plugin starts (left out of
the inventory), restored, and found by the discovery of a SIGHUP. Threads, fds and RSS
are counted around it; GPUs added one after another leave at most two old waits behind
(src/health/monitor-wait.c: HM_MAX_OLD), and once those end nothing wakes while idle."""
import os
import re
import signal
import sys
import time

import harness
from test_idle import switches

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "attack"))
import attacklib  # noqa: E402  (threads, fds and RSS around a lifecycle step)

RETARGET_LINE = "Health monitor watching"
MAX_OLD_WAITS = 2   # src/health/monitor-wait.c HM_MAX_OLD
SLICE_S = 1.0       # ... HM_SLICE_MS: the longest a registration can go unseen
# Registration, and the switch to a wait that sees it, take milliseconds; the bound
# leaves room for a loaded CI machine but is far below waitTimeout (1 h).
LATENCY_S = 2.0


class HealthWait(harness.PluginTestCase):
    def start_late(self, n_late, args=()):
        """a100 with its last n_late GPUs lost at start; the plugin runs and lists the
        others, and its thread is in a wait that began after startup. Returns (the GPUs
        listed, the late ones)."""
        with open(harness.profile_path("a100"), encoding="utf-8") as f:
            text = f.read()
        uuids = [g["uuid"] for g in harness.load_profile("a100")]
        late = uuids[-n_late:]
        for uuid in late:
            line = '    uuid: "%s"\n' % uuid
            self.assertIn(line, text)
            text = text.replace(line, line + "    lost: true\n")
        path = os.path.join(self.tmp, "late-gpu")
        with open(path + ".yaml", "w", encoding="utf-8") as f:
            f.write(text)
        self.render(path)
        self.start_kubelet()
        self.ack = os.path.join(self.tmp, "nvml.ack")
        self.start_plugin(args, extra_env={"MOCK_NVML_CONTROL_ACK": self.ack})
        self.kubelet.registered()
        first = uuids[:-n_late]
        self.wait_health(0, lambda h: set(first) <= set(h), "first device list")
        self.assertFalse(set(late) & set(self.health_by_id(0)))
        # An ignored Xid ends the first wait: from here on the thread is in a wait that
        # began before the new GPU exists (1 h).
        log = self.plugin.stderr.mark()
        self.inject_acked("xid %s 43" % first[0])
        self.plugin.wait_log("Skipping event", log)
        time.sleep(0.2)
        return first, late

    def add(self, uuid):
        """The reload adds the GPU; it is registered while a wait is in progress."""
        self.inject_acked("restore %s" % uuid)   # NVML answers for it before the reload
        mark = self.kubelet.events.mark()
        log = self.plugin.stderr.mark()
        self.plugin.signal(signal.SIGHUP)
        self.plugin.wait_log(RETARGET_LINE, log)
        self.wait_health(mark, lambda h: h.get(uuid) == "Healthy", "%s listed" % uuid)

    def end_old_waits(self, uuid, before, what):
        """An Xid on uuid, a GPU every old wait holds: it is Unhealthy, said once (no
        wait forwards it twice), and the old waits are gone (threads, fds, RSS flat)."""
        mark = self.kubelet.events.mark()
        log = self.plugin.stderr.mark()
        self.inject("xid %s 48" % uuid)
        self.wait_health(mark, lambda h: h.get(uuid) == "Unhealthy", "GPU %s out" % uuid)
        after = attacklib.settled(self.plugin.pid, before)
        print("\n%s: before %s, after %s" % (what, before, after))
        attacklib.assert_flat(self, before, after, what=what)
        self.plugin.wait_log("Xid 48", log)
        xid_lines = [l for l in self.plugin.stderr.lines[log:]
                     if re.search(r"%s.*is Unhealthy: Xid 48" % re.escape(uuid), l)]
        self.assertEqual(len(xid_lines), 1, xid_lines)

    def test_gpu_added_mid_wait_is_monitored(self):
        first, (late,) = self.start_late(1)
        before = attacklib.Snapshot(self.plugin.pid)
        self.add(late)

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
        self.end_old_waits(first[1], before, "GPU added mid-wait")

        # The thread still waits at 1 h: exit does not wait for it.
        self.plugin.signal(signal.SIGTERM)
        self.assertEqual(self.plugin.wait_exit(), 0, self.failure_context())

    def test_gpus_added_one_after_another(self):
        first, late = self.start_late(3)
        before = attacklib.Snapshot(self.plugin.pid)
        for i, uuid in enumerate(late):
            self.add(uuid)
            # the third comes while two old waits linger: the current thread waits in
            # slices and sees it at the next one
            time.sleep(SLICE_S)
            mark = self.kubelet.events.mark()
            self.inject("xid %s 48" % uuid)
            self.wait_health_within(mark, uuid, SLICE_S + 1)
            now = attacklib.Snapshot(self.plugin.pid)
            # each addition leaves the wait it interrupted behind, up to MAX_OLD_WAITS
            self.assertEqual(now.threads, before.threads + min(i + 1, MAX_OLD_WAITS),
                             "old waits: before %s, now %s" % (before, now))
        # An event on a GPU every old wait holds ends them all; counted once.
        self.end_old_waits(first[1], before, "3 GPUs added mid-wait")
        # Back to one thread in a 1 h wait: after the last slice, nothing wakes.
        time.sleep(SLICE_S + 0.5)
        t0 = switches(self.plugin.pid)
        time.sleep(3)
        t1 = switches(self.plugin.pid)
        woke = {t: t1[t] - t0.get(t, 0) for t in t1 if t1[t] != t0.get(t, 0)}
        self.assertEqual(woke, {}, "threads that woke while idle (tid: context switches)")

    def acked(self):
        try:
            with open(self.ack, encoding="utf-8") as f:
                return f.read().count("\n")
        except FileNotFoundError:
            return 0

    def test_gpu_lost_during_a_switch_is_watched_again(self):
        # A short quiet period so that the lost GPU is probed soon; waitTimeout default.
        cfg = self.write_config("version: v1\nhealth:\n  quietPeriod: 300ms\n")
        first, (late,) = self.start_late(1, ["--config-file", cfg])
        lost = first[2]
        mark = self.kubelet.events.mark()
        self.inject("lose %s" % lost)
        self.wait_health(mark, lambda h: h.get(lost) == "Unhealthy", "lost GPU out")
        # the new event set cannot take the lost GPU's registration
        self.add(late)
        mark = self.kubelet.events.mark()
        self.inject_acked("restore %s" % lost)
        self.wait_health(mark, lambda h: h.get(lost) == "Healthy", "lost GPU back")
        mark = self.kubelet.events.mark()
        self.inject("xid %s 48" % lost)
        try:
            self.wait_health_within(mark, lost, LATENCY_S * 2)
        except AssertionError:
            self.fail("GPU %s, lost while the event set changed, not watched after it came "
                      "back\n%s" % (lost, self.failure_context()))

    def inject_acked(self, line):
        """Injects and waits until the simulator applied it (one ack line per command;
        every command before it has been seen to take effect)."""
        n = self.acked() + 1
        self.inject(line)
        deadline = time.monotonic() + harness.TIMEOUT
        while self.acked() < n:
            self.assertLess(time.monotonic(), deadline, "simulator did not apply %r" % line)
            time.sleep(0.02)

    def wait_health_within(self, start, uuid, timeout):
        self.kubelet.events.wait_for(
            lambda _e: self.health_by_id(start).get(uuid) == "Unhealthy", start,
            timeout=timeout, what="%s Unhealthy" % uuid)


if __name__ == "__main__":
    harness.main()
