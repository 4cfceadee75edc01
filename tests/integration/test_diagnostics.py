#!/usr/bin/python3
"""What a person sees when something is wrong: the hint lines after an NVML failure, "did
you mean" for a mistyped flag, a wrong kubelet path said once (not every retry), a SIGHUP
that changes a start-only setting named in a warning, Kubernetes' JSON log keys, and the
exit codes and signals at the end of --help (checked against the code), and each program's
--help listing its own flags only (gpu-feature-discovery's and mps-control-daemon's, as
NVIDIA's, not the device plugin's whole list)."""
import json
import os
import re
import signal
import subprocess
import time

import harness

HINT_MARKS = ("NVIDIA driver installed", "NVIDIA Container Toolkit", "--driver-root",
              "not a GPU node")


def level_of(line):
    """The klog severity letter of a text line ("E", "W", "I"), or None."""
    m = re.match(r"^([EWI])\d{4} ", line)
    return m.group(1) if m else None


class NvmlHints(harness.PluginTestCase):
    def test_serve_exits_with_the_causes(self):
        r = self.run_plugin(self.plugin_args(), env=self.plugin_env(nvml=False))
        if r.returncode == 0 or "failed to initialize NVML" not in r.stderr:
            self.skipTest("a real NVML is installed here")
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.splitlines()
        i = next(k for k, l in enumerate(lines) if "failed to initialize NVML: could not load" in l)
        self.assertEqual(level_of(lines[i]), "E", lines[i])
        after = lines[i + 1:i + 1 + len(HINT_MARKS)]
        self.assertEqual(len(after), len(HINT_MARKS), r.stderr)
        for mark, line in zip(HINT_MARKS, after):
            self.assertIn(mark, line, r.stderr)
            self.assertEqual(level_of(line), "I", line)  # advice: still one error line
        self.assertIn("--fail-on-init-error=false", after[-1])
        self.assertEqual(sum(1 for l in lines if level_of(l) == "E"), 1, r.stderr)

    def test_tolerated_failure_says_the_causes_too(self):
        p = self.start_plugin(["--fail-on-init-error=false", "--kubelet-socket", ""], nvml=False)
        i, line = p.wait_log("continuing without resources")
        if "Failed to initialize NVML" not in line:
            self.skipTest("a real NVML is installed here")
        self.assertEqual(level_of(line), "W", line)
        j, _ = p.wait_log("not a GPU node", i + 1)
        hints = p.stderr.lines[i + 1:j + 1]
        self.assertEqual(len(hints), len(HINT_MARKS), p.stderr.text())
        for mark, hint in zip(HINT_MARKS, hints):
            self.assertIn(mark, hint)
            self.assertEqual(level_of(hint), "I", hint)
        # already false: not advised again
        self.assertNotIn("--fail-on-init-error", hints[-1])
        self.assertTrue(p.alive())


class DidYouMean(harness.PluginTestCase):
    def check(self, args, want):
        r = self.run_plugin(args, env=self.plugin_env(nvml=False))
        self.assertEqual(r.returncode, 1, r.stderr)
        errors = [l for l in r.stderr.splitlines() if level_of(l) == "E"]
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertTrue(errors[0].endswith("] " + want), errors[0])

    def test_unknown_flag(self):
        self.check(["--mig-stratgy=mixed"],
                   "unknown flag --mig-stratgy; did you mean --mig-strategy? (see --help)")
        self.check(["-fail-on-init-eror", "list"],
                   "unknown flag --fail-on-init-eror; did you mean --fail-on-init-error? "
                   "(see --help)")
        self.check(["--bogus"], "unknown flag --bogus (see --help)")

    def test_unknown_subcommand_option(self):
        self.check(["list", "--outptu", "json"],
                   'list: unknown argument "--outptu"; did you mean --output? '
                   "(allowed: --output table|json; see --help)")
        self.check(["labels", "--no-timestmp"],
                   'labels: unknown argument "--no-timestmp"; did you mean --no-timestamp? '
                   "(labels takes only the plugin's flags; see --help)")
        self.check(["lsit"], 'unknown command "lsit"; did you mean list? (commands: list, '
                   "labels, config print; no command: serve; see --help)")


