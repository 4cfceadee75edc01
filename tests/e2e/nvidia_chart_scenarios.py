"""The e2e scenario of NVIDIA's own chart running our image (issue 19): the manifests NVIDIA's
k8s-device-plugin chart v0.20.0 renders (tests/data/nvidia-chart-v0.20.0, image set to
ours), applied as they are, except what this cluster needs to let a pod reach its API
server (it has no kube-proxy: hostNetwork and the API address, as render_chart_api does for
our chart). Runs last (it replaces our chart's DaemonSet). Uses scenarios.py's helpers,
which runs them (it is __main__).

  nvidia-chart  defaults: the plugin container (command nvidia-device-plugin) registers every
                GPU; with a config map and gfd.enabled: the config-manager init container
                picks the config the node label names (time-slicing: capacity GPUs x 4), the
                config-manager sidecar follows a label change live and signals the plugin
                (capacity back to the GPUs), and the gpu-feature-discovery container
                publishes the NodeFeature object, its replicas label following the config
  gpu-operator  the GPU Operator's device-plugin DaemonSet (tests/data/gpu-operator): the
                entrypoint script waits for driver-ready; a config picked and switched by
                node label
  gpu-operator-gfd  its GFD DaemonSet: process 1 is our binary as gpu-feature-discovery, the
                NodeFeature object published and left alone while nothing changes, the pod
                Ready without restarts; collected with the DaemonSet
  gpu-operator-mps  its MPS control daemon DaemonSet on a node labelled MPS-capable with an
                MPS config: mount-shm's tmpfs on the host; the daemon says in one line that
                nvidia-smi is missing and exits 1 (the pod restarts and is never Ready), and
                never writes .ready or .started
"""

import contextlib
import json
import os
import subprocess
import time

import yaml

import __main__ as h

NS = "nvidia-device-plugin"
LABEL = "nvidia.com/device-plugin.config"
DATA = "nvidia-chart-v0.20.0"
API_CLIENTS = ("config-manager", "gpu-feature-discovery")


def with_api_address(docs):
    """docs, with this cluster's API address added to the pods that use the API (see
    above): hostNetwork and KUBERNETES_SERVICE_HOST/PORT on every container."""
    for d in docs:
        spec = d.get("spec", {}).get("template", {}).get("spec") if d["kind"] == "DaemonSet" \
            else None
        if spec and any(c.get("command", [""])[0] in API_CLIENTS
                        for c in spec.get("initContainers", []) + spec["containers"]):
            spec["hostNetwork"] = True
            for c in spec.get("initContainers", []) + spec["containers"]:
                c.setdefault("env", [])
                c["env"] += [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                             {"name": "KUBERNETES_SERVICE_PORT", "value": "16443"}]
    return yaml.safe_dump_all(docs, sort_keys=False)


def manifests(name, data=DATA):
    """A rendered chart (or the operator's objects) from tests/data, as above."""
    path = os.path.join(h.A.source, "tests", "data", data, name + ".yaml")
    return with_api_address([d for d in yaml.safe_load_all(open(path)) if d])


PLUGIN_DS = "nvdp-nvidia-device-plugin"
GFD_DS = "nvdp-nvidia-device-plugin-gpu-feature-discovery"


def pods(ds):
    """The pods of DaemonSet ds (the chart gives all its DaemonSets' pods the same labels)."""
    return [p for p in h.reaped(h.kjson("get", "pods", "-n", NS)["items"])
            if [o.get("name") for o in p["metadata"].get("ownerReferences", [])] == [ds]
            and not p["metadata"].get("deletionTimestamp")]


def wait_pod(ds, not_uids=()):
    def one():
        ps = pods(ds)
        if len(ps) == 1 and h.running_ready(ps[0]) and ps[0]["metadata"]["uid"] not in not_uids:
            return ps[0]
        return None
    return h.wait(f"one Running pod of {NS}/{ds}", one)


