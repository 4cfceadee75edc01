#!/usr/bin/python3
"""Idle means no wakeups (a product goal: NVIDIA's plugin wakes ~600 times a minute). Once
the kubelet has its ListAndWatch stream and the last request was answered, no thread of
the plugin may run until something happens: no timer left armed by a finished request
(the 10 s request deadline), none for a connection that holds a stream (the idle-connection
timeout), none in the health thread. Checked by the context switches of every thread
(/proc/PID/task/*/status) over a window longer than the request deadline, at the
plugin's default limits. This counts events, it does not time anything."""
import os
import time

import harness
from harness import RESOURCE

REQUEST_DEADLINE_S = 10  # grpc_server_new()'s default; the window must cover it


def switches(pid):
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            out[tid] = sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
    return out


class Idle(harness.PluginTestCase):
    def test_no_wakeups_after_the_last_request(self):
        self.start_all("a100")
        uuids = [g["uuid"] for g in harness.load_profile("a100")]
        ok = self.kubelet.call({"cmd": "allocate", "resource": RESOURCE,
                                "containers": [[uuids[0]]]})
        self.assertNotIn("error", ok, ok)
        pref = self.kubelet.call({"cmd": "preferred", "resource": RESOURCE, "containers": [
            {"available": uuids, "must_include": [], "size": 2}]})
        self.assertNotIn("error", pref, pref)
        time.sleep(0.5)  # the answers' writes and the kubelet's acknowledgements settle
        before = switches(self.plugin.pid)
        time.sleep(REQUEST_DEADLINE_S + 2)
        after = switches(self.plugin.pid)
        woke = {t: after[t] - before.get(t, 0) for t in after if after[t] != before.get(t, 0)}
        self.assertEqual(woke, {}, "threads that woke while idle (tid: context switches)")
        self.assertTrue(self.plugin.alive())


if __name__ == "__main__":
    harness.main()
