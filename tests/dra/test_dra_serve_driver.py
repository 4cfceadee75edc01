#!/usr/bin/python3
"""The real binary in DRA mode (as test_dra_serve.py runs it) with a driver root: the
claim's CDI spec carries the driver's files and hooks, found once per node state (issue
29: at start and on SIGHUP, never per Prepare).

usage: test_dra_serve_driver.py <fake-apiserver>"""
import json
import os
import re
import signal
import subprocess
import sys
import unittest

import test_dra_serve as serve
from test_dra_serve import harness
from dra_kubelet import obj, on_node, ref


class ServeDriver(serve.DraServe):
    def test_driver_files_found_at_start_and_on_sighup(self):
        """The claim's spec carries the driver of --driver-root-ctr-path as nvcdi would
        (the stand-in root of nvml-sim-render --driver-root: mounts under --driver-root,
        the four hooks, NVIDIA_CTK_LIBCUDA_DIR; no socket with disable-ipc-discoverer, a
        feature flag we do not implement said once), found once at start: a library added to the
        root is not in the next spec until a SIGHUP, and is after it; the reload keeps the
        process's threads and fds."""
        root = os.path.join(self.tmp, "driver-root")
        r = subprocess.run([harness.SIM_RENDER, "--profile", harness.profile_path("a100"),
                            "--driver-root", root], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        hook = os.path.join(root, "usr", "bin", "nvidia-cdi-hook")
        with open(hook, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(hook, 0o755)
        p = self.start_dra(["--driver-root", root, "--driver-root-ctr-path", root,
                            "--nvidia-cdi-hook-path", "/usr/bin/nvidia-cdi-hook",
                            "--cdi-feature-flags", "disable-ipc-discoverer,enable-coherent-annotations"])
        p.wait_log("--cdi-feature-flags: enable-coherent-annotations is not implemented")
        _, line = p.wait_log("files under %s for the CDI specs" % root)
        ver = re.search(r"driver (\S+): (\d+) files", line).group(1)
        self.kl.register()
        lib = "/usr/lib/x86_64-linux-gnu"
        ptx = "%s/libnvidia-ptxjitcompiler.so.%s" % (lib, ver)

        def prepared_mounts():
            o = self.load(on_node(obj("resourceclaim-from-template-allocated")))
            uid = o["metadata"]["uid"]
            self.assertEqual(self.kl.prepare(ref(o))[uid]["error"], "")
            with open(self.spec_path(uid)) as f:
                common = json.load(f)["containerEdits"]
            self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
            self.assertIn("NVIDIA_CTK_LIBCUDA_DIR=" + lib, common["env"])
            self.assertEqual([h["args"][1] for h in common["hooks"]],
                             ["create-symlinks", "enable-cuda-compat", "update-ldcache",
                              "disable-device-node-modification"])
            self.assertTrue(all(h["path"] == "/usr/bin/nvidia-cdi-hook" for h in common["hooks"]))
            return {m["containerPath"]: m["hostPath"] for m in common["mounts"]}

        mounts = prepared_mounts()
        cuda = "%s/libcuda.so.%s" % (lib, ver)
        self.assertEqual(mounts[cuda], root + cuda)
        self.assertEqual(mounts["/usr/bin/nvidia-smi"], root + "/usr/bin/nvidia-smi")
        self.assertTrue(os.path.exists(root + "/run/nvidia-persistenced/socket"))
        self.assertNotIn("/run/nvidia-persistenced/socket", mounts)  # disable-ipc-discoverer
        with open(root + ptx, "w") as f:
            f.write("not an ELF file")
        self.assertNotIn(ptx, prepared_mounts())  # found once, not per Prepare
        fds, threads = p.fd_count(), len(os.listdir("/proc/%d/task" % p.pid))
        start = p.stderr.mark()
        p.signal(signal.SIGHUP)
        p.wait_log("files under %s for the CDI specs" % root, start=start)
        mounts = prepared_mounts()
        self.assertEqual(mounts[ptx], root + ptx)
        self.assertEqual((p.fd_count(), len(os.listdir("/proc/%d/task" % p.pid))), (fds, threads))


def load_tests(loader, tests, pattern):
    """Only the cases above (the base class's are test_dra_serve.py's)."""
    return unittest.TestSuite(ServeDriver(n) for n in sorted(vars(ServeDriver)) if n.startswith("test_"))


if __name__ == "__main__":
    serve.FAKE = sys.argv.pop(1)
    harness.main()
