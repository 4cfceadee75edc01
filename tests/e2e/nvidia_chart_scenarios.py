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
"""

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
    return [p for p in h.kjson("get", "pods", "-n", NS)["items"]
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


def op_pods():
    return [p for p in h.kjson("get", "pods", "-n", OP_NS)["items"]
            if p["metadata"].get("labels", {}).get("app") == OP_DS
            and not p["metadata"].get("deletionTimestamp")]


def wait_op_pod(not_uids=()):
    def one():
        ps = op_pods()
        if len(ps) == 1 and h.running_ready(ps[0]) and ps[0]["metadata"]["uid"] not in not_uids:
            return ps[0]
        return None
    return h.wait(f"one Running pod of {OP_NS}/{OP_DS}", one)


def s_gpu_operator(ctx):
    n = ctx["ngpus"]
    for ds in (PLUGIN_DS, GFD_DS, PLUGIN_DS + "-mps-control-daemon"):
        h.kubectl("delete", "daemonset", "-n", NS, ds, "--wait=true", "--ignore-not-found")
    h.wait("NVIDIA chart's pods gone", lambda: not pods(PLUGIN_DS) and not pods(GFD_DS))
    # The operator mounts /, /run/nvidia/validations and the driver directory with
    # HostToContainer propagation, which needs a shared (or slave) host mount: what
    # systemd makes / on every real node, and what this machine's / is not. Made so for
    # the scenario and put back after.
    propagation = subprocess.run(["findmnt", "-n", "-o", "PROPAGATION", "/"], capture_output=True,
                                 text=True).stdout.strip()
    if propagation == "private":
        subprocess.run(["mount", "--make-shared", "/"], check=True)
    made = not os.path.exists(VALIDATIONS)  # (/run/nvidia itself: cluster.sh's made-dirs)
    os.makedirs(VALIDATIONS, exist_ok=True)
    ready = os.path.join(VALIDATIONS, "driver-ready")
    toolkit = os.path.join(VALIDATIONS, "toolkit-ready")
    try:
        open(toolkit, "w").close()
        h.kubectl("create", "namespace", OP_NS, check=False)
        h.kubectl("label", "node", h.NODE, "nvidia.com/gpu.deploy.device-plugin=true", "--overwrite")
        h.kubectl("apply", "-f", "-", stdin=manifests("device-plugin", "gpu-operator"))
        # The entrypoint script (busybox sh of our image) waits for the driver validation.
        h.wait("the plugin container waiting for driver-ready", lambda: any(
            "waiting for the driver validations" in h.kubectl(
                "logs", "-n", OP_NS, p["metadata"]["name"], "-c", "nvidia-device-plugin",
                check=False) for p in op_pods()))
        with open(ready, "w") as f:
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
    finally:
        for f in (ready, toolkit):
            if os.path.exists(f):
                os.unlink(f)
        if made:
            os.rmdir(VALIDATIONS)
        if propagation == "private":
            subprocess.run(["mount", "--make-private", "/"], check=True)
        h.kubectl("label", "node", h.NODE, f"{LABEL}-", "nvidia.com/gpu.deploy.device-plugin-",
                  check=False)


SCENARIOS = [("nvidia-chart", s_nvidia_chart), ("gpu-operator", s_gpu_operator)]
