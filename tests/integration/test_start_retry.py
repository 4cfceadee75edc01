#!/usr/bin/python3
"""A plugin socket that cannot be bound at start (here: a directory in the way) is
reported naming the path and retried with backoff; once the path is free the resource
serves and registers, in the same process."""
import os
import shutil

import harness


class StartRetry(harness.PluginTestCase):
    def test_bind_failure_is_retried(self):
        self.render("t4")
        self.start_kubelet()
        blocker = os.path.join(self.dp, harness.ENDPOINT)
        os.makedirs(os.path.join(blocker, "in-the-way"))
        mark = self.kubelet.events.mark()
        self.start_plugin()
        self.plugin.wait_log("serving 'nvidia.com/gpu' on %s: Is a directory; retrying" % blocker)
        self.assertEqual(self.kubelet.count("register", mark), 0)
        pid = self.plugin.pid
        shutil.rmtree(blocker)
        reg, devs = self.kubelet.registered(mark)
        self.assertEqual(reg["endpoint"], harness.ENDPOINT)
        self.assertEqual({d["id"] for d in devs["devices"]}, set(self.expected_devices()))
        self.assertEqual(self.plugin.pid, pid)


if __name__ == "__main__":
    harness.main()
