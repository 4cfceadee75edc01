#!/usr/bin/python3
"""What a node does to a plugin: reloads under load, a GPU lost during a reload, the
device-plugin directory wiped, a kubelet that binds before it listens, a peer that puts
control bytes in device IDs. Default timeouts throughout; threads, fds and RSS are
counted before and after every lifecycle test."""

import os
import re
import signal
import socket
import threading
import time

import attacklib
import harness
from harness import RESOURCE

import grpc  # noqa: E402  (after harness: it puts tools/test-kubelet on sys.path)
import dpapi  # noqa: E402

KLOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.-]+:\d+\] ")


class Node(harness.PluginTestCase):
    def uuids(self):
        return [g["uuid"] for g in harness.load_profile(self.profile)]

    def allocate(self, ids):
        return self.kubelet.call({"cmd": "allocate", "resource": RESOURCE, "containers": [ids]})

    def devices(self):
        """The latest device list the kubelet holds, as {id: health}."""
        r = self.kubelet.call({"cmd": "wait-devices", "resource": RESOURCE, "count": 0})
        return {d["id"]: d["health"] for d in r.get("devices", [])}

    # ---------------------------------------------------------------- item 3 + 1

    def test_reload_under_load_is_hitless(self):
        """200 SIGHUPs with an unchanged config while 8 clients call Allocate: no RPC
        fails, the kubelet's stream never ends, nothing registers again, and threads,
        fds and RSS stay flat."""
        self.start_all("a100")
        uuids = self.uuids()
        log_mark = self.plugin.stderr.mark()
        ev_mark = self.kubelet.events.mark()
        before = attacklib.Snapshot(self.plugin.pid)
        stop = threading.Event()
        ok = [0] * 8
        failures = []

        def client(k):
            ch = grpc.insecure_channel(dpapi.unix_target(self.plugin_socket()))
            stub = dpapi.PluginStub(ch)
            req = dpapi.pb.AllocateRequest(container_requests=[
                dpapi.pb.ContainerAllocateRequest(devices_ids=[uuids[k % len(uuids)]])])
            try:
                while not stop.is_set():
                    try:
                        stub.Allocate(req, timeout=10)
                        ok[k] += 1
                    except grpc.RpcError as e:
                        failures.append("%s: %s" % (e.code().name, e.details()))
            finally:
                ch.close()

        threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(8)]
        for t in threads:
            t.start()
        # One SIGHUP at a time (signals sent while one is pending merge into one), each
        # waited for, so that 200 reloads really happen while the clients call.
        at = log_mark
        for k in range(200):
            self.plugin.signal(signal.SIGHUP)
            at, _ = self.plugin.stderr.wait_for(
                lambda l: "Reloaded configuration and devices" in l, at, what="reload %d" % k)
            at += 1
            time.sleep(0.01)
        stop.set()
        for t in threads:
            t.join(30)
        after = attacklib.settled(self.plugin.pid, before)
        print("allocates: %d, failures: %d, before %s, after %s" % (sum(ok), len(failures),
                                                                    before, after))
        self.assertEqual(failures[:5], [])
        self.assertGreater(min(ok), 0)
        self.assertEqual(self.kubelet.count("stream-ended", ev_mark), 0)
        self.assertEqual(self.kubelet.count("register", ev_mark), 0)
        attacklib.assert_flat(self, before, after, what="200 SIGHUPs under load")

    # ---------------------------------------------------------------- item 4

    def test_gpu_lost_during_reload_stays_and_comes_back(self):
        # The one value this test waits on is the probe schedule of a lost GPU (quiet
        # period, default 60 s; attack-health's LostGpu runs the default path).
        config = self.write_config("version: v1\nhealth:\n  quietPeriod: 500ms\n")
        self.start_all("a100", args=["--config-file", config])
        before = attacklib.Snapshot(self.plugin.pid)
        uuids = self.uuids()
        lost = uuids[3]
        mark = self.kubelet.events.mark()
        log_mark = self.plugin.stderr.mark()
        self.inject("lose " + lost)
        self.wait_health(mark, lambda h: h.get(lost) == "Unhealthy", "lost GPU Unhealthy")
        self.plugin.signal(signal.SIGHUP)
        self.plugin.wait_log("Reloaded configuration and devices", log_mark)
        self.plugin.wait_log("keeping it advertised as Unhealthy", log_mark)
        devs = self.devices()
        self.assertEqual(sorted(devs), sorted(uuids), "the lost GPU must stay advertised")
        self.assertEqual(devs[lost], "Unhealthy")
        healthy = [u for u in uuids if u != lost]
        self.assertTrue(all(devs[u] == "Healthy" for u in healthy), devs)
        r = self.allocate([lost])
        self.assertNotIn("error", r, "Allocate of a known (lost) GPU: %s" % r)
        mark = self.kubelet.events.mark()
        self.inject("restore " + lost)
        self.wait_health(mark, lambda h: h.get(lost) == "Healthy", "lost GPU Healthy again")
        r = self.allocate([lost])
        self.assertNotIn("error", r, r)
        attacklib.assert_flat(self, before, attacklib.settled(self.plugin.pid, before),
                              what="GPU lost, reload, GPU back")

    # ---------------------------------------------------------------- item 7

    def test_plugin_dir_removed_and_recreated(self):
        self.start_all("a100")
        before = attacklib.Snapshot(self.plugin.pid)
        mark = self.kubelet.events.mark()
        log_mark = self.plugin.stderr.mark()
        self.kubelet.send({"cmd": "restart", "rmdir": True, "gap": 0.3})
        self.plugin.wait_log("was removed", log_mark)
        reg, devs = self.kubelet.registered(mark)
        self.assertEqual(reg["resource"], RESOURCE)
        self.assertEqual(sorted(d["id"] for d in devs["devices"]), sorted(self.uuids()))
        self.assertSocket(self.plugin_socket())
        r = self.allocate([self.uuids()[0]])
        self.assertNotIn("error", r, r)
        # and once more: the new directory is watched too
        mark = self.kubelet.events.mark()
        self.kubelet.send({"cmd": "restart", "rmdir": True, "gap": 0})
        self.kubelet.registered(mark)
        after = attacklib.settled(self.plugin.pid, before)
        attacklib.assert_flat(self, before, after, what="directory wiped twice")

    # ---------------------------------------------------------------- item 11

    def test_kubelet_binds_before_it_listens(self):
        """The kubelet's socket appears (bind) before it accepts (listen): the dial in
        between is refused, and the plugin must come back in a millisecond, not after a
        whole 100 ms backoff step."""
        self.render("a100")
        kubelet_sock = os.path.join(self.dp, "kubelet.sock")
        early = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(early.close)
        early.bind(kubelet_sock)              # inotify fires; connect() is refused
        self.start_plugin()
        self.plugin.wait_log("retrying in 1 ms")
        before = attacklib.Snapshot(self.plugin.pid)
        self.plugin.wait_log("retrying in 2 ms")
        # eight refused dials later: no client socket or timer fd left behind
        attacklib.assert_flat(self, before, attacklib.settled(self.plugin.pid, before),
                              what="refused registration retries")
        early.close()
        os.unlink(kubelet_sock)
        self.start_kubelet()
        reg, _ = self.kubelet.registered()
        self.assertEqual(reg["resource"], RESOURCE)
        # the fast retries are not warnings: a restart does not spam the log
        warned = self.plugin.stderr.count(
            lambda l: l.startswith("W") and "Could not register" in l and "retrying in 1 ms" in l)
        self.assertEqual(warned, 0)

    # ---------------------------------------------------------------- item 10

    def test_device_ids_cannot_forge_log_lines(self):
        self.start_all("a100")
        mark = self.plugin.stderr.mark()
        forged = "GPU-x\nE1231 23:59:59.000000       1 forged.go:1] forged line\x1b[2J"
        r = self.allocate([forged])
        self.assertIn("error", r)
        self.plugin.wait_log("forged", mark)
        self.allocate([self.uuids()[0]])
        lines = self.plugin.stderr.lines[mark:]
        for line in lines:
            self.assertRegex(line, KLOG_LINE, "every line is one klog record")
            self.assertNotIn("\x1b", line)
        self.assertTrue(any("\\nE1231" in l for l in lines), lines)


if __name__ == "__main__":
    harness.main()