class KubeletPathSaidOnce(harness.PluginTestCase):
    """The default retry periods: a bind retry after 0.1, 0.3, 0.7, 1.5 and 3.1 s; a
    registration warning from its 128 ms retry on, then 256, 512, 1024, 2048 ms."""
    WAIT = 4.0

    def test_missing_directory(self):
        self.render("t4")
        dp = os.path.join(os.path.dirname(self.dp), "wrong", "device-plugins")  # sockets' bound
        sock = os.path.join(dp, "kubelet.sock")
        p = self.start_plugin(["--kubelet-socket", sock])
        i, _ = p.wait_log("on %s: No such file or directory; retrying" % os.path.join(
            dp, harness.ENDPOINT))
        p.wait_log("(the same failure again)", i)
        time.sleep(self.WAIT)
        text = p.stderr.lines[:]
        errors = [k for k, l in enumerate(text) if level_of(l) == "E"]
        self.assertEqual(len(errors), 1, "\n".join(text))
        self.assertIn("Is --kubelet-socket the kubelet's registration socket",
                      text[errors[0] + 1])
        self.assertIn("hostPath", text[errors[0] + 2])
        self.assertEqual(sum(1 for l in text if "hostPath" in l), 1)
        repeats = [l for l in text if "(the same failure again)" in l]
        self.assertGreaterEqual(len(repeats), 3, "\n".join(text))
        self.assertTrue(all(level_of(l) == "I" for l in repeats))  # debug: shown with -v 4
        # the directory appears with a kubelet in it: served and registered at once
        os.makedirs(dp)
        self.kubelet = harness.TestKubelet(dp, self.log)
        self.addCleanup(self.kubelet.stop)
        self.kubelet.registered(timeout=5.0)

    def test_no_kubelet(self):
        self.render("t4")
        p = self.start_plugin()
        i, first = p.wait_log("Could not register device plugin")
        self.assertEqual(level_of(first), "I", first)  # the quick first retries: debug
        time.sleep(self.WAIT)
        text = p.stderr.lines[:]
        warnings = [k for k, l in enumerate(text) if level_of(l) == "W"]
        self.assertEqual(len(warnings), 1, "\n".join(text))
        w = text[warnings[0]]
        self.assertIn("Could not register device plugin for 'nvidia.com/gpu'", w)
        self.assertIn("(status 14)", w)
        self.assertNotIn("the same failure again", w)
        self.assertIn("Is --kubelet-socket", text[warnings[0] + 1])
        self.assertEqual(sum(1 for l in text if "hostPath" in l), 1)
        self.assertGreaterEqual(p.stderr.count(lambda l: "(the same failure again)" in l), 3)
        self.start_kubelet()
        self.kubelet.registered()
        p.wait_log(harness.REGISTERED_LINE)


class StartOnlySettings(harness.PluginTestCase):
    CONFIG = ("version: v1\nflags:\n  useNodeFeatureAPI: %s\n  plugin:\n"
              "    containerDriverRoot: %s\n  gfd:\n    outputFile: %s\n")

    def test_sighup_names_each_setting(self):
        a = os.path.join(self.tmp, "features-a")
        b = os.path.join(self.tmp, "features-b")
        cfg = self.write_config(self.CONFIG % ("true", "/driver-root", a))
        self.start_all("t4", ["--config-file", cfg])
        p = self.plugin
        # nothing changed: nothing said
        i = p.stderr.mark()
        p.signal(signal.SIGHUP)
        j, _ = p.wait_log("Reloaded configuration", i)
        self.assertEqual(p.stderr.count(lambda l: "takes effect at restart" in l, i), 0)
        self.write_config(self.CONFIG % ("false", "/elsewhere", b))
        p.signal(signal.SIGHUP)
        k, _ = p.wait_log("Reloaded configuration", j + 1)
        said = [l for l in p.stderr.lines[j + 1:k] if "takes effect at restart" in l]
        self.assertEqual(len(said), 3, p.stderr.text())
        self.assertTrue(all(level_of(l) == "W" for l in said))
        text = "\n".join(said)
        self.assertIn('SIGHUP: --output-file changed from "%s" to "%s"; it takes effect at '
                      'restart ("%s" stays in effect until then)' % (a, b, a), text)
        self.assertIn('SIGHUP: --use-node-feature-api changed from "true" to "false"', text)
        self.assertIn('Reload: --driver-root-ctr-path changed from "/driver-root" to '
                      '"/elsewhere"', text)


class JsonLogs(harness.PluginTestCase):
    def test_kubernetes_keys(self):
        self.start_all("t4", ["--log-format", "json"])
        self.plugin.wait_log(harness.REGISTERED_LINE)
        now_ms = time.time() * 1000.0
        seen_registered = False
        for line in self.plugin.stderr.lines:
            obj = json.loads(line)  # every line is one object
            keys = list(obj)
            self.assertEqual(keys[:3], ["ts", "caller", "msg"], line)
            self.assertIn(keys[3:], (["v"], ["err"], []), line)
            self.assertTrue(isinstance(obj["ts"], float) and 0 < now_ms - obj["ts"] < 600000,
                            line)
            self.assertRegex(obj["caller"], r"^[\w.-]+/[\w.-]+\.c:\d+$")
            if obj["msg"].startswith(harness.REGISTERED_LINE):
                seen_registered = True
                self.assertEqual(obj["v"], 0)
                self.assertEqual(obj["caller"].rsplit(":", 1)[0], "kubelet/registration.c")
        self.assertTrue(seen_registered)


