#!/usr/bin/python3
"""The `mps-control-daemon` entrypoint (the binary run under that name) with NVIDIA's tools
replaced by recording stand-ins on PATH (this machine has no driver): for a config that
shares nvidia.com/gpu with MPS it sets each GPU's compute mode, starts
nvidia-cuda-mps-control -d with the resource's pipe and log directories, sends the pinned
memory and thread limits, writes .started and .ready; the plugin, pointed at the same MPS
root, then serves the resource; SIGTERM quits the daemon and puts the compute mode back.
A missing tool is one error line naming it, and a retry."""
import os
import signal
import stat
import time

import harness
from harness import RESOURCE

REPLICAS = 2
CONFIG = ("version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n"
          "      replicas: %d\n" % REPLICAS)
TOOL = """#!/bin/sh
# Records how it was called (argv, the MPS directories, stdin) and answers 0.
{ printf '%%s' "$(basename "$0")"; for a in "$@"; do printf ' %%s' "$a"; done
  printf ' | pipe=%%s log=%%s' "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if [ "$(basename "$0")" = nvidia-cuda-mps-control ] && [ $# -eq 0 ]; then
      printf ' | stdin=%%s' "$(cat)"; fi
  echo; } >> %s
"""


class MpsControlDaemon(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.render("a100")
        self.gpus = harness.load_profile("a100")
        self.root = os.path.join(self.tmp, "mps")
        os.mkdir(self.root)
        self.calls = os.path.join(self.tmp, "calls.log")
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        for tool in ("nvidia-smi", "nvidia-cuda-mps-control"):
            path = os.path.join(self.bin, tool)
            with open(path, "w") as f:
                f.write(TOOL % self.calls)
            os.chmod(path, stat.S_IRWXU)
        self.config = os.path.join(self.tmp, "config.yaml")
        with open(self.config, "w") as f:
            f.write(CONFIG)

    def start(self, path=None):
        env = self.plugin_env(extra={"GDP_SYSFS_ROOT": self.sys_root,
                                     "GDP_MPS_CONTAINER_ROOT": self.root,
                                     "CONFIG_FILE": self.config,
                                     "PATH": (path or self.bin) + ":/usr/bin:/bin"})
        rename = harness.run_as('mps-control-daemon')
        args = ["--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                "--dev-root", self.dev_root]
        p = harness.Plugin(args, env, self.log, wrap=rename)
        self.addCleanup(self.stop, p)
        return p

    def stop(self, p):
        if p.alive():
            p.signal(signal.SIGTERM)
            self.assertEqual(p.wait_exit(), 0)

    def calls_made(self):
        try:
            with open(self.calls) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def wait_file(self, path, timeout=harness.TIMEOUT):
        end = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > end:
                raise AssertionError("%s never appeared; calls: %s" % (path, self.calls_made()))
            time.sleep(0.05)

    def test_daemon_started_for_the_plugin_and_stopped(self):
        p = self.start()
        res = os.path.join(self.root, "nvidia.com", "gpu")
        self.wait_file(os.path.join(self.root, ".ready"))
        self.assertTrue(os.path.exists(os.path.join(res, ".started")))
        calls = self.calls_made()
        pipe = "pipe=%s/pipe log=%s/log" % (res, res)
        uuids = [g["uuid"] for g in self.gpus]
        for u in uuids:
            self.assertIn("nvidia-smi -i %s -c EXCLUSIVE_PROCESS | pipe= log=" % u, calls)
        self.assertIn("nvidia-cuda-mps-control -d | %s" % pipe, calls)
        limits = [c for c in calls if "set_default_device_pinned_mem_limit" in c]
        self.assertEqual(len(limits), len(uuids), calls)
        self.assertIn("stdin=set_default_device_pinned_mem_limit 0 %dM" %
                      (self.gpus[0]["memory"] // REPLICAS // 2**20), limits[0])
        self.assertIn("nvidia-cuda-mps-control | %s | stdin=set_default_active_thread_percentage %d"
                      % (pipe, 100 // REPLICAS), calls)
        self.assertTrue(os.path.isdir(os.path.join(res, "log")))
        # The plugin on the same MPS root serves the shared resource.
        self.start_kubelet()
        plugin = harness.Plugin(self.plugin_args(["--mps-root", self.root,
                                                  "--config-file", self.config]),
                                self.plugin_env(), self.log)
        self.addCleanup(self.stop, plugin)
        _, devs = self.kubelet.registered()
        self.assertEqual(len(devs["devices"]), REPLICAS * len(uuids))
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE,
                               "containers": [[devs["devices"][0]["id"]]]})
        self.assertNotIn("error", r, r)
        # SIGTERM: quit, compute mode back, .started and .ready gone.
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_exit(), 0)
        calls = self.calls_made()
        self.assertIn("nvidia-cuda-mps-control | %s | stdin=quit" % pipe, calls)
        for u in uuids:
            self.assertIn("nvidia-smi -i %s -c DEFAULT | pipe= log=" % u, calls)
        self.assertFalse(os.path.exists(os.path.join(res, ".started")))
        self.assertFalse(os.path.exists(os.path.join(self.root, ".ready")))

    def test_missing_tool_is_named_and_fatal(self):
        # No driver tools: no retry can help, and a pod that stayed up would look healthy
        # while serving nothing (NVIDIA's MPS DaemonSets have no probe): one line, exit 1.
        empty = os.path.join(self.tmp, "empty")
        os.mkdir(empty)
        p = self.start(path=empty)
        self.assertEqual(p.wait_exit(), 1)
        errors = [l for l in p.stderr.lines if l.startswith("E")]
        self.assertEqual(len(errors), 1, p.stderr.text())
        self.assertIn("nvidia-smi", errors[0])
        self.assertIn("not on PATH", errors[0])
        self.assertFalse(any("Retrying" in l for l in p.stderr.lines), p.stderr.text())
        self.assertFalse(os.path.exists(os.path.join(self.root, ".ready")))


if __name__ == "__main__":
    harness.main()
