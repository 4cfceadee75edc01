#!/usr/bin/python3
"""Health under what a node does to the plugin, at the plugin's DEFAULT health config
(60 s quiet period, 1 h NVML wait timeout, 2 s unattributed probe delay): reloads must
not leak the event thread or its fds, a GPU falling off the bus must take out only
itself, an event nobody can be blamed for must not keep the innocent out for the quiet
period, and wait errors that stop must clear their marking. Every wait is for an event,
bounded by harness.TIMEOUT; nothing asserts on timing."""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attacklib  # noqa: E402
from attacklib import harness  # noqa: E402
from harness import RESOURCE  # noqa: E402

MIG_PROFILE = os.path.join(harness.SOURCE, "sim", "profiles", "compat-a100-mixed")
MIG_GPU2 = "GPU-c0a7a100-0000-0000-0000-000000000002"
RETARGET_LINE = "Health monitor watching"
RELOADS = 200


class Base(harness.PluginTestCase):
    def start(self, profile="a100", args=(), config=None):
        args = list(args)
        if config is not None:
            args += ["--config-file", self.write_config(config)]
        self.render(profile)
        self.start_kubelet()
        self.mark0 = self.kubelet.events.mark()
        self.start_plugin(args)
        if not profile.startswith("/"):
            self.uuids = [g["uuid"] for g in harness.load_profile(profile)]

    def unhealthy_ever(self, start):
        """Every id reported Unhealthy in any device list since start."""
        out = set()
        for e in self.kubelet.events.lines[start:]:
            if e.get("event") == "devices":
                out |= {d["id"] for d in e["devices"] if d["health"] == "Unhealthy"}
        return out


class Reload(Base):
    def test_sighups_leave_threads_and_fds_flat(self):
        self.start()
        everyone = set(self.uuids)
        self.wait_health(self.mark0, lambda h: everyone <= set(h), "first device list")
        # a never-class Xid before the reloads: health must survive them
        mark = self.kubelet.events.mark()
        self.inject("xid %s 48" % self.uuids[2])
        self.wait_health(mark, lambda h: h.get(self.uuids[2]) == "Unhealthy", "GPU 2 out")
        before = attacklib.Snapshot(self.plugin.pid)

        for i in range(RELOADS):
            log = self.plugin.stderr.mark()
            self.plugin.signal(signal.SIGHUP)
            self.plugin.wait_log(RETARGET_LINE, log)

        # Counted before any event: an event on a GPU would also wake (and end) threads
        # that a leak left waiting on old event sets. settled() lets a registration still
        # in flight after the last reload finish.
        after = attacklib.settled(self.plugin.pid, before)
        print("\n%d SIGHUPs: before %s, after %s" % (RELOADS, before, after))
        attacklib.assert_flat(self, before, after, what="%d SIGHUPs" % RELOADS)

        # The event thread still works at the 1 h wait timeout and still knows GPU 2.
        mark = self.kubelet.events.mark()
        self.inject("xid %s 48" % self.uuids[5])
        h = self.wait_health(mark, lambda h: h.get(self.uuids[5]) == "Unhealthy", "GPU 5 out")
        self.assertEqual({u for u, v in h.items() if v == "Unhealthy"},
                         {self.uuids[2], self.uuids[5]}, "health did not survive the reloads")

        # The thread sits in a 1 h NVML wait: exit must not wait for it.
        self.plugin.signal(signal.SIGTERM)
        self.assertEqual(self.plugin.wait_exit(), 0, self.failure_context())