def nodefeature():
    r = h.kubectl("get", "nodefeature", "-n", NS, f"nvidia-features-for-{h.NODE}", "-o", "json",
                  check=False)
    return json.loads(r).get("spec", {}).get("labels", {}) if r else {}


def s_nvidia_chart(ctx):
    n = ctx["ngpus"]
    # Our chart's DaemonSets go: one plugin per resource on a node.
    for ds in h.kjson("get", "daemonsets", "-n", "kube-system")["items"]:
        if ds["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "gpu-device-plugin":
            h.kubectl("delete", "daemonset", "-n", "kube-system", ds["metadata"]["name"],
                      "--wait=true")
    h.wait("our plugin pods gone", lambda: not h.plugin_pods())
    h.kubectl("create", "namespace", NS, check=False)
    h.kubectl("label", "node", h.NODE, f"{LABEL}-", check=False)

    h.kubectl("apply", "-f", "-", stdin=manifests("default"))
    pod = wait_pod(PLUGIN_DS)
    ctr = pod["spec"]["containers"][0]
    print(f"  NVIDIA's chart, defaults: pod {pod['metadata']['name']}, container {ctr['name']} "
          f"command {ctr['command']}, image {ctr['image']}")
    h.wait_node_gpus(n, n)
    h.show_node_gpus()

    h.kubectl("label", "node", h.NODE, f"{LABEL}=ts", "--overwrite")
    old = {pod["metadata"]["uid"]}
    h.kubectl("apply", "-f", "-", stdin=manifests("configs-gfd"))
    pod = wait_pod(PLUGIN_DS, old)
    init = [c["name"] for c in pod["spec"].get("initContainers", [])]
    side = [c["name"] for c in pod["spec"]["containers"]]
    print(f"  with a config map: init {init}, containers {side}, shareProcessNamespace "
          f"{pod['spec'].get('shareProcessNamespace')}")
    h.wait_node_gpus(4 * n, 4 * n)
    print(f"  {LABEL}=ts picked by the config-manager init container: capacity {4 * n}")
    gfd = wait_pod(GFD_DS)
    labels = h.wait("NodeFeature with gpu.replicas=4", lambda: (lambda l: l if l.get(
        "nvidia.com/gpu.replicas") == "4" else None)(nodefeature()))
    print(f"  gpu-feature-discovery pod {gfd['metadata']['name']}: NodeFeature {NS}/"
          f"nvidia-features-for-{h.NODE} with {len(labels)} labels, gpu.count="
          f"{labels.get('nvidia.com/gpu.count')}, gpu.replicas=4")

    t0 = time.monotonic()
    h.kubectl("label", "node", h.NODE, f"{LABEL}=default", "--overwrite")
    h.wait_node_gpus(n, n)
    print(f"  {LABEL}=default: the sidecar signalled the plugin, capacity {n} after "
          f"{time.monotonic() - t0:.1f} s (same pod: {pods(PLUGIN_DS)[0]['metadata']['uid'] == pod['metadata']['uid']})")
    h.wait("NodeFeature with gpu.replicas=1",
           lambda: nodefeature().get("nvidia.com/gpu.replicas") == "1")
    print("  and gpu-feature-discovery relabelled after its sidecar's signal: gpu.replicas=1")
    if pods(PLUGIN_DS)[0]["metadata"]["uid"] != pod["metadata"]["uid"]:
        raise h.Fail("the plugin pod was replaced instead of reloaded")
    logs = h.kubectl("logs", "-n", NS, pod["metadata"]["name"], "-c",
                     "nvidia-device-plugin-sidecar", check=False)
    if "Successfully sent signal" not in logs:
        raise h.Fail(f"sidecar log: {logs[-1000:]}")
    h.kubectl("label", "node", h.NODE, f"{LABEL}-")


OP_NS = "gpu-operator"
OP_DS = "nvidia-device-plugin-daemonset"
VALIDATIONS = "/run/nvidia/validations"
# What the operator's validator writes once the host's driver is validated (a driver on
# the host, not in a container): the entrypoint script sources it.
DRIVER_READY = ("IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=/host\n"
                "NVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=/host\n")
DRIVER_READY_FILE = os.path.join(VALIDATIONS, "driver-ready")


def op_pods(app=OP_DS):
    """The pods of the operator's DaemonSet app (each labels its pods app=<its name>)."""
    return [p for p in h.reaped(h.kjson("get", "pods", "-n", OP_NS)["items"])
            if p["metadata"].get("labels", {}).get("app") == app
            and not p["metadata"].get("deletionTimestamp")]


def wait_op_pod(not_uids=(), app=OP_DS):
    def one():
        ps = op_pods(app)
        if len(ps) == 1 and h.running_ready(ps[0]) and ps[0]["metadata"]["uid"] not in not_uids:
            return ps[0]
        return None
    return h.wait(f"one Running pod of {OP_NS}/{app}", one)


@contextlib.contextmanager
def validated_node(labels):
    """The node as the operator's validator leaves it for its operands: toolkit-ready
    written (driver-ready is the device plugin scenario's to write); undone after, and the
    node's labels named in labels removed. The operator mounts /, /run/nvidia and the
    driver directory with HostToContainer propagation (the MPS root Bidirectional), which
    needs a shared host mount: what systemd makes / on every real node, and what this
    machine's / is not. Made so meanwhile and put back after."""
    propagation = subprocess.run(["findmnt", "-n", "-o", "PROPAGATION", "/"], capture_output=True,
                                 text=True).stdout.strip()
    if propagation == "private":
        subprocess.run(["mount", "--make-shared", "/"], check=True)
    made = not os.path.exists(VALIDATIONS)  # (/run/nvidia itself: cluster.sh's made-dirs)
    os.makedirs(VALIDATIONS, exist_ok=True)
    toolkit = os.path.join(VALIDATIONS, "toolkit-ready")
    try:
        open(toolkit, "w").close()
        yield
    finally:
        for f in (DRIVER_READY_FILE, toolkit):
            if os.path.exists(f):
                os.unlink(f)
        if made:
            os.rmdir(VALIDATIONS)
        if propagation == "private":
            subprocess.run(["mount", "--make-private", "/"], check=True)
        h.kubectl("label", "node", h.NODE, *(f"{k}-" for k in labels), check=False)


def s_gpu_operator(ctx):
    n = ctx["ngpus"]
    for ds in (PLUGIN_DS, GFD_DS, PLUGIN_DS + "-mps-control-daemon"):
        h.kubectl("delete", "daemonset", "-n", NS, ds, "--wait=true", "--ignore-not-found")
    h.wait("NVIDIA chart's pods gone", lambda: not pods(PLUGIN_DS) and not pods(GFD_DS))
    with validated_node((LABEL, "nvidia.com/gpu.deploy.device-plugin")):
        h.kubectl("create", "namespace", OP_NS, check=False)
        h.kubectl("label", "node", h.NODE, "nvidia.com/gpu.deploy.device-plugin=true", "--overwrite")
        h.kubectl("apply", "-f", "-", stdin=manifests("device-plugin", "gpu-operator"))
        # The entrypoint script (busybox sh of our image) waits for the driver validation.
        h.wait("the plugin container waiting for driver-ready", lambda: any(
            "waiting for the driver validations" in h.kubectl(
                "logs", "-n", OP_NS, p["metadata"]["name"], "-c", "nvidia-device-plugin",
                check=False) for p in op_pods()))
        with open(DRIVER_READY_FILE, "w") as f:
            f.write(DRIVER_READY)
        pod = wait_op_pod()
        ctr = pod["spec"]["containers"][0]
        print(f"  GPU Operator's DaemonSet: pod {pod['metadata']['name']}, container "
              f"{ctr['name']} {ctr['command']} {ctr['args']} (waited for driver-ready)")
        h.wait_node_gpus(n, n)
        log = h.kubectl("logs", "-n", OP_NS, pod["metadata"]["name"], "-c", "nvidia-device-plugin")
        if "Starting nvidia-device-plugin" not in log:
            raise h.Fail(f"entrypoint log: {log[:1000]}")
        h.show_node_gpus()

        h.kubectl("label", "node", h.NODE, f"{LABEL}=ts", "--overwrite")
        h.kubectl("apply", "-f", "-", stdin=manifests("device-plugin-config", "gpu-operator"))
        pod = wait_op_pod({pod["metadata"]["uid"]})
        h.wait_node_gpus(4 * n, 4 * n)
        print(f"  with devicePlugin.config: {LABEL}=ts picked by config-manager-init: "
              f"capacity {4 * n}")
        h.kubectl("label", "node", h.NODE, f"{LABEL}=default", "--overwrite")
        h.wait_node_gpus(n, n)
        if op_pods()[0]["metadata"]["uid"] != pod["metadata"]["uid"]:
            raise h.Fail("the plugin pod was replaced instead of reloaded")
        print(f"  {LABEL}=default: the config-manager sidecar signalled the plugin, capacity {n}")
        h.kubectl("delete", "daemonset", "-n", OP_NS, OP_DS, "--wait=true")
        h.wait("the operator's plugin pod gone", lambda: not op_pods())


GFD_OP_DS = "gpu-feature-discovery"
GFD_SLEEP_S = 60  # the operator's GFD_SLEEP_INTERVAL
NF_CRD = ("tests", "e2e", "nodefeature-crd.yaml")


def exists(*what):
    return subprocess.run([h.A.kubectl, "--kubeconfig", h.A.kubeconfig, "get", *what],
                          capture_output=True).returncode == 0


def s_gpu_operator_gfd(ctx):
    n = ctx["ngpus"]
    crd = os.path.join(h.A.source, *NF_CRD)
    made_crd = not exists("crd", "nodefeatures.nfd.k8s-sigs.io")
    made_ns = not exists("namespace", OP_NS)
    objs = manifests("gpu-feature-discovery", "gpu-operator")
    nf_name = f"nvidia-features-for-{h.NODE}"

    def nodefeature():
        r = h.kubectl("get", "nodefeature", "-n", OP_NS, nf_name, "-o", "json", check=False)
        return json.loads(r) if r else None
    try:
        h.kubectl("apply", "-f", crd)
        h.wait("the NodeFeature CRD served", lambda: exists("nodefeatures", "-A"))
        h.kubectl("create", "namespace", OP_NS, check=False)
        with validated_node(("nvidia.com/gpu.deploy.gpu-feature-discovery",)):
            h.kubectl("label", "node", h.NODE, "nvidia.com/gpu.deploy.gpu-feature-discovery=true",
                      "--overwrite")
            h.kubectl("apply", "-f", "-", stdin=objs)
            pod = wait_op_pod(app=GFD_OP_DS)
            name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
            # The container's process 1 is our one binary, run by the operator's command
            # under the name that makes it GFD.
            out = h.kubectl("exec", "-n", OP_NS, name, "-c", "gpu-feature-discovery", "--", "sh",
                            "-c", "readlink /proc/1/exe; cat /proc/1/cmdline")
            exe, _, cmdline = out.partition("\n")
            argv = cmdline.rstrip("\0").split("\0")
            if exe != "/usr/bin/gpu-device-plugin" or argv != ["gpu-feature-discovery"]:
                raise h.Fail(f"GFD pod's process 1: exe {exe!r}, argv {argv}")
            print(f"  GPU Operator's GFD DaemonSet: pod {name}, process 1 {exe} as {argv}")
            # GFD's default (the asset sets no USE_NODE_FEATURE_API): the NodeFeature object
            # in the pod's namespace, as the operator's Role allows.
            o = h.wait(f"NodeFeature {OP_NS}/{nf_name} with nvidia.com/gpu.count={n}",
                       lambda: (lambda o: o if o and o.get("spec", {}).get("labels", {}).get(
                           "nvidia.com/gpu.count") == str(n) else None)(nodefeature()))
            labels = o["spec"]["labels"]
            owners = {r["kind"]: r for r in o["metadata"].get("ownerReferences", [])}
            if owners.get("DaemonSet", {}).get("name") != GFD_OP_DS or \
                    not owners["DaemonSet"].get("controller") or \
                    owners.get("Pod", {}).get("name") != name:
                raise h.Fail(f"NodeFeature owners {o['metadata'].get('ownerReferences')}")
            if labels.get("nvidia.com/mig.strategy") != "single":  # the operator's MIG_STRATEGY
                raise h.Fail(f"NodeFeature labels: {labels}")
            print(f"  NodeFeature {OP_NS}/{nf_name}: {len(labels)} labels, gpu.count={n}, "
                  f"mig.strategy=single, owned by DaemonSet {GFD_OP_DS} and pod {name}")
            # A while: past one relabel interval, the same pod Ready with no restart, and the
            # object not rewritten (nothing changed).
            rv = o["metadata"]["resourceVersion"]
            time.sleep(GFD_SLEEP_S + 10)
            pod = h.kjson("get", "pod", "-n", OP_NS, name)
            restarts = sum(c["restartCount"] for c in pod["status"].get("containerStatuses", []))
            if pod["metadata"]["uid"] != uid or not h.running_ready(pod) or restarts:
                raise h.Fail(f"GFD pod after {GFD_SLEEP_S + 10} s: ready "
                             f"{h.running_ready(pod)}, restarts {restarts}")
            o = nodefeature()
            if not o or o["metadata"]["resourceVersion"] != rv:
                raise h.Fail(f"NodeFeature rewritten though nothing changed: {o and o['metadata']}")
            print(f"  {GFD_SLEEP_S + 10} s later: the same pod Ready, 0 restarts, the NodeFeature "
                  f"unchanged (resourceVersion {rv})")
            h.kubectl("delete", "daemonset", "-n", OP_NS, GFD_OP_DS, "--wait=true")
            h.wait("the GFD pod gone", lambda: not op_pods(GFD_OP_DS))
            h.wait(f"NodeFeature {nf_name} collected with its owners", lambda: not nodefeature())
            print("  DaemonSet deleted: its pod gone, the NodeFeature garbage-collected")
    finally:
        h.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=true", stdin=objs,
                  check=False)
        h.kubectl("delete", "nodefeature", "-n", OP_NS, nf_name, "--ignore-not-found",
                  check=False)
        if made_ns:
            h.kubectl("delete", "namespace", OP_NS, "--wait=true", check=False)
        if made_crd:
            h.kubectl("delete", "-f", crd, "--ignore-not-found", check=False)


