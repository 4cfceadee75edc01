#!/usr/bin/python3
"""IMEX channels (reference §5.6): a configured channel is used only when its device node
exists as a character device; missing → dropped with a warning, or exit 1 when
imex.required."""
import os
import stat

import harness


class Imex(harness.PluginTestCase):
    def make_channel(self):
        """A container driver root T/driver-root whose dev/ holds channel0 (/dev/null's
        major:minor: any character device will do)."""
        root = os.path.join(self.tmp, "driver-root")
        d = os.path.join(root, "dev", "nvidia-caps-imex-channels")
        os.makedirs(d)
        os.mknod(os.path.join(d, "channel0"), stat.S_IFCHR | 0o600, os.makedev(1, 3))
        return root

    def allocate_envs(self, devs):
        ids = [d["id"] for d in devs["devices"]]
        r = self.kubelet.call({"cmd": "allocate", "resource": harness.RESOURCE,
                               "containers": [[ids[0]]]})
        return r["containers"][0]["envs"]

    def test_present_channel_is_used(self):
        if os.geteuid() != 0:
            self.skipTest("mknod needs root")
        root = self.make_channel()
        _, devs = self.start_all("t4", ["--imex-channel-ids", "0", "--driver-root-ctr-path", root])
        self.assertEqual(self.allocate_envs(devs).get("NVIDIA_IMEX_CHANNELS"), "0")

    def test_missing_channel_is_dropped(self):
        _, devs = self.start_all("t4", ["--imex-channel-ids", "0", "--driver-root-ctr-path",
                                        os.path.join(self.tmp, "nowhere")])
        self.plugin.wait_log("IMEX channel 0: /dev/nvidia-caps-imex-channels/channel0 not found")
        self.assertNotIn("NVIDIA_IMEX_CHANNELS", self.allocate_envs(devs))

    def test_missing_required_channel_fails(self):
        self.render("t4")
        r = self.run_plugin(self.plugin_args(["--imex-channel-ids", "0", "--imex-required",
                                              "--driver-root-ctr-path",
                                              os.path.join(self.tmp, "nowhere")]))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("IMEX channel 0", r.stderr)
        self.assertIn("imex.required", r.stderr)


if __name__ == "__main__":
    harness.main()
