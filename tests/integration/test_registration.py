#!/usr/bin/python3
"""Registration contents and the advertised device lists of each shared profile."""
import harness
from harness import RESOURCE, ENDPOINT, REGISTERED_LINE


class Registration(harness.PluginTestCase):
    def test_register_contents(self):
        reg, _ = self.start_all("a100")
        self.assertEqual(reg["resource"], RESOURCE)
        self.assertEqual(reg["endpoint"], ENDPOINT)
        self.assertEqual(reg["version"], "v1beta1")
        self.assertEqual(reg["options"], {"pre_start_required": False,
                                          "get_preferred_allocation_available": True})
        # The kubelet's dial-back GetDevicePluginOptions, answered before Register returns.
        opts = self.kubelet.wait("options", resource=RESOURCE)
        self.assertEqual(opts["options"], reg["options"])
        self.assertSocket(self.plugin_socket())
        self.plugin.wait_log(REGISTERED_LINE)
        again = self.kubelet.call({"cmd": "options", "resource": RESOURCE})
        self.assertEqual(again.get("options"), reg["options"], again)
        self.assertEqual(self.kubelet.count("register"), 1)


class DeviceLists(harness.PluginTestCase):
    def check_profile(self, profile):
        _, devs = self.start_all(profile)
        want = self.expected_devices(profile)
        got = {d["id"]: d for d in devs["devices"]}
        self.assertEqual(len(got), len(devs["devices"]), "duplicate IDs: %s" % devs)
        self.assertEqual(set(got), set(want))
        for uuid, numa in want.items():
            self.assertEqual(got[uuid]["health"], "Healthy", got[uuid])
            self.assertEqual(got[uuid]["numa"], numa, "NUMA of %s" % uuid)

    def test_a100(self):
        self.check_profile("a100")

    def test_h100(self):
        self.check_profile("h100")

    def test_t4(self):
        self.check_profile("t4")

    def test_profiles_are_what_we_think(self):
        # Guards the expectations above: the shared profiles have 8/8/4 GPUs with
        # NUMA from pcie_topology.
        self.assertEqual([g["numa"] for g in harness.load_profile("a100")], [0] * 4 + [1] * 4)
        self.assertEqual([g["numa"] for g in harness.load_profile("h100")], [0] * 4 + [1] * 4)
        self.assertEqual([g["numa"] for g in harness.load_profile("t4")], [0] * 4)


if __name__ == "__main__":
    harness.main()
