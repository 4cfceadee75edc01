#!/usr/bin/python3
"""Configuration errors at start-up: exit 1 before anything registers, with the
reference's message on stderr (§1.3, §3.6, §4.3)."""
import os

import compat
from compat import harness

TS = ("version: v1\n"
      "sharing:\n"
      "  timeSlicing:\n"
      "    resources:\n"
      "    - name: nvidia.com/gpu\n"
      "      replicas: %s\n")
MPS = TS.replace("timeSlicing", "mps") % 2


class StartErrors(harness.PluginTestCase):
    def fails(self, profile, args, message, config=None, pattern_file=False):
        if isinstance(profile, dict):
            profile = self.write_profile(profile)
        self.render(profile) if profile in compat.SHARED_PROFILES else self.render_sim(profile)
        self.start_kubelet()
        if config is not None:
            path = os.path.join(self.tmp, "config.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(config)
            args = ["--config-file", path] + list(args)
        env = self.plugin_env(profile=None, extra={"MOCK_NVML_CONFIG": self.profile_file(profile)})
        p = self.start_plugin(args, env=env)
        rc = p.wait_exit()
        p.stderr._thread.join(5)
        err = p.stderr.text()
        self.assertEqual(rc, 1, "exit code; stderr:\n" + err)
        self.assertIn(message, err)
        if pattern_file:
            self.assertRegex(err, r"config\.yaml:\d+(:\d+)?:")
        self.assertEqual(self.kubelet.count("register"), 0, self.kubelet.events.text())
        self.assertEqual([f for f in os.listdir(self.dp) if f != "kubelet.sock"], [],
                         "plugin sockets left behind")
        return err

    def profile_file(self, profile):
        return profile if os.path.isabs(profile) else compat.profile_path(profile)

    def write_profile(self, doc):
        import yaml
        path = os.path.join(self.tmp, "profile.yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(doc, f)
        return path

    def derived(self, name, change):
        """A sim profile loaded, changed by change(doc), returned for fails()."""
        import yaml
        with open(compat.profile_path(name), encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        change(doc)
        return doc

    def render_sim(self, profile):
        # harness.render() only knows the shared profiles; same steps for sim/profiles.
        import subprocess
        r = subprocess.run([harness.SIM_RENDER, "--profile", self.profile_file(profile),
                            "--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                            "--dev-root", self.dev_root], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        os.mkfifo(self.ctl, 0o600)

    def test_garbage_config(self):
        self.fails("a100", [], "config.yaml:", config="flags: [\n  {{{ :\n", pattern_file=True)

    def test_replicas_one(self):
        err = self.fails("a100", [], "number of replicas must be >= 2", config=TS % 1, pattern_file=True)
        self.assertIn("sharing.timeSlicing.resources[0].replicas", err)

    def test_unknown_version(self):
        self.fails("t4", [], "unknown version: v2", config="version: v2\n")

    def test_missing_config_file(self):
        self.fails("t4", ["--config-file", os.path.join("/nonexistent", "config.yaml")], "reading config file")

    def test_bad_device_list_strategy(self):
        self.fails("t4", ["--device-list-strategy", "bogus"],
                   "invalid --device-list-strategy option: invalid strategy: bogus")

    def test_bad_device_id_strategy(self):
        self.fails("t4", ["--device-id-strategy", "serial"], "invalid --device-id-strategy option: serial")

    def test_bad_mig_strategy(self):
        self.fails("t4", ["--mig-strategy", "both"], "unknown MIG strategy: both")

    def test_mps_without_root(self):
        self.fails("h100", [], "using MPS requires --mps-root to be specified", config=MPS)

    def test_mps_with_mixed(self):
        self.fails("h100", ["--mig-strategy", "mixed", "--mps-root", os.path.join(self.tmp, "mps")],
                   "using --mig-strategy=mixed is not supported with MPS", config=MPS)

    def test_mps_with_mig_devices(self):
        self.fails("a100-mig-single", ["--mig-strategy", "single", "--mps-root", os.path.join(self.tmp, "mps")],
                   "sharing using MPS is not supported for MIG devices", config=MPS)

    # §4.3: the single strategy's checks run in the reference's order, so on a node with
    # several problems the same message wins as with NVIDIA's plugin (runbooks key on it).
    def test_single_on_mixed_migenabled(self):
        # a100-mig-mixed: two full GPUs *and* several MIG types: the type check comes first
        self.fails("a100-mig-mixed", ["--mig-strategy", "single"],
                   "more than one MIG device type present on node")

    def test_single_full_gpu_beside_uniform_migs(self):
        def one_gpu_without_mig(doc):
            doc["devices"][7]["mig"] = {"mode_current": "disabled"}
        self.fails(self.derived("a100-mig-single", one_gpu_without_mig), ["--mig-strategy", "single"],
                   "all devices on the node must be configured with the same migEnabled value")

    def test_single_gpu_without_mig_devices_wins(self):
        def empty_gpu3(doc):
            doc["devices"][3]["mig"]["gpu_instances"] = []
        err = self.fails(self.derived("a100-mig-mixed", empty_gpu3), ["--mig-strategy", "single"],
                         "device 3 has no MIG devices configured")
        self.assertNotIn("more than one MIG device type", err)

    def test_single_with_two_types(self):
        self.fails("h100-mig", ["--mig-strategy", "single"], "more than one MIG device type present on node")

    def test_mixed_with_partial_compute_instance(self):
        self.fails("a100-mig-mixed", ["--mig-strategy", "mixed"],
                   "MIG profile '1c.2g.10gb' does not match any resource patterns")


if __name__ == "__main__":
    harness.main()
