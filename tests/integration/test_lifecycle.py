#!/usr/bin/python3
"""Kubelet restarts, SIGHUP, SIGTERM, and starting without NVML."""
import os
import signal
import subprocess
import time

import harness
from harness import RESOURCE, REGISTERED_LINE


class KubeletRestart(harness.PluginTestCase):
    def restart(self):
        start = self.kubelet.events.mark()
        self.kubelet.send({"cmd": "restart"})
        self.kubelet.wait("restarted", start)
        # The plugin may register before "restarted" is printed: look from the mark.
        reg, devs = self.kubelet.registered(start)
        serving = self.kubelet.wait("serving", start)
        self.latencies.append(reg["t"] - serving["t"])
        self.assertEqual(reg["endpoint"], harness.ENDPOINT)
        self.assertEqual(len(devs["devices"]), 8)
        self.assertSocket(self.plugin_socket())

    def wait_fds(self, want, timeout=harness.TIMEOUT):
        # A dropped connection is closed when the plugin's loop sees EOF; give it that
        # chance instead of comparing a single snapshot.
        deadline = time.monotonic() + timeout
        while True:
            fds = self.plugin.fds()
            if len(fds) <= len(want) or time.monotonic() > deadline:
                return fds
            time.sleep(0.05)

    def settled_fds(self):
        """The plugin's fds once they stop changing (a finished Register call's connection
        is closed when the loop reads the kubelet's reply)."""
        prev = self.plugin.fds()
        deadline = time.monotonic() + harness.TIMEOUT
        while time.monotonic() < deadline:
            time.sleep(0.2)
            now = self.plugin.fds()
            if now == prev:
                return now
            prev = now
        return prev

    @staticmethod
    def kinds(fds):
        """fd targets without inode numbers: 'socket', 'anon_inode:[eventfd]', paths."""
        return sorted(t.split(":[")[0] if t.startswith("socket:") else t for t in fds.values())

    def test_twenty_restarts(self):
        self.latencies = []
        self.start_all("a100")
        pid = self.plugin.pid
        self.restart()
        baseline = self.settled_fds()
        for _ in range(19):
            self.restart()
        self.assertEqual(self.kubelet.count("register", resource=RESOURCE), 21)
        self.assertTrue(self.plugin.alive())
        self.assertEqual(self.plugin.pid, pid)
        # Figures only, not asserted (timing varies with the machine and sanitizers).
        lat = sorted(self.latencies)
        print("\nkubelet.sock served -> Register received: min %.1f ms, median %.1f ms, max %.1f ms"
              % (lat[0] * 1e3, lat[len(lat) // 2] * 1e3, lat[-1] * 1e3))
        now = self.settled_fds()
        self.assertEqual(self.kinds(now), self.kinds(baseline),
                         "fds changed: before %s\nafter %s" % (sorted(baseline.items()), sorted(now.items())))


# The plugin in a user namespace of its own whose inotify instance limit is 0: what a
# node looks like where other agents of the same user hold all 128 instances.
NO_INOTIFY = ["unshare", "--user", "--map-root-user", "sh", "-c",
              "echo 0 > /proc/sys/user/max_inotify_instances && exec \"$@\"", "sh"]


def no_inotify_possible():
    try:
        r = subprocess.run(NO_INOTIFY + ["true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


class KubeletRestartWithoutInotify(harness.PluginTestCase):
    restart = KubeletRestart.restart

    def test_restarts_seen_by_polling(self):
        """inotify_init1 fails (EMFILE): one warning naming the limit, then kubelet
        restarts are still seen (stat every 2 s): each re-registers, the plugin serves."""
        if not no_inotify_possible():
            self.skipTest("no user namespaces here (unshare --user)")
        self.latencies = []
        self.render("a100")
        self.start_kubelet()
        self.start_plugin(wrap=NO_INOTIFY)
        self.kubelet.registered()
        for _ in range(3):
            self.restart()
        warned = [l for l in self.plugin.stderr.lines if "max_user_instances" in l]
        lat = sorted(self.latencies)
        print("\nwithout inotify: kubelet.sock served -> Register received: min %.0f ms, "
              "max %.0f ms (polling every 2 s); warnings %r" % (lat[0] * 1e3, lat[-1] * 1e3, warned))
        self.assertEqual(len(warned), 1, self.plugin.stderr.text()[-3000:])
        self.assertTrue(warned[0].startswith("W"), warned)
        self.assertIn("checking it every 2s instead", warned[0])
        self.assertEqual(self.kubelet.count("register", resource=RESOURCE), 4)
        self.assertTrue(self.plugin.alive())


class Signals(harness.PluginTestCase):
    def test_sighup_unchanged_keeps_registration(self):
        # A reload whose resources come out the same is hitless: the registration, the
        # ListAndWatch stream and the socket stay (NVIDIA's plugin restarts them all).
        self.start_all("a100")
        # the kubelet sees the registration before the plugin logs its answer
        i, _ = self.plugin.stderr.wait_for(lambda l: REGISTERED_LINE in l, what="registered")
        start = self.kubelet.events.mark()
        log_start = max(self.plugin.stderr.mark(), i + 1)
        self.plugin.signal(signal.SIGHUP)
        self.plugin.wait_log("Reloaded configuration and devices", log_start)
        self.plugin.wait_log("Keeping 'nvidia.com/gpu' serving unchanged", log_start)
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE,
                               "containers": [[sorted(self.expected_devices())[0]]]})
        self.assertNotIn("error", r, r)
        self.assertEqual(self.kubelet.count("register", start), 0)
        self.assertEqual(self.kubelet.count("stream-ended", start), 0)
        self.assertEqual(self.plugin.stderr.count(lambda l: REGISTERED_LINE in l, log_start), 0)
        self.assertTrue(self.plugin.alive())

    def test_sigterm_removes_socket_and_exits_0(self):
        self.start_all("a100")
        self.assertSocket(self.plugin_socket())
        self.plugin.signal(signal.SIGTERM)
        self.assertEqual(self.plugin.wait_exit(), 0, self.failure_context())
        self.assertFalse(os.path.exists(self.plugin_socket()))
        self.kubelet.wait("stream-ended", resource=RESOURCE)

    def test_sigint_exits_0(self):
        self.start_all("t4")
        self.plugin.signal(signal.SIGINT)
        self.assertEqual(self.plugin.wait_exit(), 0, self.failure_context())
        self.assertFalse(os.path.exists(self.plugin_socket()))


class NoNvml(harness.PluginTestCase):
    # No host rendering: without a driver the plugin must not need one.
    def setUp(self):
        super().setUp()
        self.start_kubelet()

    def need_sim(self):
        if not os.path.exists(os.path.join(harness.SIM_DIR, "libnvidia-ml.so.1")):
            self.skipTest("simulated NVML not built")
        self.profile = "a100"

    def fail_true(self, **kw):
        p = self.start_plugin(["--fail-on-init-error=true"], **kw)
        self.assertEqual(p.wait_exit(), 1, self.failure_context())
        errors = [l for l in p.stderr.lines if l[:1] in ("E", "F")]
        # One clear line, at error level, that says what failed.
        self.assertEqual(len(errors), 1, "want one error line:\n" + p.stderr.text())
        self.assertIn("nvml", errors[0].lower())
        self.assertEqual(self.kubelet.count("register"), 0)

    def fail_false(self, **kw):
        p = self.start_plugin(["--fail-on-init-error=false"], **kw)
        p.wait_log("No devices found. Waiting indefinitely.")
        self.assertTrue(p.alive())
        self.assertEqual(self.kubelet.count("register"), 0)
        self.assertFalse(os.path.exists(self.plugin_socket()))
        # Still a well-behaved process: it stops cleanly when asked.
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_exit(), 0, self.failure_context())

    def test_library_missing_fail_true(self):
        self.fail_true(nvml=False)

    def test_library_missing_fail_false(self):
        self.fail_false(nvml=False)

    def test_driver_not_loaded_fail_true(self):
        self.need_sim()
        self.fail_true(extra_env={"MOCK_NVML_INIT_ERROR": "DRIVER_NOT_LOADED"})

    def test_driver_not_loaded_fail_false(self):
        self.need_sim()
        self.fail_false(extra_env={"MOCK_NVML_INIT_ERROR": "DRIVER_NOT_LOADED"})

    def test_env_fail_on_init_error(self):
        p = self.start_plugin([], nvml=False, extra_env={"FAIL_ON_INIT_ERROR": "false"})
        p.wait_log("No devices found. Waiting indefinitely.")
        self.assertTrue(p.alive())


if __name__ == "__main__":
    harness.main()
