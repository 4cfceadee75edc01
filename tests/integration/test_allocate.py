#!/usr/bin/python3
"""Allocate and GetPreferredAllocation through the test kubelet."""
import harness
from harness import RESOURCE

UNKNOWN_MSG = 'invalid allocation request for "nvidia.com/gpu": invalid request: unknown device: %s'


class Allocate(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.start_all("a100")
        self.uuids = [g["uuid"] for g in harness.load_profile("a100")]

    def allocate(self, containers):
        return self.kubelet.call({"cmd": "allocate", "resource": RESOURCE, "containers": containers})

    def test_one(self):
        r = self.allocate([[self.uuids[3]]])
        self.assertNotIn("error", r, r)
        self.assertEqual(len(r["containers"]), 1)
        self.assertEqual(r["containers"][0]["envs"].get("NVIDIA_VISIBLE_DEVICES"), self.uuids[3])

    def test_many_in_request_order(self):
        order = [self.uuids[5], self.uuids[0], self.uuids[7]]
        r = self.allocate([order, [self.uuids[2]]])
        self.assertNotIn("error", r, r)
        self.assertEqual(len(r["containers"]), 2)
        self.assertEqual(r["containers"][0]["envs"].get("NVIDIA_VISIBLE_DEVICES"), ",".join(order))
        self.assertEqual(r["containers"][1]["envs"].get("NVIDIA_VISIBLE_DEVICES"), self.uuids[2])

    def test_unknown_id(self):
        bad = "GPU-00000000-dead-beef-0000-000000000000"
        r = self.allocate([[self.uuids[0], bad]])
        self.assertIn("error", r, r)
        self.assertEqual(r["error"]["code"], "UNKNOWN")
        self.assertEqual(r["error"]["message"], UNKNOWN_MSG % bad)
        self.assertTrue(self.plugin.alive())

    def test_empty_request(self):
        r = self.allocate([])
        self.assertNotIn("error", r, r)
        self.assertEqual(r["containers"], [])
        # A container asking for nothing: answered one way or the other, never a crash.
        r = self.allocate([[]])
        self.assertTrue("error" in r or len(r["containers"]) == 1, r)
        self.assertTrue(self.plugin.alive())
        self.assertNotIn("error", self.allocate([[self.uuids[1]]]))

    def test_ten_thousand_ids(self):
        many = [self.uuids[i % len(self.uuids)] for i in range(10000)]
        r = self.allocate([many])
        self.assertNotIn("error", r, r)
        visible = r["containers"][0]["envs"].get("NVIDIA_VISIBLE_DEVICES", "")
        self.assertEqual(set(visible.split(",")), set(self.uuids))

        bad = "GPU-ffffffff-0000-0000-0000-000000007777"
        many[7777] = bad
        r = self.allocate([many])
        self.assertIn("error", r, r)
        self.assertEqual(r["error"]["code"], "UNKNOWN")
        self.assertIn(bad, r["error"]["message"])
        self.assertTrue(self.plugin.alive())
        r = self.allocate([[self.uuids[0]]])
        self.assertEqual(r["containers"][0]["envs"].get("NVIDIA_VISIBLE_DEVICES"), self.uuids[0])


class Preferred(harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.start_all("a100")
        self.uuids = [g["uuid"] for g in harness.load_profile("a100")]

    def preferred(self, available, must_include, size):
        r = self.kubelet.call({"cmd": "preferred", "resource": RESOURCE, "containers": [
            {"available": available, "must_include": must_include, "size": size}]})
        self.assertNotIn("error", r, r)
        self.assertEqual(len(r["containers"]), 1, r)
        return r["containers"][0]

    def check(self, available, must_include, size):
        got = self.preferred(available, must_include, size)
        self.assertEqual(len(got), size, got)
        self.assertEqual(len(set(got)), size, "duplicates in %s" % got)
        self.assertTrue(set(got) <= set(available), got)
        self.assertTrue(set(must_include) <= set(got), got)
        # Deterministic: the same question gets the same answer.
        self.assertEqual(self.preferred(available, must_include, size), got)
        return got

    def test_sizes(self):
        for size in (1, 2, 4, 8):
            self.check(self.uuids, [], size)

    def test_must_include(self):
        self.check(self.uuids, [self.uuids[6]], 4)
        self.check(self.uuids[2:], [self.uuids[2], self.uuids[7]], 3)
        self.check(self.uuids[:5], self.uuids[:5], 5)

    def test_several_containers(self):
        r = self.kubelet.call({"cmd": "preferred", "resource": RESOURCE, "containers": [
            {"available": self.uuids, "must_include": [], "size": 2},
            {"available": self.uuids[4:], "must_include": [self.uuids[5]], "size": 1}]})
        self.assertNotIn("error", r, r)
        self.assertEqual(len(r["containers"]), 2)
        self.assertEqual(len(r["containers"][0]), 2)
        self.assertEqual(r["containers"][1], [self.uuids[5]])


if __name__ == "__main__":
    harness.main()
