#!/usr/bin/python3
"""MPS: a shared resource is served only once its MPS control daemon has started
(<mps-root>/<resource>/.started), and then registers without a restart."""
import os

import harness

CONFIG = """version: v1
sharing:
  mps:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""


class MpsReadiness(harness.PluginTestCase):
    def test_waits_for_daemon_then_registers(self):
        self.render("t4")
        self.start_kubelet()
        mps_root = os.path.join(self.tmp, "mps")
        os.makedirs(os.path.join(mps_root, "nvidia.com/gpu"))
        cfg = os.path.join(self.tmp, "config.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG)
        mark = self.kubelet.events.mark()
        self.start_plugin(["--config-file", cfg, "--mps-root", mps_root])
        self.plugin.wait_log("error waiting for MPS daemon for 'nvidia.com/gpu'")
        self.assertFalse(os.path.exists(self.plugin_socket()),
                         "served an MPS resource before its daemon started")
        self.assertEqual(self.kubelet.count("register", mark), 0)
        open(os.path.join(mps_root, "nvidia.com/gpu", ".started"), "w").close()
        reg, devs = self.kubelet.registered(mark)
        self.assertEqual(reg["resource"], "nvidia.com/gpu")
        ids = sorted(d["id"] for d in devs["devices"])
        self.assertEqual(len(ids), 4 * 4)
        self.assertTrue(all("::" in i for i in ids), ids)
        r = self.kubelet.call({"cmd": "allocate", "resource": "nvidia.com/gpu",
                               "containers": [[ids[0]]]})
        envs = r["containers"][0]["envs"]
        self.assertEqual(envs["CUDA_MPS_PIPE_DIRECTORY"], "/mps/nvidia.com/gpu/pipe")


if __name__ == "__main__":
    harness.main()