class LostGpu(Base):
    def test_lost_gpu_marks_only_itself(self):
        self.start()
        lost, sentinel = self.uuids[3], self.uuids[7]
        self.wait_health(self.mark0, lambda h: set(self.uuids) <= set(h), "first device list")
        mark = self.kubelet.events.mark()
        self.inject("lose %s" % lost)     # Xid 79; NVML cannot name the GPU any more
        h = self.wait_health(mark, lambda h: h.get(lost) == "Unhealthy", "lost GPU out")
        self.assertEqual({u for u, v in h.items() if v == "Unhealthy"}, {lost}, h)
        # a later event proves the plugin has handled everything before it
        self.inject("xid %s 48" % sentinel)
        self.wait_health(mark, lambda h: h.get(sentinel) == "Unhealthy", "sentinel out")
        self.assertEqual(self.unhealthy_ever(mark), {lost, sentinel})
        self.plugin.wait_log("GPU %s (index 3) is Unhealthy: Xid 79" % lost)

    def test_lost_gpu_marks_its_replicas_only(self):
        cfg = ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
               "    - name: nvidia.com/gpu\n      replicas: 2\n")
        self.start(config=cfg)
        lost = self.uuids[1]
        self.wait_health(self.mark0, lambda h: len(h) == 2 * len(self.uuids), "replicas listed")
        mark = self.kubelet.events.mark()
        self.inject("lose %s" % lost)
        h = self.wait_health(mark, lambda h: any(k.startswith(lost) and v == "Unhealthy"
                                                 for k, v in h.items()), "replicas out")
        out = {k for k, v in h.items() if v == "Unhealthy"}
        self.assertEqual(out, {k for k in h if k.startswith(lost)}, h)
        self.assertEqual(len(out), 2, h)

    def test_lost_mig_gpu_marks_its_mig_devices_only(self):
        self.start(MIG_PROFILE, args=["--mig-strategy", "mixed"])
        listing = self.run_plugin(["--mig-strategy", "mixed", "--sysfs-root", self.sys_root,
                                   "--proc-root", self.proc_root, "list", "--output", "json"])
        self.assertEqual(listing.returncode, 0, listing.stderr)
        devices = [d for r in json.loads(listing.stdout)["resources"] for d in r["devices"]]
        mine = {d["uuid"] for d in devices if d["gpu"] == MIG_GPU2}
        everyone = {d["uuid"] for d in devices}
        self.assertTrue(mine and everyone - mine, devices)
        self.wait_health(self.mark0, lambda h: everyone <= set(h), "every device listed")
        mark = self.kubelet.events.mark()
        self.inject("lose %s" % MIG_GPU2)
        h = self.wait_health(mark, lambda h: all(h.get(u) == "Unhealthy" for u in mine),
                             "MIG devices of the lost GPU out")
        self.assertEqual({u for u, v in h.items() if v == "Unhealthy"}, mine, h)


class Unattributed(Base):
    def test_innocent_back_after_a_quick_probe(self):
        self.start()
        guilty = self.uuids[5]
        self.wait_health(self.mark0, lambda h: set(self.uuids) <= set(h), "first device list")
        self.inject("probe-fail %s" % guilty)
        mark = self.kubelet.events.mark()
        self.inject("xid-unattributed 94")
        i, _ = self.kubelet.events.wait_for(
            lambda e: e.get("event") == "devices" and all(
                d["health"] == "Unhealthy" for d in e["devices"]), mark, what="all out")
        # back long before the 60 s quiet period: harness.TIMEOUT bounds this wait
        h = self.wait_health(i + 1, lambda h: all(h.get(u) == "Healthy"
                                                  for u in self.uuids if u != guilty),
                             "the innocent back")
        self.assertEqual(h.get(guilty), "Unhealthy", h)
        self.plugin.wait_log("GPU %s (index 5) still Unhealthy" % guilty)


class WaitErrors(Base):
    def test_wait_errors_that_stop_clear_their_marking(self):
        self.start()
        self.wait_health(self.mark0, lambda h: set(self.uuids) <= set(h), "first device list")
        mark = self.kubelet.events.mark()
        self.inject("wait-error UNKNOWN forever")
        i, _ = self.kubelet.events.wait_for(
            lambda e: e.get("event") == "devices" and all(
                d["health"] == "Unhealthy" for d in e["devices"]), mark, what="all out")
        self.inject("wait-error clear")
        # with the 1 h wait timeout this only comes back because failing waits are short
        self.kubelet.events.wait_for(
            lambda e: e.get("event") == "devices" and all(
                d["health"] == "Healthy" for d in e["devices"]), i + 1, what="all back")
        self.plugin.wait_log("NVML event wait works again")


if __name__ == "__main__":
    harness.main()
