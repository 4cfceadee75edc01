#!/usr/bin/python3
"""bench-health: Xid → ListAndWatch latency. Injects N Xids (default 200) through the
simulator's control FIFO, alternating over the GPUs: each one marks a GPU Unhealthy, the
short quiet period brings it back. Measures from the FIFO write to the moment the test
kubelet reports the update with that GPU Unhealthy; prints p50/p99/max.

Usage: bench-health.py [N]   (GDP_BUILD_DIR / GDP_SOURCE_DIR / GDP_TEST_DATA as for
the tests; meson's benchmark() sets them)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
from harness import RESOURCE  # noqa: E402


class Bench(harness.PluginTestCase):
    def runTest(self):
        pass


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    b = Bench()
    b.setUp()
    try:
        b.render("a100")
        b.start_kubelet()
        b.start_plugin(extra_env={"GDP_HEALTH_QUIET_PERIOD": "20ms",
                                  "GDP_HEALTH_MAX_QUIET_PERIOD": "20ms",
                                  "GDP_HEALTH_FLAP_WINDOW": "1ms"})
        b.kubelet.registered()
        uuids = [g["uuid"] for g in harness.load_profile("a100")]
        ev = b.kubelet.events
        lat = []
        for i in range(n):
            u = uuids[i % len(uuids)]
            mark = ev.mark()
            t0 = time.monotonic()
            b.inject("xid %s 94" % u)
            idx, _ = ev.wait_for(lambda e: e.get("event") == "devices" and
                                 e.get("resource") == RESOURCE and
                                 any(d["id"] == u and d["health"] == "Unhealthy"
                                     for d in e["devices"]), mark, what="%s Unhealthy" % u)
            lat.append((time.monotonic() - t0) * 1000.0)
            ev.wait_for(lambda e: e.get("event") == "devices" and
                        e.get("resource") == RESOURCE and
                        all(d["health"] == "Healthy" for d in e["devices"]), idx + 1,
                        what="all Healthy")
        lat.sort()
        pct = lambda p: lat[min(len(lat) - 1, int(round(p / 100.0 * (len(lat) - 1))))]
        print("bench-health: %d Xids, inject -> ListAndWatch Unhealthy: p50 %.3f ms, "
              "p99 %.3f ms, max %.3f ms" % (len(lat), pct(50), pct(99), lat[-1]))
    finally:
        b.doCleanups()


if __name__ == "__main__":
    main()
