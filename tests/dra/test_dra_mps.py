#!/usr/bin/python3
"""MPS sharing of DRA claims end to end (issue 32 items 1 and 2): the real binary as the DRA
plugin (`serve --dra`, against the fake API server and dra_kubelet.py, as test_dra_serve.py)
and as the runner of its desired states (`mps-control-daemon --dra`), with NVIDIA's tools
replaced by recording stand-ins on the runner's PATH.

- Prepare of a claim with an MPS GpuConfig: <plugin dir>/mps/<id>/desired.json (id NVIDIA's:
  claim UID and 5 hex of sha256 of the sorted UUIDs; limits in whole MiB), the runner's exact
  commands (compute mode EXCLUSIVE_PROCESS per GPU, `nvidia-cuda-mps-control -d` with the
  id's pipe and log directories and CUDA_VISIBLE_DEVICES, the thread percentage and each
  device's pinned memory limit), a tmpfs on shm, startup.log; the CDI spec's MPS edits.
- The plugin SIGKILLed and started again: the daemon is not touched (no `quit`), a repeated
  Prepare answers from the checkpoint.
- Unprepare: `quit`, compute mode DEFAULT, shm unmounted, the id's directory gone.
- The runner restarted: it starts the daemons of the desired states again.
- No runner: Prepare fails with NVIDIA's "not yet ready" after its bound and the claim stays
  PrepareStarted; the kubelet's retry, once the runner runs, prepares it.
- A claim forgotten while the plugin was down (its checkpoint of another boot): its desired
  state removed at start, and the runner stops its daemon.
- With the simulator's nvidia-cuda-mps-control (a daemon process with its socket, state file
  and pid file, docs/simulator.md): the daemon holds the claim's limits, lives on with the
  same pid across a SIGKILL and restart of the plugin, and exits at Unprepare.

usage: test_dra_mps.py <fake-apiserver>"""
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("GDP_SOURCE_DIR", ""), "tests", "integration"))
import harness  # noqa: E402
sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "kube"))
from kubetest import scratch  # noqa: E402
from dra_kubelet import FakeApi, CDI_KIND, DRIVER, NODE, Kubelet, cdi_errors, obj, on_node, ref  # noqa: E402

FAKE = None
TOOL = """#!/bin/sh
# Records how it was called (argv, the MPS variables, stdin) and answers 0.
{ printf '%%s' "$(basename "$0")"; for a in "$@"; do printf ' %%s' "$a"; done
  if [ "$(basename "$0")" = nvidia-cuda-mps-control ]; then
    printf ' | pipe=%%s log=%%s visible=%%s' "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY" \\
        "$CUDA_VISIBLE_DEVICES"
    [ $# -eq 0 ] && printf ' | stdin=%%s' "$(cat)"; fi
  echo; } >> %s
"""
MPS = {"defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "1Gi",
       "defaultPerDevicePinnedMemoryLimit": {"1": "2Gi"}}


