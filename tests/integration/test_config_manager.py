#!/usr/bin/python3
"""The `config-manager` entrypoint (the binary run under that name), as NVIDIA's chart runs
it beside the plugin: the init container (ONESHOT=true, SEND_SIGNAL=false) points
CONFIG_FILE_DST at the config the node label names; the sidecar (SEND_SIGNAL=true) follows
the label live and sends SIGHUP to the process whose argv[0] is PROCESS_TO_SIGNAL; the
plugin, started with CONFIG_FILE=<dst> as that chart starts it, reloads hitlessly. Against
the fake API server (tests/kube), with NVIDIA's environment variables.

usage: test_config_manager.py <fake-apiserver>"""
import os
import subprocess
import sys
import time

import yaml

import harness

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
import kubetest as kt  # noqa: E402

FAKE = None
KEY = kt.CONFIG_LABEL
TS = kt.TS_CONFIG


def chart_env():
    """{container name: env} of the plugin DaemonSet of NVIDIA's chart with a config map."""
    path = os.path.join(harness.DATA, "nvidia-chart-v0.20.0", "configs-gfd.yaml")
    with open(path) as f:
        for d in yaml.safe_load_all(f):
            if d and d["kind"] == "DaemonSet" and d["metadata"]["name"] == "nvdp-nvidia-device-plugin":
                spec = d["spec"]["template"]["spec"]
                return {c["name"]: c.get("env", [])
                        for c in spec["initContainers"] + spec["containers"]}
    raise AssertionError("no plugin DaemonSet in %s" % path)


CHART_ENV = chart_env()


