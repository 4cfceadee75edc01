#!/usr/bin/python3
"""Junk and idle peers on the plugin socket do not stop it serving."""
import socket

import harness
from harness import RESOURCE

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Junk(harness.PluginTestCase):
    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.plugin_socket())
        self.addCleanup(s.close)
        return s

    def allocate_ok(self):
        uuid = harness.load_profile("a100")[0]["uuid"]
        r = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE, "containers": [[uuid]]})
        self.assertNotIn("error", r, r)
        self.assertEqual(r["containers"][0]["envs"].get("NVIDIA_VISIBLE_DEVICES"), uuid)

    def test_garbage_and_idle(self):
        self.start_all("a100")
        idle = self.connect()            # connects, never says anything
        junk = self.connect()
        junk.sendall(b"\x00\xff GET / HTTP/1.1\r\n\r\n" + bytes(range(256)) * 8)
        bad_frames = self.connect()       # valid preface, then a nonsense frame
        bad_frames.sendall(H2_PREFACE + b"\x00\x00\x04\xee\x00\x00\x00\x00\x01abcd")
        half = self.connect()             # half a preface, then silence
        half.sendall(H2_PREFACE[:10])
        self.allocate_ok()
        self.assertTrue(self.plugin.alive())
        junk.close()
        bad_frames.close()
        self.allocate_ok()
        self.assertTrue(self.plugin.alive())
        del idle, half

    def test_many_short_connections(self):
        self.start_all("a100")
        for _ in range(200):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.plugin_socket())
            s.sendall(b"junk")
            s.close()
        self.allocate_ok()


if __name__ == "__main__":
    harness.main()