def alive(pid):
    """A process that runs (an exited one not yet reaped by its new parent does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)



def daemon_pipe(pipe):
    """The pipe directory as the runner names it to the daemon (src/mps/mps-dra.c,
    pipe_for_daemon): itself, or where its sockets would not fit sun_path, a short link."""
    if len(pipe) + len("/control_privileged") + 1 < 108:
        return pipe
    return "/tmp/gpu-device-plugin-mps/" + hashlib.sha256(pipe.encode()).hexdigest()[:12]

class MpsRunner:
    """The MPS runner (`mps-control-daemon --dra`) of a DRA test with sys/proc/dev roots, a
    plugins directory, a bin directory of stand-ins and a log: started, and stopped at
    cleanup with SIGTERM, which must end it with 0 (test_dra_shares.py uses it too)."""

    def runner_env(self):
        return {}

    def start_runner(self):
        env = self.plugin_env(extra=dict(self.runner_env(), GDP_SYSFS_ROOT=self.sys_root,
                                         GDP_MPS_CONTAINER_ROOT=os.path.join(self.tmp, "mpsroot"),
                                         PATH=self.bin + ":/usr/bin:/bin"))
        args = ["--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                "--dev-root", self.dev_root, "--dra", "--kubelet-plugins-directory-path", self.plugins]
        p = harness.Plugin(args, env, self.log, wrap=harness.run_as("mps-control-daemon"))
        self.addCleanup(self.stop_runner, p)
        p.wait_log("running the MPS control daemons of claims")
        self.runner = p
        return p

    def stop_runner(self, p):
        if p.alive():
            p.signal(signal.SIGTERM)
            self.assertEqual(p.wait_exit(), 0, p.stderr.text()[-3000:])


class DraMps(MpsRunner, FakeApi, harness.PluginTestCase):
    def setUp(self):
        super().setUp()
        self.render("a100")
        self.uuids = {"gpu-%d" % g["index"]: g["uuid"] for g in harness.load_profile("a100")}
        self.start_fake_api(FAKE)
        socks = scratch.socket_dir("gdp-mps-")
        self.addCleanup(scratch.remove, socks)
        self.registrar = os.path.join(socks, "plugins_registry")
        self.plugins = os.path.join(socks, "plugins")
        self.mps = os.path.join(self.plugins, DRIVER, "mps")
        self.addCleanup(self.unmount_all)  # before the directories go (LIFO)
        self.cdi = os.path.join(self.tmp, "cdi")
        self.kl = Kubelet(self.registrar)
        self.addCleanup(self.kl.close)
        self.calls = os.path.join(self.tmp, "calls.log")
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        for tool in ("nvidia-smi", "nvidia-cuda-mps-control"):
            path = os.path.join(self.bin, tool)
            with open(path, "w") as f:
                f.write(TOOL % self.calls)
            os.chmod(path, stat.S_IRWXU)
        self.runner = None

    def unmount_all(self):
        with open("/proc/self/mounts") as f:
            for line in f:
                if line.split()[1].startswith(self.mps):
                    os.system("umount -l %s" % line.split()[1])


    def claim(self, name, uid, mps=MPS, devices=("gpu-2", "gpu-3")):
        o = on_node(obj("resourceclaim-two-gpus-allocated"), name=name, uid=uid)
        for r, dev in zip(o["status"]["allocation"]["devices"]["results"], devices):
            r["device"] = dev
        o["status"]["allocation"]["devices"]["config"] = [{
            "source": "FromClaim", "requests": ["gpus"],
            "opaque": {"driver": DRIVER, "parameters": {
                "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                "sharing": {"strategy": "MPS", "mpsConfig": mps}}}}]
        return self.load(o)

    # -- the two processes
    def start_dra(self):
        args = ["--dra", "--node-name", NODE, "--kubeconfig", self.kubeconfig,
                "--kubelet-registrar-directory-path", self.registrar,
                "--kubelet-plugins-directory-path", self.plugins, "--cdi-root", self.cdi]
        p = self.start_plugin(args)
        p.wait_log("ResourceSlices of node %s are up to date" % NODE)
        self.kl.register()
        return p

    def calls_made(self):
        try:
            with open(self.calls) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def wait(self, pred, what, timeout=harness.TIMEOUT):
        end = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > end:
                raise AssertionError("never: %s; calls: %s" % (what, self.calls_made()))
            time.sleep(0.02)

    def mps_id(self, uid, devices):
        uuids = sorted(self.uuids[d] for d in devices)
        return "%s-%s" % (uid, hashlib.sha256(",".join(uuids).encode()).hexdigest()[:5])

    def spec(self, uid):
        with open(os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)) as f:
            return json.load(f)

    # ---------------------------------------------------------------------------------

    def test_runner_without_an_mps_root_waits_quietly(self):
        """The DRA DaemonSet mounts no MPS root and the config shares nothing with MPS: one
        line, then nothing (it used to fail to write <root>/.ready and retry every 30 s,
        loading NVML and saying an error each time)."""
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "mpsroot")))
        p = self.start_runner()
        p.wait_log("No devices are configured for MPS sharing; Waiting indefinitely.")
        time.sleep(0.5)
        text = p.stderr.text()
        self.assertNotIn("failed to create", text)
        self.assertNotIn("Retrying in", text)

    def test_prepare_restarts_unprepare(self):
        self.start_runner()
        self.start_dra()
        uid = "11111111-0000-0000-0000-000000000001"
        o = self.claim("mps-two", uid)
        res = self.kl.prepare(ref(o))
        self.assertEqual(res[uid]["error"], "", res)
        self.assertEqual([d[1] for d in res[uid]["devices"]], ["gpu-2", "gpu-3"])
        ident = self.mps_id(uid, ["gpu-2", "gpu-3"])
        d = os.path.join(self.mps, ident)
        u = sorted([self.uuids["gpu-2"], self.uuids["gpu-3"]])
        with open(os.path.join(d, "desired.json")) as f:
            self.assertEqual(json.load(f), {
                "version": 1, "id": ident, "devices": u, "activeThreadPercentage": 50,
                "multiUser": False, "pinnedDeviceMemoryLimitMiB": {u[0]: 1024, u[1]: 2048}})
        with open(os.path.join(d, "log", "startup.log")) as f:
            self.assertEqual(f.read(), "startup complete\n")
        self.assertTrue(mounted(os.path.join(d, "shm")))
        env = " | pipe=%s log=%s/log visible=%s" % (daemon_pipe(d + "/pipe"), d, ",".join(u))
        self.assertEqual(self.calls_made(), [
            "nvidia-smi -i %s -c EXCLUSIVE_PROCESS" % u[0],
            "nvidia-smi -i %s -c EXCLUSIVE_PROCESS" % u[1],
            "nvidia-cuda-mps-control -d" + env,
            "nvidia-cuda-mps-control" + env + " | stdin=set_default_active_thread_percentage 50",
            "nvidia-cuda-mps-control" + env + " | stdin=set_default_device_pinned_mem_limit %s 1024M" % u[0],
            "nvidia-cuda-mps-control" + env + " | stdin=set_default_device_pinned_mem_limit %s 2048M" % u[1],
        ])
        spec = self.spec(uid)
        self.assertEqual(cdi_errors(spec), [], spec)
        self.assertEqual(spec["kind"], CDI_KIND)
        for dev in spec["devices"]:
            edits = dev["containerEdits"]
            self.assertIn("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", edits["env"])
            opts = ["rw", "nosuid", "nodev", "bind"]
            self.assertEqual(edits["mounts"][-2:], [
                {"hostPath": os.path.join(d, "shm"), "containerPath": "/dev/shm", "options": opts},
                {"hostPath": os.path.join(d, "pipe"), "containerPath": "/tmp/nvidia-mps", "options": opts}])

        # The plugin killed and started again: the daemon runs on, untouched; the kubelet's
        # repeated Prepare is answered from the checkpoint.
        before = self.calls_made()
        self.plugin.kill()
        self.kl.close()
        self.start_dra()
        self.assertEqual(self.kl.prepare(ref(o)), res)
        time.sleep(0.3)
        self.assertEqual(self.calls_made(), before)
        self.assertTrue(os.path.exists(os.path.join(d, "desired.json")))

        # The runner restarted: the daemons of the desired states started again.
        self.stop_runner(self.runner)
        self.assertIn("nvidia-cuda-mps-control" + env + " | stdin=quit", self.calls_made())
        self.assertNotIn("nvidia-smi -i %s -c DEFAULT" % u[0], self.calls_made())
        n = len(self.calls_made())
        self.start_runner()
        self.wait(lambda: os.path.exists(os.path.join(d, "log", "startup.log")) and
                  len(self.calls_made()) >= n + 6, "the daemon started again")
        self.assertIn("nvidia-cuda-mps-control -d" + env, self.calls_made()[n:])

        # Unprepare: quit, compute mode DEFAULT, shm unmounted, the directory gone.
        n = len(self.calls_made())
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
        self.assertFalse(os.path.exists(d))
        self.assertFalse(mounted(os.path.join(d, "shm")))
        self.assertEqual(self.calls_made()[n:], [
            "nvidia-cuda-mps-control" + env + " | stdin=quit",
            "nvidia-smi -i %s -c DEFAULT" % u[0],
            "nvidia-smi -i %s -c DEFAULT" % u[1]])
        self.assertFalse(os.path.exists(os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)))
        # unprepared again (the kubelet repeats): nothing to do
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})

    def test_not_ready_then_retry(self):
        """No runner: NVIDIA's error after its bound, PrepareStarted kept; the retry prepares."""
        self.start_dra()
        uid = "11111111-0000-0000-0000-000000000002"
        o = self.claim("mps-wait", uid, {"multiUser": True})
        t = time.monotonic()
        res = self.kl.prepare(ref(o))
        self.assertIn("MPS control daemon is not yet ready: waiting for MPS control daemon to "
                      "come online", res[uid]["error"])
        self.assertGreater(time.monotonic() - t, 14)
        with open(os.path.join(self.plugins, DRIVER, "checkpoint.json")) as f:
            ck = json.load(f)
        self.assertEqual(ck["preparedClaims"][uid]["checkpointState"], "PrepareStarted")
        ident = self.mps_id(uid, ["gpu-2", "gpu-3"])
        self.assertTrue(os.path.exists(os.path.join(self.mps, ident, "desired.json")))
        self.start_runner()
        res = self.kl.prepare(ref(o))
        self.assertEqual(res[uid]["error"], "", res)
        self.assertIn("nvidia-cuda-mps-control -d -M | pipe=%s" % daemon_pipe(os.path.join(self.mps, ident, "pipe")),
                      "\n".join(self.calls_made()))
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
        self.assertFalse(os.path.exists(os.path.join(self.mps, ident)))

    def test_unprepare_without_runner(self):
        """A desired state no runner ever took: the unprepare removes it itself."""
        self.start_dra()
        uid = "11111111-0000-0000-0000-000000000005"
        o = self.claim("mps-alone", uid)
        ident = self.mps_id(uid, ["gpu-2", "gpu-3"])
        self.kl.prepare(ref(o))  # not ready: no runner
        self.assertTrue(os.path.exists(os.path.join(self.mps, ident)))
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
        self.assertFalse(os.path.exists(os.path.join(self.mps, ident)))

    def test_admin_access_claims_each_their_daemon(self):
        """Two claims holding gpu-2 and gpu-3 at once (the second through adminAccess), each
        with an MPS config: each has its own daemon, and the first one's unprepare stops the
        first one's (it was left running while the other claim held the devices)."""
        self.start_runner()
        self.start_dra()
        first, admin = "11111111-0000-0000-0000-000000000008", "11111111-0000-0000-0000-000000000009"
        a = self.claim("mps-first", first)
        self.assertEqual(self.kl.prepare(ref(a))[first]["error"], "")
        b = on_node(obj("resourceclaim-two-gpus-allocated"), name="mps-admin", uid=admin)
        for r, dev in zip(b["status"]["allocation"]["devices"]["results"], ("gpu-2", "gpu-3")):
            r["device"] = dev
            r["adminAccess"] = True
        b["status"]["allocation"]["devices"]["config"] = a["status"]["allocation"]["devices"]["config"]
        self.load(b)
        self.assertEqual(self.kl.prepare(ref(b))[admin]["error"], "")
        ida, idb = self.mps_id(first, ["gpu-2", "gpu-3"]), self.mps_id(admin, ["gpu-2", "gpu-3"])
        self.assertNotEqual(ida, idb)
        self.assertEqual(self.kl.unprepare(ref(a)), {first: ""})
        self.wait(lambda: not os.path.exists(os.path.join(self.mps, ida)), "the first daemon stopped")
        self.assertTrue(os.path.exists(os.path.join(self.mps, idb, "desired.json")))
        self.assertEqual(self.kl.unprepare(ref(b)), {admin: ""})
        self.wait(lambda: not os.path.exists(os.path.join(self.mps, idb)), "the second daemon stopped")

    def test_claim_forgotten_while_down(self):
        self.start_runner()
        self.start_dra()
        keep, gone = "11111111-0000-0000-0000-000000000003", "11111111-0000-0000-0000-000000000004"
        c = self.claim("mps-keep", keep)
        self.assertEqual(self.kl.prepare(ref(c))[keep]["error"], "")
        b = self.claim("mps-gone", gone, devices=("gpu-4", "gpu-5"))
        self.assertEqual(self.kl.prepare(ref(b))[gone]["error"], "")
        ident = self.mps_id(gone, ["gpu-4", "gpu-5"])
        self.assertTrue(os.path.exists(os.path.join(self.mps, ident, "log", "startup.log")))
        self.plugin.signal(signal.SIGTERM)
        self.assertEqual(self.plugin.wait_exit(), 0)
        self.kl.close()
        # The claim disappears from the checkpoint while the plugin is down.
        path = os.path.join(self.plugins, DRIVER, "checkpoint.json")
        with open(path) as f:
            ck = json.load(f)
        del ck["preparedClaims"][gone]
        with open(path, "w") as f:
            json.dump(ck, f)
        self.start_dra()
        self.plugin.wait_log("MPS: the claim of control daemon %s is not prepared" % ident)
        self.wait(lambda: not os.path.exists(os.path.join(self.mps, ident)), "the daemon stopped")
        self.assertTrue(os.path.exists(os.path.join(self.mps, self.mps_id(keep, ["gpu-2", "gpu-3"]),
                                                    "desired.json")))
        self.assertEqual(self.kl.unprepare(ref(c)), {keep: ""})

    def test_simulated_daemon_outlives_the_plugin(self):
        driver = os.path.join(self.tmp, "driver")
        r = subprocess.run([harness.SIM_RENDER, "--profile", harness.profile_path("a100"),
                            "--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                            "--dev-root", os.path.join(self.dev_root, "dev"), "--driver-root", driver],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        tool = os.path.join(self.bin, "nvidia-cuda-mps-control")
        with open(tool, "w") as f:
            f.write("#!/bin/sh\nMOCK_MPS_LOG=%s exec %s \"$@\"\n" % (
                os.path.join(self.tmp, "mps.log"), os.path.join(driver, "usr", "bin", "nvidia-cuda-mps-control")))
        self.start_runner()
        self.start_dra()
        uid = "11111111-0000-0000-0000-000000000006"
        o = self.claim("mps-sim", uid)
        ident = self.mps_id(uid, ["gpu-2", "gpu-3"])
        pipe = os.path.join(self.mps, ident, "pipe")
        pidfile = os.path.join(pipe, "nvidia-cuda-mps-control.pid")
        self.addCleanup(self.kill_daemon, pidfile)
        res = self.kl.prepare(ref(o))
        self.assertEqual(res[uid]["error"], "", res)
        with open(pidfile) as f:
            pid = int(f.read())
        self.assertTrue(alive(pid))
        u = sorted([self.uuids["gpu-2"], self.uuids["gpu-3"]])
        with open(os.path.join(pipe, "nvidia-sim-mps.state")) as f:
            state = f.read().splitlines()
        self.assertEqual(state[1:], ["multiuser 0", "default_active_thread_percentage 50.0",
                                     "default_device_pinned_mem_limit %s %d" % (u[0], 1 << 30),
                                     "default_device_pinned_mem_limit %s %d" % (u[1], 2 << 30)])
        # the plugin killed and started again: the same daemon serves on
        self.plugin.kill()
        self.kl.close()
        self.start_dra()
        self.assertEqual(self.kl.prepare(ref(o)), res)
        self.assertTrue(alive(pid))
        with open(pidfile) as f:
            self.assertEqual(int(f.read()), pid)
        # unprepare: the daemon quits, its directory goes
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
        self.wait(lambda: not alive(pid), "the daemon gone")
        self.assertFalse(os.path.exists(os.path.join(self.mps, ident)))

    def test_long_plugins_directory(self):
        """A plugins directory of 70 bytes (MicroK8s's is 45; the flag takes 78): the daemon's
        socket <plugins>/gpu.nvidia.com/mps/<id>/pipe/control would be past sun_path's 108
        bytes, so the runner names the pipe directory to the daemon by a short link of its
        own (/tmp/gpu-device-plugin-mps/<12 hex>); the claim is prepared, the daemon serves
        from the real directory, and the link goes with it at unprepare."""
        socks = os.path.dirname(self.plugins)
        self.plugins = os.path.join(socks, "p" * max(1, 70 - len(socks) - 1))
        self.assertLessEqual(len(self.plugins), 78)
        self.mps = os.path.join(self.plugins, DRIVER, "mps")
        driver = os.path.join(self.tmp, "driver")
        r = subprocess.run([harness.SIM_RENDER, "--profile", harness.profile_path("a100"),
                            "--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                            "--dev-root", os.path.join(self.dev_root, "dev"), "--driver-root", driver],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        tool = os.path.join(self.bin, "nvidia-cuda-mps-control")
        with open(tool, "w") as f:
            f.write("#!/bin/sh\nexec %s \"$@\"\n" % os.path.join(driver, "usr", "bin", "nvidia-cuda-mps-control"))
        self.start_runner()
        self.start_dra()
        uid = "11111111-0000-0000-0000-000000000007"
        o = self.claim("mps-long", uid)
        ident = self.mps_id(uid, ["gpu-2", "gpu-3"])
        pipe = os.path.join(self.mps, ident, "pipe")
        self.assertGreater(len(pipe) + len("/control"), 107)
        pidfile = os.path.join(pipe, "nvidia-cuda-mps-control.pid")
        self.addCleanup(self.kill_daemon, pidfile)
        res = self.kl.prepare(ref(o))
        self.assertEqual(res[uid]["error"], "", res)
        self.assertTrue(os.path.exists(os.path.join(pipe, "control")))
        link = daemon_pipe(pipe)
        self.assertEqual(os.readlink(link), pipe)
        with open(pidfile) as f:
            pid = int(f.read())
        self.assertEqual(self.kl.unprepare(ref(o)), {uid: ""})
        self.wait(lambda: not alive(pid), "the daemon gone")
        self.assertFalse(os.path.lexists(link))

    def kill_daemon(self, pidfile):
        try:
            with open(pidfile) as f:
                os.kill(int(f.read()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


if __name__ == "__main__":
    FAKE = sys.argv.pop(1)
    harness.main()