class ConfigManager(harness.PluginTestCase):
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
        os.mkdir(os.path.join(self.tmp, "config"))
        self.dst = os.path.join(self.tmp, "config", "config.yaml")
        # A name no other process on this machine has: the sidecar signals by argv[0].
        self.process = "nvidia-device-plugin-%d" % os.getpid()

    def cmd(self, line):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0])

    def cm_env(self, container, **more):
        """The environment NVIDIA's chart (v0.20.0, rendered into tests/data) gives the
        container (nvidia-device-plugin-init or -sidecar), its paths and node name made
        this test's, plus the fake API server's kubeconfig."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "ASAN_OPTIONS": "detect_leaks=1"}
        for e in CHART_ENV[container]:
            env[e["name"]] = "" if e.get("value") is None else str(e["value"])
        env.update({"NODE_NAME": "n1", "CONFIG_FILE_SRCDIR": self.configs,
                    "CONFIG_FILE_DST": self.dst, "KUBECONFIG": self.kubeconfig})
        if env.get("PROCESS_TO_SIGNAL"):
            env["PROCESS_TO_SIGNAL"] = self.process
        env.update(more)
        return env

    def oneshot(self, **more):
        return subprocess.run(["config-manager"], executable=harness.PLUGIN,
                              env=self.cm_env("nvidia-device-plugin-init", **more),
                              capture_output=True, text=True, timeout=kt.WAIT)

    def sidecar(self, **more):
        p = kt.LineProc(["config-manager"], executable=harness.PLUGIN,
                        env=self.cm_env("nvidia-device-plugin-sidecar", **more))
        self.addCleanup(self.stop_sidecar, p)
        return p

    def stop_sidecar(self, p):
        """SIGTERM ends it with 0, as the kubelet ends the pod's containers."""
        if p.p.poll() is None:
            p.p.terminate()
            self.assertEqual(p.p.wait(timeout=kt.WAIT), 0, p.errlines[-5:])
        p.stop()

    def wait_err(self, proc, needle, start=0, timeout=kt.WAIT):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            lines = proc.errlines[start:]
            for i, line in enumerate(lines):
                if needle in line:
                    return start + i + 1
            time.sleep(0.05)
        raise AssertionError("no %r from config-manager; stderr: %s" %
                             (needle, proc.errlines[-20:]))

    def link(self):
        return os.readlink(self.dst)

    def test_init_container_points_at_the_labelled_config(self):
        r = self.oneshot()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.link(), os.path.join(self.configs, "ts"))
        self.assertIn("Label change detected: %s=ts" % KEY, r.stderr)
        self.assertIn("Successfully updated to config: ts", r.stderr)
        # Again: nothing to do, said as NVIDIA's says it.
        r = self.oneshot()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Already configured. Skipping update...", r.stderr)
        # No label: the fallbacks (named: "default").
        self.cmd("label n1 %s-" % KEY)
        r = self.oneshot()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.link(), os.path.join(self.configs, "default"))
        # The empty fallback: a link to /dev/null, which the plugin reads as no config.
        os.unlink(os.path.join(self.configs, "default"))
        r = self.oneshot(FALLBACK_STRATEGIES="empty")  # (and SIGNAL="" as the chart's init)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.link(), "/dev/null")

    def test_init_container_errors(self):
        """NVIDIA's exit code (1) and one error line naming the cause."""
        cases = [({"NODE_NAME": ""}, "invalid <node-name>: must not be empty string"),
                 ({"CONFIG_FILE_SRCDIR": os.path.join(self.tmp, "nope")},
                  "reading config directory %s" % os.path.join(self.tmp, "nope")),
                 ({"NODE_LABEL": "example.com/unset", "DEFAULT_CONFIG": "missing"},
                  "default config \"missing\" does not exist"),
                 ({"ONESHOT": "maybe"}, "invalid value \"maybe\" for env ONESHOT")]
        for env, want in cases:
            r = self.oneshot(**env)
            errors = [l for l in r.stderr.splitlines() if l.startswith("E")]
            self.assertEqual(r.returncode, 1, (env, r.stderr))
            self.assertEqual(len(errors), 1, (env, r.stderr))
            self.assertIn(want, errors[0], env)

    def test_label_naming_a_missing_config_uses_the_next_rule(self):
        self.cmd("label n1 %s=nosuch" % KEY)
        r = self.oneshot()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('config "nosuch" named by node label %s does not exist' % KEY, r.stderr)
        self.assertEqual(self.link(), os.path.join(self.configs, "default"))

    def test_sidecar_switches_the_plugin_live(self):
        """Init, plugin (CONFIG_FILE=<dst>, argv[0] PROCESS_TO_SIGNAL), sidecar; the label
        moves ts -> default -> ts: each move relinks, signals once, the plugin reloads;
        the same label again does nothing."""
        self.assertEqual(self.oneshot().returncode, 0)
        self.start_kubelet()
        rename = harness.run_as(self.process)
        self.start_plugin(extra_env={"CONFIG_FILE": self.dst}, wrap=rename)
        _, devs = self.kubelet.registered()
        self.assertEqual(len(devs["devices"]), 4 * self.ngpus)
        side = self.sidecar()
        seen = self.wait_err(side, "Already configured. Skipping update...")
        mark = self.kubelet.events.mark()
        self.cmd("label n1 %s=default" % KEY)
        seen = self.wait_err(side, "Successfully sent signal", seen)
        self.plugin.wait_log("Received SIGHUP")
        _, devs = self.kubelet.registered(mark)
        self.assertEqual(len(devs["devices"]), self.ngpus)
        self.assertEqual(self.link(), os.path.join(self.configs, "default"))
        mark = self.kubelet.events.mark()
        self.cmd("label n1 %s=ts" % KEY)
        seen = self.wait_err(side, "Successfully sent signal", seen)
        _, devs = self.kubelet.registered(mark)
        self.assertEqual(len(devs["devices"]), 4 * self.ngpus)
        # The sidecar's fds and threads after the switches are those before them.
        side_pid = side.p.pid
        fds = len(os.listdir("/proc/%d/fd" % side_pid))
        for value in ("default", "ts"):
            self.cmd("label n1 %s=%s" % (KEY, value))
            seen = self.wait_err(side, "Successfully sent signal", seen)
        with open("/proc/%d/status" % side_pid) as f:
            threads = [l for l in f if l.startswith("Threads:")][0].split()[1]
        print("\nconfig-manager sidecar: fds %d before two more switches, %d after; threads %s"
              % (fds, len(os.listdir("/proc/%d/fd" % side_pid)), threads))
        self.assertEqual(len(os.listdir("/proc/%d/fd" % side_pid)), fds)
        self.assertEqual(threads, "1")
        # Another change to the Node that leaves the label: no update, no signal.
        hups = self.plugin.stderr.count(lambda l: "Received SIGHUP" in l)
        self.cmd("modify n1")
        self.cmd("bookmark")
        time.sleep(1.0)
        self.assertEqual(self.plugin.stderr.count(lambda l: "Received SIGHUP" in l), hups)
        self.assertEqual(sum("Label change detected" in l for l in side.errlines[seen:]), 0,
                         side.errlines[seen:])
        self.assertTrue(self.plugin.alive())

    def test_process_named_by_path(self):
        """NVIDIA's chart names the MPS daemon "/usr/bin/mps-control-daemon" while the
        container runs "mps-control-daemon": the base name matches."""
        self.assertEqual(self.oneshot().returncode, 0)
        sleeper = subprocess.Popen([self.process, "60"], executable="/bin/sleep")
        self.addCleanup(sleeper.wait)
        self.addCleanup(sleeper.kill)
        side = self.sidecar(PROCESS_TO_SIGNAL="/usr/bin/" + self.process, SIGNAL="15")
        seen = self.wait_err(side, "Already configured")
        self.cmd("label n1 %s=default" % KEY)
        self.wait_err(side, "Successfully sent signal", seen)
        self.assertEqual(sleeper.wait(timeout=kt.WAIT), -15)

    def test_sidecar_without_the_process_keeps_running(self):
        """Nothing named PROCESS_TO_SIGNAL: one error line per change, the link is
        updated, the sidecar goes on (NVIDIA's exits and restarts)."""
        self.assertEqual(self.oneshot().returncode, 0)
        side = self.sidecar()
        seen = self.wait_err(side, "Already configured")
        self.cmd("label n1 %s=default" % KEY)
        seen = self.wait_err(side, "error finding pid: no process found", seen)
        self.assertEqual(self.link(), os.path.join(self.configs, "default"))
        self.cmd("label n1 %s=ts" % KEY)
        self.wait_err(side, "error finding pid: no process found", seen)
        self.assertEqual(self.link(), os.path.join(self.configs, "ts"))
        self.assertIsNone(side.p.poll())


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        FAKE = sys.argv.pop(1)
    harness.main()
