#!/usr/bin/python3
"""The metrics and probe listener of the real plugin (--metrics-address): the scrape
parses (python3-prometheus-client) and its counters move with Allocate,
GetPreferredAllocation, Xids, registrations and reloads; /healthz and /readyz; HTTP
behaviour (HEAD, 404, 405, keep-alive, Connection: close); a bad address or a port in use
is one error line and the plugin still serves the kubelet; off by default."""
import http.client
import os
import socket
import time

import harness
from harness import RESOURCE
from metricsclient import Scrape, get, logged_port, read_all, scrape

P = "gpu_device_plugin_"
ADDR = ["--metrics-address", "127.0.0.1:0"]


def listening_tcp_inodes():
    """Socket inodes in LISTEN state, IPv4 and IPv6."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as f:
            next(f)
            for line in f:
                cols = line.split()
                if cols[3] == "0A":
                    out.add(cols[9])
    return out


class Scrapes(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.start_all("a100", ADDR)
        self.port = logged_port(self.plugin)
        self.uuids = [g["uuid"] for g in harness.load_profile("a100")]

    def test_rpc_counters_and_histograms(self):
        s = scrape(self.port)
        self.assertEqual(s.value(P + "build_info"), 1.0)
        self.assertEqual(s.value(P + "registered", resource=RESOURCE), 1.0)
        self.assertEqual(s.value(P + "registrations_total", resource=RESOURCE, outcome="ok"), 1.0)
        self.assertEqual(s.value(P + "allocate_requests_total", resource=RESOURCE), 0.0)
        self.assertGreaterEqual(s.value(P + "grpc_connections", resource=RESOURCE), 1.0)
        self.assertEqual(s.families[P + "allocate_duration_seconds"].type, "histogram")

        ok = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE,
                                "containers": [[self.uuids[0]]]})
        self.assertNotIn("error", ok, ok)
        bad = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE,
                                 "containers": [["GPU-no-such-device"]]})
        self.assertIn("error", bad, bad)
        pref = self.kubelet.call({"cmd": "preferred", "resource": RESOURCE, "containers": [
            {"available": self.uuids, "must_include": [], "size": 2}]})
        self.assertNotIn("error", pref, pref)

        s = scrape(self.port)
        self.assertEqual(s.value(P + "allocate_requests_total", resource=RESOURCE), 2.0)
        self.assertEqual(s.value(P + "allocate_errors_total", resource=RESOURCE), 1.0)
        self.assertEqual(s.value(P + "allocate_duration_seconds_count", resource=RESOURCE), 2.0)
        self.assertEqual(s.value(P + "allocate_duration_seconds_bucket", resource=RESOURCE,
                                 le="+Inf"), 2.0)
        self.assertGreater(s.value(P + "allocate_duration_seconds_sum", resource=RESOURCE), 0.0)
        self.assertEqual(s.value(P + "preferred_allocation_requests_total", resource=RESOURCE),
                         1.0)
        self.assertEqual(s.value(P + "preferred_allocation_errors_total", resource=RESOURCE), 0.0)
        self.assertEqual(s.value(P + "preferred_allocation_duration_seconds_count",
                                 resource=RESOURCE), 1.0)

    def test_xid_counts_and_device_gauges(self):
        s = scrape(self.port)
        self.assertEqual(len(s.matching(P + "device_healthy", resource=RESOURCE)), 8)
        self.assertEqual(s.value(P + "device_healthy", device=self.uuids[2]), 1.0)
        self.assertEqual(s.value(P + "device_last_xid", device=self.uuids[2]), 0.0)
        start = self.kubelet.events.mark()
        self.inject("xid %s 48" % self.uuids[2])
        self.inject("xid %s 13" % self.uuids[3])  # ignored by policy: counted, no health change
        self.inject("xid %s 48" % self.uuids[4])
        self.wait_health(start, lambda h: h.get(self.uuids[4]) == "Unhealthy", "GPU 4 Unhealthy")
        s = scrape(self.port)
        self.assertEqual(s.value(P + "xid_events_total", code="48"), 2.0)
        self.assertEqual(s.value(P + "xid_events_total", code="13"), 1.0)
        self.assertEqual(s.value(P + "device_healthy", device=self.uuids[2],
                                 gpu_uuid=self.uuids[2]), 0.0)
        self.assertEqual(s.value(P + "device_healthy", device=self.uuids[3]), 1.0)
        last = s.matching(P + "device_last_xid", device=self.uuids[2])
        self.assertEqual([(x.value, x.labels["class"]) for x in last], [(48.0, "never")])
        last = s.matching(P + "device_last_xid", device=self.uuids[3])
        self.assertEqual([(x.value, x.labels["class"]) for x in last], [(0.0, "none")])

    def test_reload_outcomes(self):
        def reload_and_count(outcome, line):
            mark = self.plugin.stderr.mark()
            self.plugin.signal(harness.signal.SIGHUP)
            self.plugin.wait_log(line, mark)
            return scrape(self.port).value(P + "reloads_total", outcome=outcome)

        s = scrape(self.port)
        for o in ("applied", "unchanged", "rejected"):
            self.assertEqual(s.value(P + "reloads_total", outcome=o), 0.0, o)
        self.assertEqual(reload_and_count("unchanged", "Reloaded configuration and devices "
                                          "(nothing changed)"), 1.0)


class ReloadByFile(harness.PluginTestCase):
    def test_applied_and_rejected(self):
        cfg = self.write_config("version: v1\n")
        self.start_all("a100", ADDR + ["--config-file", cfg])
        port = logged_port(self.plugin)

        self.write_config("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                          "    - name: nvidia.com/gpu\n      replicas: 2\n")
        mark = self.plugin.stderr.mark()
        self.plugin.signal(harness.signal.SIGHUP)
        self.plugin.wait_log("Reloaded configuration and devices", mark)
        s = scrape(port)
        self.assertEqual(s.value(P + "reloads_total", outcome="applied"), 1.0)
        self.assertEqual(len(s.matching(P + "device_healthy", resource=RESOURCE)), 16)

        self.write_config("version: v1\nsharing: [not, a, map\n")
        mark = self.plugin.stderr.mark()
        self.plugin.signal(harness.signal.SIGHUP)
        self.plugin.wait_log("Reloading configuration failed", mark)
        s = scrape(port)
        self.assertEqual(s.value(P + "reloads_total", outcome="rejected"), 1.0)
        self.assertEqual(s.value(P + "reloads_total", outcome="applied"), 1.0)


class Probes(harness.PluginTestCase):
    def wait_status(self, port, path, want):
        deadline = time.monotonic() + harness.TIMEOUT
        while True:
            status, _, body = get(port, path)
            if status == want:
                return body
            if time.monotonic() > deadline:
                raise AssertionError("%s stayed %d (%r), want %d" % (path, status, body, want))
            time.sleep(0.05)

    def test_readyz_follows_registration(self):
        self.render("a100")
        self.start_plugin(ADDR)  # no kubelet yet: it cannot register
        port = logged_port(self.plugin)
        status, headers, body = get(port, "/readyz")
        self.assertEqual((status, body), (503, "'nvidia.com/gpu' is not registered with the "
                                               "kubelet\n"))
        self.assertEqual(len(body.splitlines()), 1)
        self.assertEqual(get(port, "/healthz")[:3:2], (200, "ok\n"))
        self.start_kubelet()
        self.kubelet.registered()
        self.assertEqual(self.wait_status(port, "/readyz", 200), "ok\n")
        # a kubelet restart: not ready until registered again, then ready
        self.kubelet.stop()
        self.start_kubelet()
        self.kubelet.registered()
        self.assertEqual(self.wait_status(port, "/readyz", 200), "ok\n")
        self.assertEqual(get(port, "/healthz")[0], 200)

    def test_http_semantics(self):
        self.start_all("a100", ADDR)
        port = logged_port(self.plugin)
        status, headers, body = get(port, "/metrics", method="HEAD")
        self.assertEqual((status, body), (200, ""))
        self.assertGreater(int(headers["content-length"]), 1000)
        self.assertEqual(get(port, "/nope")[0], 404)
        self.assertEqual(get(port, "/metrics?name[]=x")[0], 200)
        status, headers, _ = get(port, "/metrics", method="POST")
        self.assertEqual((status, headers.get("allow")), (405, "GET, HEAD"))
        # keep-alive: three requests on one connection
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=harness.TIMEOUT)
        for path in ("/healthz", "/metrics", "/readyz"):
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 200, path)
        c.close()
        # Connection: close is honoured: the answer says so and the socket is closed
        with socket.create_connection(("127.0.0.1", port), timeout=harness.TIMEOUT) as sk:
            sk.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = read_all(sk)
        self.assertTrue(data.startswith(b"HTTP/1.1 200 OK\r\n"), data)
        self.assertIn(b"\r\nConnection: close\r\n", data)
        # two pipelined requests in one write get two answers, in order
        with socket.create_connection(("127.0.0.1", port), timeout=harness.TIMEOUT) as sk:
            sk.sendall(b"GET /healthz HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\nConnection: close"
                       b"\r\n\r\n")
            data = read_all(sk)
        self.assertEqual(data.count(b"HTTP/1.1 "), 2, data)
        self.assertLess(data.index(b"200 OK"), data.index(b"404 Not Found"))


class Addresses(harness.PluginTestCase):
    def error_lines(self):
        return [l for l in self.plugin.stderr.lines if l.startswith("E")]

    def test_bad_address_is_one_line_and_serving_goes_on(self):
        _, devs = self.start_all("a100", ["--metrics-address", "localhost"])
        self.assertEqual(len(devs["devices"]), 8)
        errs = self.error_lines()
        self.assertEqual(len(errs), 1, errs)
        self.assertIn('--metrics-address "localhost"', errs[0])
        self.assertIn("serving without metrics", errs[0])
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE,
                               "containers": [[devs["devices"][0]["id"]]]})
        self.assertNotIn("error", r, r)

    def test_port_in_use(self):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            addr = "127.0.0.1:%d" % taken.getsockname()[1]
            self.start_all("a100", ["--metrics-address", addr])
            errs = self.error_lines()
            self.assertEqual(len(errs), 1, errs)
            self.assertIn('--metrics-address "%s"' % addr, errs[0])
            self.assertIn("Address already in use", errs[0])

    def test_env_and_ipv6(self):
        if not socket.has_ipv6 or not os.path.exists("/proc/net/tcp6"):
            self.skipTest("no IPv6")
        self.render("a100")
        self.start_kubelet()
        self.start_plugin(extra_env={"GDP_METRICS_ADDRESS": "[::1]:0"})
        self.kubelet.registered()
        port = logged_port(self.plugin)
        self.assertEqual(get(port, "/healthz", host="::1")[0], 200)
        self.assertIn(P + "build_info", scrape(port, host="::1").families)

    def test_off_by_default(self):
        self.start_all("a100")
        listening = listening_tcp_inodes()
        mine = set()
        for target in self.plugin.fds().values():
            if target.startswith("socket:["):
                mine.add(target[8:-1])
        self.assertEqual(mine & listening, set())
        self.assertEqual(self.plugin.stderr.count(lambda l: "Serving metrics" in l), 0)


if __name__ == "__main__":
    harness.main()