MPS_DS = "nvidia-device-plugin-mps-control-daemon"
MPS_ROOT = "/run/nvidia/mps"  # the operator's devicePlugin.mps.root
MPS_LABELS = ("nvidia.com/gpu.deploy.device-plugin", "nvidia.com/mps.capable")
MPS_ERROR = "Failed to start MPS daemon"


def s_gpu_operator_mps(ctx):
    made_ns = not exists("namespace", OP_NS)
    # The operator's MPS DaemonSet runs as the device plugin's service account: that
    # state's account and node role, which the operator always deploys beside it.
    plugin_rbac = yaml.safe_dump_all(
        [d for d in yaml.safe_load_all(manifests("device-plugin", "gpu-operator"))
         if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")],
        sort_keys=False)
    made_rbac = not exists("serviceaccount", "-n", OP_NS, "nvidia-device-plugin")
    objs = manifests("mps-control-daemon", "gpu-operator")
    shm = os.path.join(MPS_ROOT, "shm")
    try:
        h.kubectl("create", "namespace", OP_NS, check=False)
        with validated_node(MPS_LABELS + (LABEL,)):
            h.kubectl("apply", "-f", "-", stdin=plugin_rbac)
            # What GFD labels an MPS-configured node (no NFD here to copy it to the Node),
            # and the config that shares with MPS.
            h.kubectl("label", "node", h.NODE, *(f"{k}=true" for k in MPS_LABELS),
                      f"{LABEL}=mps", "--overwrite")
            h.kubectl("apply", "-f", "-", stdin=objs)

            def errors():
                ps = op_pods(MPS_DS)
                if len(ps) != 1:
                    return None
                log = h.kubectl("logs", "-n", OP_NS, ps[0]["metadata"]["name"], "-c",
                                "mps-control-daemon-ctr", check=False)
                return [ln for ln in log.splitlines() if MPS_ERROR in ln]
            first = h.wait("the MPS control daemon's error line", errors)[0]
            # This node has no NVIDIA tools (nor has either image: the NVIDIA container
            # runtime puts them in from the driver): the line names the first one needed.
            if "nvidia-smi" not in first or "not on PATH" not in first:
                raise h.Fail(f"the MPS daemon's error does not name what is missing: {first}")
            print(f"  mps-control-daemon-ctr: {first.strip()}")
            mounted = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", shm],
                                     capture_output=True, text=True).stdout.strip()
            if mounted != "tmpfs":
                raise h.Fail(f"{shm} on the host: {mounted or 'not a mount'} (mount-shm's tmpfs)")
            print(f"  the mps-control-daemon-mounts init container mounted the tmpfs {shm}")
            # Without its tools the daemon cannot work here: it exits 1 after that line, so
            # the pod shows the failure (restarts, never Ready) instead of looking healthy
            # while it serves nothing (the asset has no probe).
            # Between two exits the container runs for a few milliseconds, and without a
            # probe the kubelet calls it Ready then; what is asserted is the state a person
            # sees: the last run exited 1 and the container waits in CrashLoopBackOff.
            def crash_looping():
                ps = op_pods(MPS_DS)
                if len(ps) != 1:
                    return None
                for c in ps[0]["status"].get("containerStatuses", []):
                    if c["name"] != "mps-control-daemon-ctr":
                        continue
                    last = c.get("lastState", {}).get("terminated") or {}
                    waiting = c.get("state", {}).get("waiting") or {}
                    if last.get("exitCode") == 1 and waiting.get("reason") == "CrashLoopBackOff":
                        return ps[0]
                return None
            pod = h.wait("the MPS control daemon exiting 1, in CrashLoopBackOff", crash_looping,
                         timeout=150)
            ready = [c["status"] for c in pod["status"].get("conditions", [])
                     if c["type"] == "Ready"]
            if ready == ["True"]:
                raise h.Fail("the MPS pod is Ready in CrashLoopBackOff")
            for f in (os.path.join(MPS_ROOT, ".ready"),
                      os.path.join(MPS_ROOT, "nvidia.com", "gpu", ".started")):
                if os.path.exists(f):
                    raise h.Fail(f"{f} exists: a daemon without its tools claimed to serve")
            restarts = sum(c["restartCount"] for c in pod["status"].get("containerStatuses", []))
            print(f"  the daemon exited 1 after that line; pod Ready={ready}, restarts "
                  f"{restarts}; no {MPS_ROOT}/.ready, no .started")
            h.kubectl("delete", "daemonset", "-n", OP_NS, MPS_DS, "--wait=true")
            h.wait("the MPS pod gone", lambda: not op_pods(MPS_DS))
    finally:
        h.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=true", stdin=objs,
                  check=False)
        try:
            h.wait("the MPS pod gone", lambda: not op_pods(MPS_DS))
        except h.Fail as e:  # said; the rest of the cleanup still runs
            print(f"  cleanup: {e}")
        # mount-shm's tmpfs outlives the pod (for the plugin's pods, as NVIDIA's does).
        if os.path.ismount(shm):
            subprocess.run(["umount", shm], check=True)
        if made_rbac:
            h.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=plugin_rbac, check=False)
        if made_ns:
            h.kubectl("delete", "namespace", OP_NS, "--wait=true", check=False)


SCENARIOS = [("nvidia-chart", s_nvidia_chart), ("gpu-operator", s_gpu_operator),
             ("gpu-operator-gfd", s_gpu_operator_gfd), ("gpu-operator-mps", s_gpu_operator_mps)]
