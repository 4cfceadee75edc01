#!/usr/bin/python3
"""The `gpu-feature-discovery` entrypoint (the binary run under that name), with GFD's
flags and environment: --oneshot writes the feature file once and leaves it; the loop
relabels every --sleep-interval, rewrites the file only when a label changed, reloads on
SIGHUP (a new timestamp) and removes the file on SIGTERM; GFD's own variables
(GFD_MIG_STRATEGY, GFD_ONESHOT, ...) and aliases (-o / --output) are read; the NodeFeature
API without a node name fails with one line. The labels are `labels`' (the same code)."""
import json
import os
import signal
import subprocess
import sys
import time

import harness

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
import kubetest as kt  # noqa: E402

FAKE = None


def sanitized(pid):
    """True when the process runs under AddressSanitizer (its runtime is mapped)."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def status(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (field, pid))


class Gfd(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.render("a100")
        self.out = os.path.join(self.tmp, "features.d", "gfd")
        os.makedirs(os.path.dirname(self.out))

    def env(self, **more):
        env = self.plugin_env(extra={"GDP_SYSFS_ROOT": self.sys_root, "GFD_SLEEP_INTERVAL": "60s"})
        env.update(more)
        return env

    def args(self, *extra):
        return ["--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                "--dev-root", self.dev_root, "--machine-type-file",
                os.path.join(self.tmp, "product_name")] + list(extra)

    def gfd(self, *extra, env=None, timeout=harness.TIMEOUT):
        return subprocess.run(["gpu-feature-discovery"] + self.args(*extra),
                              executable=harness.PLUGIN, env=env or self.env(),
                              capture_output=True, text=True, timeout=timeout)

    def start(self, *extra, env=None):
        """The loop, run as gpu-feature-discovery (argv[0]) through the harness."""
        rename = harness.run_as('gpu-feature-discovery')
        p = harness.Plugin(self.args(*extra), env or self.env(), self.log, wrap=rename)
        self.addCleanup(self.stop, p)
        return p

    def stop(self, p):
        if p.alive():
            p.signal(signal.SIGTERM)
            self.assertEqual(p.wait_exit(), 0)

    def labels(self):
        with open(self.out) as f:
            return dict(l.split("=", 1) for l in f.read().splitlines())

    def reference(self, *extra):
        r = self.run_plugin(self.args(*extra) + ["labels"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        return dict(l.split("=", 1) for l in r.stdout.splitlines())

    def test_oneshot_file(self):
        r = self.gfd("--oneshot", "--use-node-feature-api=false", "-o", self.out,
                     "--no-timestamp")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.labels(), self.reference("--no-timestamp"))
        self.assertIn("nvidia.com/gpu.count", self.labels())
        # GFD's variables, the --output alias, and the MIG strategy through GFD_MIG_STRATEGY.
        os.unlink(self.out)
        r = self.gfd("--output=" + self.out, env=self.env(
            GFD_ONESHOT="true", GFD_USE_NODE_FEATURE_API="false", GFD_NO_TIMESTAMP="true",
            GFD_MIG_STRATEGY="single", MIG_STRATEGY="none"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.labels().get("nvidia.com/mig.strategy"), "single", self.labels())
        # A flag wins over GFD_ONESHOT: --oneshot=false with GFD_ONESHOT=true loops (killed).
        p = self.start("--oneshot=false", "--use-node-feature-api=false", "-o", self.out,
                       env=self.env(GFD_ONESHOT="true"))
        time.sleep(1.0)
        self.assertTrue(p.alive(), p.stderr.text())

    def test_loop_rewrites_only_changes_and_removes_at_exit(self):
        p = self.start("--use-node-feature-api=false", "--output-file", self.out,
                       "--sleep-interval", "200ms")
        p.wait_log("Published ")
        first = self.labels()
        self.assertIn("nvidia.com/gfd.timestamp", first)
        st = os.stat(self.out)
        time.sleep(1.5)  # about seven relabels
        self.assertEqual(os.stat(self.out).st_ino, st.st_ino, "rewritten without a change")
        self.assertEqual(p.stderr.count(lambda l: "Published " in l), 1, p.stderr.text())
        # Something changes (the machine type): the next relabel writes it.
        mark = p.stderr.mark()
        with open(os.path.join(self.tmp, "product_name"), "w") as f:
            f.write("DGX A100\n")
        p.wait_log("Published ", mark)
        self.assertEqual(self.labels()["nvidia.com/gpu.machine"], "DGX-A100")
        self.assertEqual(self.labels()["nvidia.com/gfd.timestamp"],
                         first["nvidia.com/gfd.timestamp"])
        # SIGHUP restarts: a new timestamp, so the file is written again.
        time.sleep(1.0)
        mark = p.stderr.mark()
        p.signal(signal.SIGHUP)
        p.wait_log("Published ", mark)
        self.assertNotEqual(self.labels()["nvidia.com/gfd.timestamp"],
                            first["nvidia.com/gfd.timestamp"])
        # Restarts and relabels leave nothing behind: the same fds, threads and about the
        # same RSS after 5 more SIGHUPs (each a new timestamp, so a write) and their relabels.
        before = (p.fd_count(), status(p.pid, "Threads"), status(p.pid, "VmRSS"))
        for _ in range(5):
            time.sleep(1.0)
            mark = p.stderr.mark()
            p.signal(signal.SIGHUP)
            p.wait_log("Published ", mark)
        time.sleep(0.5)
        after = (p.fd_count(), status(p.pid, "Threads"), status(p.pid, "VmRSS"))
        print("\ngfd: fds, threads, RSS KiB before %s, after 5 SIGHUPs %s" % (before, after))
        self.assertEqual(after[:2], before[:2])
        # A sanitizer build holds freed memory in quarantine (hundreds of MiB by default), so
        # its RSS grows by design; only an uninstrumented build is held to the bound.
        if not sanitized(p.pid):
            self.assertLess(after[2], before[2] + 1024)
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_exit(), 0)
        self.assertFalse(os.path.exists(self.out), "the feature file outlived GFD")

    def test_infinite_keeps_the_file(self):
        p = self.start("--use-node-feature-api=false", "--output-file", self.out,
                       "--sleep-interval", "infinite")
        p.wait_log("Published ")
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_exit(), 0)
        self.assertTrue(os.path.exists(self.out))

    def test_node_feature_api(self):
        """GFD's default: the NodeFeature object; --oneshot exits 0 once it is stored,
        the loop keeps it (and deletes nothing) at SIGTERM."""
        if not FAKE or not os.path.exists(FAKE):
            self.skipTest("fake API server not built")
        srv, kubeconfig, _ = kt.fake_apiserver(self, FAKE, {})
        srv.send("add n1")
        srv.expect(r"^ok add$")
        env = self.env(NODE_NAME="n1", NAMESPACE="gpu-operator", KUBECONFIG=kubeconfig)
        r = self.gfd("--oneshot", "--no-timestamp", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        srv.send("nf-dump gpu-operator nvidia-features-for-n1")
        m = srv.expect(r"^nf gpu-operator/nvidia-features-for-n1 (.*)$")
        self.assertNotEqual(m.group(1), "absent")
        stored = json.loads(m.group(1))["spec"]["labels"]
        self.assertEqual(stored, self.reference("--no-timestamp"))
        # The loop: the same object, written only when it differs (here: the timestamp).
        p = self.start(env=env)
        p.wait_log("Published ")
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_exit(), 0)
        srv.send("nf-dump gpu-operator nvidia-features-for-n1")
        m = srv.expect(r"^nf gpu-operator/nvidia-features-for-n1 (.*)$")
        self.assertIn("nvidia.com/gfd.timestamp", json.loads(m.group(1))["spec"]["labels"])

    def test_node_feature_api_needs_a_node_name(self):
        r = self.gfd("--oneshot", env=self.env(NODE_NAME=""))
        errors = [l for l in r.stderr.splitlines() if l.startswith("E")]
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertIn("NODE_NAME", errors[0])

    def test_bad_flag_is_one_line(self):
        r = self.gfd("--oneshot=maybe")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn('invalid value "maybe" for flag --oneshot', r.stderr)
        r = self.gfd("--sleep-interval", "soon")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("sleep-interval", r.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        FAKE = sys.argv.pop(1)
    harness.main()
