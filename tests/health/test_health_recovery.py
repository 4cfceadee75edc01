#!/usr/bin/python3
"""Health that recovers, end to end: the real plugin, the simulated NVML (faults through
its control FIFO) and the test kubelet. Quiet periods are set short through GDP_HEALTH_*
so nothing sleeps for long; every wait is for an event, bounded by a timeout."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
from harness import RESOURCE  # noqa: E402

FAST = {
    "GDP_HEALTH_QUIET_PERIOD": "200ms",
    "GDP_HEALTH_MAX_QUIET_PERIOD": "800ms",
    "GDP_HEALTH_FLAP_WINDOW": "1m",
    "GDP_HEALTH_WAIT_TIMEOUT": "100ms",
    "GDP_HEALTH_WAIT_ERROR_THRESHOLD": "3",
}


class Base(harness.PluginTestCase):
    def start(self, profile="a100", args=(), extra_env=None, config=None):
        env = dict(FAST)
        env.update(extra_env or {})
        args = list(args)
        if config is not None:
            args += ["--config-file", self.write_config(config)]
        self.render(profile)
        self.start_kubelet()
        self.start_plugin(args, extra_env=env)
        self.kubelet.registered()
        self.uuids = [g["uuid"] for g in harness.load_profile(profile)]

    def wait_devices(self, start, pred, what):
        """Waits for a ListAndWatch update whose {id: health} map satisfies pred."""
        def match(e):
            return (e.get("event") == "devices" and e.get("resource") == RESOURCE and
                    pred({d["id"]: d["health"] for d in e["devices"]}))
        i, ev = self.kubelet.events.wait_for(match, start, what=what)
        return i, {d["id"]: d["health"] for d in ev["devices"]}

    def health_of(self, uuid):
        return lambda h: h.get(uuid)

    def assertNever(self, start, uuid, state, what):
        for e in self.kubelet.events.lines[start:]:
            if e.get("event") == "devices" and e.get("resource") == RESOURCE:
                for d in e["devices"]:
                    if d["id"] == uuid:
                        self.assertNotEqual(d["health"], state, "%s: %s" % (what, e))


class Recovery(Base):
    def test_recovers_after_quiet_period(self):
        self.start()
        u = self.uuids[1]
        mark = self.kubelet.events.mark()
        self.inject("xid %s 94" % u)  # contained ECC: recover class
        i, h = self.wait_devices(mark, lambda h: h.get(u) == "Unhealthy", "%s Unhealthy" % u)
        self.assertEqual(sum(1 for v in h.values() if v == "Unhealthy"), 1, h)
        _, h = self.wait_devices(i + 1, lambda h: h.get(u) == "Healthy", "%s Healthy again" % u)
        self.assertTrue(all(v == "Healthy" for v in h.values()), h)
        self.plugin.wait_log("is Healthy again")

    def test_probe_failure_keeps_it_out(self):
        self.start()
        u = self.uuids[2]
        self.inject("probe-fail %s" % u)
        mark = self.kubelet.events.mark()
        self.inject("xid %s 94" % u)
        i, _ = self.wait_devices(mark, lambda h: h.get(u) == "Unhealthy", "%s Unhealthy" % u)
        # Several probes fail (the log says so) and it stays out meanwhile.
        log_mark = self.plugin.stderr.mark()
        self.plugin.wait_log("probe failed", log_mark)
        self.plugin.wait_log("probe failed", self.plugin.stderr.mark())
        self.assertNever(i + 1, u, "Healthy", "came back although the probe fails")
        self.inject("probe-ok %s" % u)
        self.wait_devices(i + 1, lambda h: h.get(u) == "Healthy", "%s Healthy after probe-ok" % u)

    def test_never_class_stays_out(self):
        self.start()
        u, other = self.uuids[3], self.uuids[4]
        mark = self.kubelet.events.mark()
        self.inject("xid %s 48" % u)  # DBE: never
        i, _ = self.wait_devices(mark, lambda h: h.get(u) == "Unhealthy", "%s Unhealthy" % u)
        # A recover-class Xid on another GPU goes and comes back in the meantime,
        # well past several quiet periods; the DBE GPU stays out throughout.
        self.inject("xid %s 94" % other)
        j, _ = self.wait_devices(i + 1, lambda h: h.get(other) == "Unhealthy", "other out")
        self.wait_devices(j + 1, lambda h: h.get(other) == "Healthy", "other back")
        self.inject("xid %s 94" % other)
        j, _ = self.wait_devices(j + 1, lambda h: h.get(other) == "Unhealthy", "other out again")
        self.wait_devices(j + 1, lambda h: h.get(other) == "Healthy", "other back again")
        self.assertNever(i, u, "Healthy", "never-class GPU came back")

    def test_lost_gpu_until_restored(self):
        self.start()
        u = self.uuids[5]
        mark = self.kubelet.events.mark()
        self.inject("lose %s" % u)   # Xid 79 and NVML stops answering for it
        i, _ = self.wait_devices(mark, lambda h: h.get(u) == "Unhealthy", "%s lost" % u)
        self.plugin.wait_log("probe failed", self.plugin.stderr.mark())
        self.assertNever(i + 1, u, "Healthy", "lost GPU came back while lost")
        self.inject("restore %s" % u)
        self.wait_devices(i + 1, lambda h: h.get(u) == "Healthy", "%s restored" % u)

    def test_flapping_is_damped(self):
        # 1s base so the doubling is visible in whole seconds in the reason text
        self.start(extra_env={"GDP_HEALTH_QUIET_PERIOD": "1s", "GDP_HEALTH_MAX_QUIET_PERIOD": "4s"})
        u = self.uuids[6]
        mark = self.kubelet.events.mark()
        for n, quiet in enumerate(("1s", "2s", "4s")):
            log = self.plugin.stderr.mark()
            self.inject("xid %s 94" % u)
            mark, _ = self.wait_devices(mark, lambda h: h.get(u) == "Unhealthy", "out %d" % n)
            self.plugin.wait_log("Unhealthy: Xid 94 (contained ECC error), probe after %s quiet"
                                 % quiet, log)
            mark, _ = self.wait_devices(mark + 1, lambda h: h.get(u) == "Healthy", "back %d" % n)


class Scope(Base):
    def test_all_replicas_marked(self):
        cfg = ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
               "    - name: nvidia.com/gpu\n      replicas: 3\n")
        self.start(config=cfg)
        u = self.uuids[0]
        mark = self.kubelet.events.mark()
        self.inject("xid %s 48" % u)
        _, h = self.wait_devices(mark, lambda h: any(k.startswith(u) and v == "Unhealthy"
                                                    for k, v in h.items()), "replicas out")
        replicas = {k: v for k, v in h.items() if k.startswith(u)}
        self.assertEqual(len(replicas), 3, h)
        self.assertTrue(all(v == "Unhealthy" for v in replicas.values()), replicas)
        others = {k: v for k, v in h.items() if not k.startswith(u)}
        self.assertTrue(others and all(v == "Healthy" for v in others.values()), others)

    def test_ignored_xids_ignored(self):
        self.start()
        mark = self.kubelet.events.mark()
        for i, code in enumerate((13, 31, 43, 45, 68, 109)):
            self.inject("xid %s %d" % (self.uuids[i], code))
        self.inject("xid %s 48" % self.uuids[7])
        self.wait_devices(mark, lambda h: h.get(self.uuids[7]) == "Unhealthy", "sentinel")
        for u in self.uuids[:6]:
            self.assertNever(mark, u, "Unhealthy", "ignored Xid marked a device")
        # stderr is read by its own thread, which may lag the kubelet's: wait for the lines
        start = 0
        for _ in range(6):
            i, _line = self.plugin.stderr.wait_for(lambda l: "Skipping event Xid" in l, start,
                                                   what="a 'Skipping event Xid' line")
            start = i + 1
        self.assertEqual(self.plugin.stderr.text().count("Skipping event Xid"), 6)

    def test_env_enable_acts_on_default_ignored(self):
        self.start(extra_env={"DP_ENABLE_HEALTHCHECKS": "13"})
        u = self.uuids[0]
        mark = self.kubelet.events.mark()
        self.inject("xid %s 13" % u)
        self.wait_devices(mark, lambda h: h.get(u) == "Unhealthy", "Xid 13 acted on")


class WaitErrors(Base):
    def test_transient_wait_errors_do_not_mark(self):
        self.start()
        mark = self.kubelet.events.mark()
        self.inject("wait-error UNKNOWN 2")
        # A sentinel after the errors: once it shows, the errors were consumed.
        self.inject("xid %s 48" % self.uuids[7])
        self.wait_devices(mark, lambda h: h.get(self.uuids[7]) == "Unhealthy", "sentinel")
        for u in self.uuids[:7]:
            self.assertNever(mark, u, "Unhealthy", "transient wait error marked devices")

    def test_persistent_wait_errors_mark_all_then_recover(self):
        self.start()
        mark = self.kubelet.events.mark()
        self.inject("wait-error UNKNOWN forever")
        i, h = self.wait_devices(mark, lambda h: h and all(v == "Unhealthy" for v in h.values()),
                                 "all Unhealthy")
        self.plugin.wait_log("NVML event wait failing")
        self.inject("wait-error clear")
        self.wait_devices(i + 1, lambda h: h and all(v == "Healthy" for v in h.values()),
                          "all Healthy again")


class ConfigErrors(Base):
    def run_with(self, config=None, env=None):
        self.render("a100")
        args = []
        if config is not None:
            args += ["--config-file", self.write_config(config)]
        self.start_kubelet()
        return self.start_plugin(args, extra_env=env)

    def test_bad_xid_list_in_file(self):
        p = self.run_with(config="version: v1\nhealth:\n  xids:\n    recover: [48, abc]\n")
        p.wait_log("config.yaml:2: health.xids.recover: item 2: not an Xid number: \"abc\"")
        self.assertNotEqual(p.wait_exit(), 0)

    def test_bad_env(self):
        p = self.run_with(env={"GDP_HEALTH_QUIET_PERIOD": "soon"})
        p.wait_log("GDP_HEALTH_QUIET_PERIOD: invalid duration \"soon\"")
        self.assertNotEqual(p.wait_exit(), 0)


if __name__ == "__main__":
    harness.main()