class HelpEpilogue(harness.PluginTestCase):
    def section(self, text, title):
        body = text.split("\n%s\n" % title, 1)[1]
        return body.split("\n\n", 1)[0].splitlines()

    def test_exit_codes_and_signals_match_the_code(self):
        r = self.run_plugin(["--help"])
        self.assertEqual(r.returncode, 0)
        with open(os.path.join(harness.SOURCE, "src", "commands.h"), encoding="utf-8") as f:
            enum = {int(v) for v in re.findall(r"X\(GDP_EXIT_\w+, (\d+),", f.read())}
        listed = {int(l.split()[0]) for l in self.section(r.stdout, "Exit codes:")}
        self.assertEqual(listed, enum)
        self.assertEqual(enum, {0, 1})
        # serve blocks core/signals.c's set, SIGHUP included (signals_fd(true))
        with open(os.path.join(harness.SOURCE, "src", "core", "signals.c"), encoding="utf-8") as f:
            handled = set(re.findall(r"sigaddset\(&mask, (SIG\w+)\)", f.read()))
        with open(os.path.join(harness.SOURCE, "src", "cmd_serve.c"), encoding="utf-8") as f:
            self.assertIn("signals_fd(true)", f.read())
        signals = {l.split()[0] for l in self.section(r.stdout, "Signals (serve):")}
        self.assertEqual(signals, handled)
        self.assertIn("SIGHUP", handled)
        # and the codes are the ones the process returns
        self.assertEqual(self.run_plugin(["--bogus"]).returncode, 1)
        self.assertEqual(self.run_plugin(["--version"]).returncode, 0)


def help_flags(text):
    """The flags a --help text lists: every --name and -x that begins an entry line."""
    flags = set()
    for line in text.splitlines():
        if re.match(r"^  -", line):
            flags.update(re.findall(r"(?:^|, )(--?[A-Za-z][\w-]*)", line.strip()))
    return flags


class ProgramHelp(harness.PluginTestCase):
    """NVIDIA's gpu-feature-discovery and mps-control-daemon list their own flags
    (reference §8.1, §9); ours too, with the few of our extensions each acts on."""
    GFD = {"--oneshot", "--mig-strategy", "--fail-on-init-error", "--no-timestamp",
           "--sleep-interval", "--output-file", "--output", "-o", "--machine-type-file",
           "--config-file", "--use-node-feature-api", "--device-discovery-strategy",
           "--driver-root-ctr-path", "--container-driver-root", "--namespace", "--node-name",
           "--pod-name", "--kubeconfig", "--kube-api-qps", "--kube-api-burst"}
    MPS = {"--config-file", "--mig-strategy"}
    OURS = {"-v", "--log-format", "--sysfs-root", "--proc-root", "--dev-root",
            "--nvidia-dev-root", "--help", "-h", "--version"}
    # the device plugin's own: in neither program's list
    PLUGIN_ONLY = {"--pass-device-specs", "--device-list-strategy", "--device-id-strategy",
                   "--kubelet-socket", "--mps-root", "--metrics-address", "--gfd", "--dra",
                   "--health-quiet-period", "--cdi-spec-dir", "--imex-channel-ids",
                   "--config-dir", "--kubelet-plugins-directory-path", "--events"}

    def help_as(self, name):
        r = subprocess.run([name, "--help"], executable=harness.PLUGIN,
                           env=self.plugin_env(), capture_output=True, text=True,
                           timeout=harness.TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_gfd_lists_its_flags_only(self):
        out = self.help_as("gpu-feature-discovery")
        self.assertTrue(out.startswith("Usage: gpu-feature-discovery [flags]\n"), out[:200])
        self.assertEqual(help_flags(out), self.GFD | self.OURS)
        self.assertFalse(help_flags(out) & self.PLUGIN_ONLY)
        self.assertIn("[$GFD_ONESHOT]", out)
        self.assertIn("$GFD_MIG_STRATEGY, $MIG_STRATEGY", out)
        self.assertNotIn("Exit codes:", out)  # serve's epilogue

    def test_mps_control_daemon_lists_its_flags_only(self):
        out = self.help_as("mps-control-daemon")
        self.assertTrue(out.startswith("Usage: mps-control-daemon [flags] [mount-shm]\n"),
                        out[:200])
        self.assertEqual(help_flags(out), self.MPS | self.OURS)
        self.assertFalse(help_flags(out) & (self.GFD - self.MPS))
        self.assertIn("mount-shm", out)

    def test_plugin_lists_its_whole_table_and_not_the_others(self):
        r = self.run_plugin(["--help"])
        self.assertEqual(r.returncode, 0)
        flags = help_flags(r.stdout)
        self.assertTrue(self.PLUGIN_ONLY <= flags, self.PLUGIN_ONLY - flags)
        self.assertNotIn("--oneshot", flags)  # gpu-feature-discovery's


if __name__ == "__main__":
    harness.main()
