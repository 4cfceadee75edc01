#!/usr/bin/python3
"""The e2e scenarios, run against the cluster cluster.sh brought up. Every assertion is on
what the API server says (kubectl), never on the plugin's own logs: the operator's view.

usage: scenarios.py --kubectl BIN --kubeconfig FILE --cluster cluster.sh --state DIR
                    --profile FILE --helm-render BIN --source DIR

Order (each step builds on the cluster the previous one left):
  dry-run      kubectl apply --dry-run=server of every shipped manifest, the kustomize
               overlay and every rendered chart variant
  static       the shipped static DaemonSet through a kustomize overlay that changes only
               the image: pod Running, node capacity = allocatable = the profile's GPUs
  walkthrough  a 1-GPU pod's log shows one profile GPU; two 2-GPU pods get disjoint GPUs;
               a pod asking for more than the node has stays Pending (scheduler's reason)
  plugin-pod   deleting the plugin pod: recreated, registers again (a new pod gets a GPU),
               the running pods keep theirs
  kubelet      restarting the kubelet: running pods (and the plugin) untouched, allocatable back
  helm         the chart with default values: pod Running, capacity = the profile's GPUs
  xid          the chart with health.quietPeriod 15s (default 60s): an Xid through the simulator's
               control FIFO takes allocatable down by one; it comes back on recovery
  timeslicing  the chart with sharing.timeSlicing replicas 4: capacity = GPUs x 4
  metrics      the chart with metrics.enabled (and hostNetwork: this cluster's bridge gives
               the host no route to pod IPs, and the kubelet probes from the host): the pod
               turns Ready through its /readyz probe, and /metrics scraped from the pod
               parses (python3-prometheus-client) and shows the resource registered and
               every GPU Healthy
  (then cluster_scenarios.py:)
  nodefeature  gfd.enabled with NFD's NodeFeature CRD installed: the object
               nvidia-features-for-<node> holds the GPU labels, owned by the DaemonSet
  feature-file gfd.enabled, nfd.enableNodeFeatureApi=false: NFD's feature file on the host
  node-labels  gfd.nodeLabelsPatch: the labels on the Node; the feature file removed when
               that plugin stopped; with gfd.noTimestamp the timestamp label is removed,
               labels of others kept
  rbac         the ClusterRole without nodes/patch: the plugin's 403 line names the verb
               and resource
  node-config  config.map with several named configs: the node label picks one live (capacity
               GPUs x 4), the applied name in an annotation; a config with the same resources
               keeps the registration; a bad config emits an Event and keeps the old state;
               an Xid gives a GPUUnhealthy Event on the Node
  (then api_scenarios.py:)
  node-recreate  the own Node deleted and re-created with the same config label: no config
               switch, no re-registration, the annotation back
  event-outage the API server stopped for 60 s; an Xid raised meanwhile still gives its
               GPUUnhealthy Event once it is back
  (last, nvidia_chart_scenarios.py:)
  nvidia-chart NVIDIA's chart v0.20.0 rendered with our image: defaults; a config map with
               gfd.enabled: config-manager init + sidecar pick and switch the config by
               node label live, gpu-feature-discovery publishes the NodeFeature
  (then dra_scenarios.py:)
  dra          the chart's DRA mode on Kubernetes >= 1.34 (resource.k8s.io/v1): slice,
               DeviceClasses, claims for one GPU and two by CEL with exactly their device
               nodes in the pods (CDI), Xid withdraw/restore, kubelet and plugin restarts,
               unprepare on pod deletion; older clusters: SKIP (not applicable, exit 0)
  dra-cuda     the driver in the container: the chart's DRA mode with a rendered driver
               root (nvml-sim-render --driver-root) and the nvidia-cdi-hook stand-in; pods
               of a plain Debian image with cuda-probe, claims for one GPU, two GPUs and a
               MIG device (a MIG profile: GDP_E2E_PROFILE): cuda-probe and nvidia-smi -L
               show exactly the claimed devices, memalloc ok, the hooks ran; SKIP below
               1.34 or without containerd 1.7
  cdi-cri      the same with the device plugin, deviceListStrategy=cdi-cri: a pod with
               nvidia.com/gpu: 1 sees exactly the GPU of the kubelet's checkpoint; SKIP
               below kubelet 1.28 or without containerd 1.7
"""

import argparse
import datetime
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time

import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_scenarios  # noqa: E402  (scenarios 9-13: the plugin talking to the API server)
import api_scenarios  # noqa: E402  (then 14-15: Node re-created, API server down for a minute)
import nvidia_chart_scenarios  # noqa: E402  (then NVIDIA's chart with our image)
import dra_scenarios  # noqa: E402  (last: DRA, on Kubernetes >= 1.34 only)

A = None
NODE = "localhost"  # cluster.sh names it so (the API server reaches it at 127.0.0.1)
RES = "nvidia.com/gpu"
IMAGE_NAME, IMAGE_TAG = "localhost/gpu-device-plugin", "e2e"
BUSYBOX = "localhost/gdp-e2e/busybox:1"
SHIPPED_IMAGE = "ghcr.io/gpu-device-plugin/gpu-device-plugin"
TIMEOUT = 180  # seconds for anything to happen; generous for a loaded 2-core machine

passed, failed, not_applicable = [], [], []


class Fail(Exception):
    pass


class Skip(Exception):
    """The scenario does not apply to this cluster (e.g. DRA below 1.34): reported as SKIP,
    counted apart from passed, and not a failure."""


def kubectl(*args, check=True, stdin=None):
    r = subprocess.run([A.kubectl, "--kubeconfig", A.kubeconfig, *args], input=stdin,
                       capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise Fail(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def kjson(*args):
    return json.loads(kubectl(*args, "-o", "json"))


def wait(what, fn, timeout=TIMEOUT):
    """Poll fn until it returns something true; that value is returned."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Fail as e:  # e.g. the object does not exist yet
            last = str(e)
        else:
            if last:
                return last
        time.sleep(0.5)
    raise Fail(f"timed out after {timeout} s waiting for {what} (last: {last})")


def show(*args):
    """Print a kubectl command and its output: the run's record of what the API server said."""
    print(f"$ kubectl {' '.join(args)}")
    print(kubectl(*args).rstrip())


def gpus(field):
    node = kjson("get", "node", NODE)
    return int(node["status"].get(field, {}).get(RES, "0"))


def show_node_gpus():
    show("get", "node", NODE, "-o",
         "custom-columns=NODE:.metadata.name,CAPACITY:.status.capacity.nvidia\\.com/gpu,"
         "ALLOCATABLE:.status.allocatable.nvidia\\.com/gpu")


def wait_node_gpus(capacity, allocatable):
    wait(f"node {RES} capacity {capacity} allocatable {allocatable}",
         lambda: gpus("capacity") == capacity and gpus("allocatable") == allocatable)


def reaped(pods):
    """pods without those being deleted whose every container the kubelet reports not
    running (terminated or waiting: the kubelet's own test before it lets a deleted pod
    go; 1.20 shows a killed container as waiting, ContainerCreating). Their objects are
    removed here (force, grace 0). The kubelet 1.20 removes such an object only after its
    container GC, which runs on a fixed 1-minute period, has removed the sandbox, and a
    DaemonSet makes a pod's successor only once the old object is gone: each plugin pod
    replaced waited up to a minute after the plugin had exited. Nothing of the pod runs
    any more; the GC still removes its sandbox as before. Pods with a running container,
    or with no container status yet, are kept."""
    keep = []
    for p in pods:
        md, st = p["metadata"], p.get("status", {})
        sts = st.get("containerStatuses", []) + st.get("initContainerStatuses", [])
        if md.get("deletionTimestamp") and sts and not any("running" in c.get("state", {}) for c in sts):
            kubectl("delete", "pod", "-n", md["namespace"], md["name"], "--grace-period=0",
                    "--force", "--wait=false", "--ignore-not-found")
            continue
        keep.append(p)
    return keep


def delete_pod(namespace, name):
    """kubectl delete pod, then wait until the object is gone (or reaped, above)."""
    kubectl("delete", "pod", "-n", namespace, name, "--wait=false")

    def gone():
        r = kubectl("get", "pod", "-n", namespace, name, "-o", "json", "--ignore-not-found", check=False)
        return not r.strip() or not reaped([json.loads(r)])
    wait(f"pod {namespace}/{name} gone", gone)


def plugin_pods():
    pods = kjson("get", "pods", "-n", "kube-system")["items"]
    return reaped([p for p in pods if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "gpu-device-plugin"])


def running_ready(pod):
    st = pod.get("status", {})
    ready = [c for c in st.get("conditions", []) if c["type"] == "Ready"]
    return st.get("phase") == "Running" and ready and ready[0]["status"] == "True"


def wait_one_plugin_pod(not_uid=None):
    """Exactly one plugin pod, Running and Ready (and not the one with not_uid)."""
    def one():
        pods = plugin_pods()
        if len(pods) == 1 and running_ready(pods[0]) and pods[0]["metadata"]["uid"] != not_uid \
                and not pods[0]["metadata"].get("deletionTimestamp"):
            return pods[0]
        return None
    return wait("one Running plugin pod", one)


def gpu_pod(name, count, command=None):
    cmd = command or 'echo "NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"; exec sleep 3600'
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "automountServiceAccountToken": False,
                    "containers": [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", cmd],
                                    "resources": {"limits": {RES: str(count)}}}]}}
    kubectl("apply", "-f", "-", stdin=json.dumps(pod))


def pod_running(name):
    return wait(f"pod {name} Running", lambda: (lambda p: p if p["status"].get("phase") == "Running" else None)(
        kjson("get", "pod", name)))


def pod_gpus(name):
    """The GPUs the pod's container was given, as its log shows NVIDIA_VISIBLE_DEVICES."""
    log = wait(f"pod {name} log", lambda: kubectl("logs", name).strip())
    key, _, value = log.splitlines()[0].partition("=")
    if key != "NVIDIA_VISIBLE_DEVICES" or not value:
        raise Fail(f"pod {name} log: {log!r}")
    return value.split(",")


def containers_state(names):
    out = {}
    for n in names:
        p = kjson("get", "pod", n)
        cs = p["status"]["containerStatuses"][0]
        out[n] = (p["metadata"]["uid"], p["status"]["phase"], cs["containerID"], cs["restartCount"])
    return out


def render_chart(values):
    sys.path.insert(0, os.path.join(A.source, "tests", "deploy"))
    import deploylib  # noqa: E402
    files, _ = deploylib.render(A.helm_render, values)
    docs = [d for name in sorted(files) for d in files[name]]
    return yaml.safe_dump_all(docs, sort_keys=False)


def chart_values(config=None, **more):
    v = {"image": {"repository": IMAGE_NAME, "tag": IMAGE_TAG}}
    if isinstance(config, dict):
        v["config"] = config
    elif config:
        # One config for every node, no API access (this cluster's pods cannot reach the
        # API server without render_chart_api).
        v["config"] = {"map": {"default": config}}
        v["configSelection"] = "static"
    v.update(more)
    return v


# --- scenarios ----------------------------------------------------------------------------

def s_dry_run(ctx):
    for name in sorted(os.listdir(os.path.join(A.source, "deployments", "static"))):
        kubectl("apply", "--dry-run=server", "-f", os.path.join(A.source, "deployments", "static", name))
        print(f"  dry-run ok: deployments/static/{name}")
    kubectl("apply", "--dry-run=server", "-k", ctx["overlay"])
    print("  dry-run ok: kustomize overlay of deployments/static/gpu-device-plugin.yml")
    for variant, path in ctx["charts"].items():
        kubectl("apply", "--dry-run=server", "-f", path)
        print(f"  dry-run ok: chart rendered with {variant}")


def subset(want, have, path=""):
    """want ⊆ have (lists element-wise): the API server only added defaults."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            raise Fail(f"{path}: {have!r} is not a mapping")
        for k, v in want.items():
            subset(v, have.get(k), f"{path}.{k}")
    elif isinstance(want, list):
        if want == [] and have is None:  # an empty list is not stored
            return
        if not isinstance(have, list) or len(want) != len(have):
            raise Fail(f"{path}: {have!r} != {want!r}")
        for i, (w, h) in enumerate(zip(want, have)):
            subset(w, h, f"{path}[{i}]")
    elif want != have:
        raise Fail(f"{path}: {have!r} != {want!r}")


def s_static(ctx):
    kubectl("apply", "-k", ctx["overlay"])
    shipped = yaml.safe_load(open(os.path.join(A.source, "deployments", "static", "gpu-device-plugin.yml")))
    live = kjson("get", "daemonset", "-n", "kube-system", shipped["metadata"]["name"])
    ctr = shipped["spec"]["template"]["spec"]["containers"][0]
    if ctr["image"].rpartition(":")[0] != SHIPPED_IMAGE:
        raise Fail(f"shipped image {ctr['image']}")
    ctr["image"] = f"{IMAGE_NAME}:{IMAGE_TAG}"
    subset(shipped["spec"], live["spec"], "spec")  # the overlay changed the image, nothing else
    pod = wait_one_plugin_pod()
    print(f"  plugin pod {pod['metadata']['name']} Running")
    wait_node_gpus(ctx["ngpus"], ctx["ngpus"])
    show_node_gpus()


def s_walkthrough(ctx):
    uuids = set(ctx["uuids"])
    gpu_pod("gpu1", 1)
    pod_running("gpu1")
    got = pod_gpus("gpu1")
    show("logs", "gpu1")
    if len(got) != 1 or got[0] not in uuids:
        raise Fail(f"gpu1 NVIDIA_VISIBLE_DEVICES {got}: want one GPU of the profile")
    gpu_pod("gpu2a", 2)
    gpu_pod("gpu2b", 2)
    pod_running("gpu2a")
    pod_running("gpu2b")
    a, b = pod_gpus("gpu2a"), pod_gpus("gpu2b")
    print(f"  gpu2a: {','.join(a)}  gpu2b: {','.join(b)}")
    held = got + a + b
    if len(a) != 2 or len(b) != 2 or len(set(held)) != 5 or not set(held) <= uuids:
        raise Fail(f"GPUs not disjoint or not the profile's: gpu1 {got} gpu2a {a} gpu2b {b}")
    ctx["held"] = {"gpu1": got, "gpu2a": a, "gpu2b": b}

    gpu_pod("toomany", ctx["ngpus"] + 1)

    def unschedulable():
        conds = kjson("get", "pod", "toomany")["status"].get("conditions", [])
        c = [c for c in conds if c["type"] == "PodScheduled"]
        return c and c[0]["status"] == "False" and c[0].get("reason") == "Unschedulable" and c[0]
    c = wait("toomany Unschedulable", unschedulable)
    print(f"  toomany: Pending, {c['reason']}: {c['message']}")
    # Only the part every release says: 1.20 ends the message there ("0/1 nodes are
    # available: 1 Insufficient nvidia.com/gpu."), 1.34 goes on ("... no new claims to
    # deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for
    # scheduling.").
    if f"Insufficient {RES}" not in c["message"]:
        raise Fail(f"scheduler's reason does not name {RES}: {c['message']}")
    if kjson("get", "pod", "toomany")["status"]["phase"] != "Pending":
        raise Fail("toomany is not Pending")
    delete_pod("default", "toomany")


def s_plugin_pod(ctx):
    before = containers_state(ctx["held"])
    old = wait_one_plugin_pod()
    delete_pod("kube-system", old["metadata"]["name"])
    new = wait_one_plugin_pod(not_uid=old["metadata"]["uid"])
    print(f"  plugin pod {old['metadata']['name']} deleted, {new['metadata']['name']} Running")
    wait_node_gpus(ctx["ngpus"], ctx["ngpus"])
    after = containers_state(ctx["held"])
    if after != before:
        raise Fail(f"running GPU pods changed: {before} -> {after}")
    for name, want in ctx["held"].items():
        if pod_gpus(name) != want:
            raise Fail(f"{name} lost its GPUs")
    # Registered again: a new pod is allocated a free GPU through the new plugin.
    gpu_pod("gpu1b", 1)
    pod_running("gpu1b")
    got = pod_gpus("gpu1b")
    held = [u for v in ctx["held"].values() for u in v]
    if len(got) != 1 or got[0] in held or got[0] not in ctx["uuids"]:
        raise Fail(f"gpu1b got {got}, held elsewhere: {held}")
    ctx["held"]["gpu1b"] = got
    print(f"  running pods untouched; new pod gpu1b got {got[0]} from the new plugin")


# --- a kubelet restart, and what the new kubelet must serve before the next step ---------------
#
# Everything the API server says about the node right after a restart is still the old
# kubelet's: the Node is Ready, its capacity and allocatable are as they were, the pods are
# Running. None of that says the new kubelet has taken the pods over, and until it has,
# `kubectl exec`, `logs` and a pod's deletion (which it carries out) fail or hang: "unable
# to upgrade connection: pod does not exist". So each wait below asks the new kubelet
# itself for what the next step uses: on its port 10250, as the API server does (with the
# API server's kubelet-client certificate; cluster.sh's kubelet trusts the cluster CA).
# Not through the API server's node proxy: 1.36 refuses to proxy to the node's address,
# 127.0.0.1 ("address not allowed").

KUBELET_URL = "https://127.0.0.1:10250"


def kubelet_get(path):
    """GET path on this node's kubelet (its /pods, /metrics)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # its serving certificate is self-signed
    pki = os.path.join(A.state, "pki")
    ctx.load_cert_chain(os.path.join(pki, "apiserver-kubelet.crt"), os.path.join(pki, "apiserver-kubelet.key"))
    try:
        with urllib.request.urlopen(KUBELET_URL + path, timeout=30, context=ctx) as r:
            return r.read().decode()
    except OSError as e:  # not up yet: refused, reset, an HTTP error
        raise Fail(f"GET {KUBELET_URL}{path}: {e}")


def metric_samples(text, name):
    """[(labels, value)] of the samples called name in a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        if not line.startswith(name) or line[len(name):len(name) + 1] not in ("{", " "):
            continue
        head, _, value = line.rpartition(" ")
        labels = dict((k, v.strip('"')) for k, v in (kv.split("=", 1) for kv in
                      head[len(name):].strip("{}").split(",") if "=" in kv))
        out.append((labels, float(value)))
    return out


def kubelet_started():
    """The running kubelet's process start time (Unix seconds), as it reports itself."""
    got = metric_samples(kubelet_get("/metrics"), "process_start_time_seconds")
    return got[0][1] if got else None


def lease_renewed():
    """When the node's Lease was last renewed (Unix seconds): only a live kubelet renews it."""
    t = kjson("get", "lease", "-n", "kube-node-lease", NODE)["spec"].get("renewTime", "")
    return datetime.datetime.strptime(t.rstrip("Z") + ("" if "." in t else ".0"), "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp() if t else 0.0


def kubelet_pod_uids():
    """The UIDs of the pods the kubelet itself holds (its pod manager: what exec, logs and
    a deletion go through)."""
    return {p["metadata"]["uid"] for p in json.loads(kubelet_get("/pods")).get("items") or []}


def restart_kubelet(pods, exec_in=(), resources=()):
    """cluster.sh kubelet-restart (the old kubelet stopped by PID, a new one started, its
    /healthz answering), then wait until the new kubelet serves what the next steps need:
    it answers on its port (its start time after the restart began); it renewed
    the node's Lease; it holds every pod of pods (default namespace) under the same UID;
    `kubectl exec` answers in every pod of exec_in, three times in a row; and every device
    plugin resource of resources has registered with it. Returns the new kubelet's start.
    A pod is "name" (namespace default) or "namespace/name"."""
    uids = {kjson("get", "pod", "-n", *(p.split("/") if "/" in p else ("default", p)))["metadata"]["uid"]: p
            for p in pods}
    t0 = time.time()
    r = subprocess.run(["sh", A.cluster, "kubelet-restart"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise Fail(f"kubelet restart: {r.stderr.strip()}")
    t1 = time.time()  # the old kubelet is gone, the new one answers its /healthz
    # Its start time from /proc, whose boot time has whole seconds: hence the second's slack
    # (the old kubelet had run for minutes).
    started = wait("the new kubelet answering on its port",
                   lambda: (lambda s: s if s and s >= t0 - 1 else None)(kubelet_started()))
    # A renewal after the restart command returned is the new kubelet's (within 10 s: it
    # renews every quarter of the Lease's 40 s).
    wait("the node's Lease renewed by the new kubelet", lambda: lease_renewed() > t1)
    wait("node Ready", lambda: [c for c in kjson("get", "node", NODE)["status"]["conditions"]
                                if c["type"] == "Ready" and c["status"] == "True"])
    wait(f"the new kubelet holding {', '.join(sorted(pods)) or 'its pods'}",
         lambda: set(uids) <= kubelet_pod_uids())
    for p in exec_in:
        streak = [0]

        def execs(p=p, streak=streak):
            try:
                kubectl("exec", p, "--", "ls", "/")
            except Fail:
                streak[0] = 0
                raise
            streak[0] += 1
            return streak[0] >= 3
        wait(f"kubectl exec answering in {p}", execs)
    for res in resources:
        wait(f"{res} registered with the new kubelet", lambda res=res: any(
            labels.get("resource_name") == res and v >= 1 for labels, v in
            metric_samples(kubelet_get("/metrics"), "kubelet_device_plugin_registration_total")))
    print(f"  kubelet restarted (the new one started {started - t0:.1f} s after the restart began, "
          f"ready for the next step {time.time() - t0:.1f} s after): "
          f"Lease renewed, {len(uids)} pods held, exec answering in {len(exec_in)}, "
          f"{', '.join(resources) or 'no device plugin resource'} registered")
    return started


def s_kubelet(ctx):
    before = containers_state(ctx["held"])
    plug = wait_one_plugin_pod()
    plug_restarts = plug["status"]["containerStatuses"][0]["restartCount"]
    # Next: the node's GPUs as the re-registered plugin gives them, then the held pods
    # deleted (by the new kubelet: it must hold them).
    restart_kubelet([*ctx["held"], f"kube-system/{plug['metadata']['name']}"], resources=[RES])
    wait_node_gpus(ctx["ngpus"], ctx["ngpus"])
    show_node_gpus()
    after = containers_state(ctx["held"])
    if after != before:
        raise Fail(f"running GPU pods changed across the kubelet restart: {before} -> {after}")
    plug2 = wait_one_plugin_pod()
    if plug2["metadata"]["uid"] != plug["metadata"]["uid"] or \
            plug2["status"]["containerStatuses"][0]["restartCount"] != plug_restarts:
        raise Fail("the plugin pod was restarted or replaced by a kubelet restart")
    print("  running pods and the plugin pod untouched")
    kubectl("delete", "pod", *ctx["held"], "--wait=true")


def apply_chart(ctx, variant):
    old = plugin_pods()
    kubectl("apply", "-f", ctx["charts"][variant])
    old_uids = {p["metadata"]["uid"] for p in old}
    return wait_one_plugin_pod_not_in(old_uids)


def wait_one_plugin_pod_not_in(uids):
    def one():
        pods = plugin_pods()
        if len(pods) == 1 and pods[0]["metadata"]["uid"] not in uids and running_ready(pods[0]):
            return pods[0]
        return None
    return wait("the new plugin pod Running (the old one gone)", one)


def s_helm(ctx):
    kubectl("delete", "-k", ctx["overlay"], "--wait=true")
    wait("static plugin pods gone", lambda: not plugin_pods())
    # The chart's node affinity wants a GPU node label (NFD's or the manual one).
    kubectl("label", "node", NODE, "nvidia.com/gpu.present=true", "--overwrite")
    pod = apply_chart(ctx, "default values")
    print(f"  plugin pod {pod['metadata']['name']} Running")
    wait_node_gpus(ctx["ngpus"], ctx["ngpus"])
    show_node_gpus()


def s_xid(ctx):
    pod = apply_chart(ctx, "health.quietPeriod 15s")
    print(f"  plugin pod {pod['metadata']['name']} Running with config health.quietPeriod 15s")
    n = ctx["ngpus"]
    wait_node_gpus(n, n)
    uuid = ctx["uuids"][0]
    ack = os.path.join(A.state, "driver", "run", "ack")
    acked = open(ack).read().count("\n")
    line = f"xid {uuid} 32"
    fd = wait("the simulator's control FIFO open in the plugin",
              lambda: _open_fifo(os.path.join(A.state, "driver", "run", "ctl")))
    os.write(fd, (line + "\n").encode())
    os.close(fd)
    wait("the simulator's ack", lambda: open(ack).read().count("\n") > acked)
    print(f"  injected through the simulator: {line}")
    wait_node_gpus(n, n - 1)
    show_node_gpus()
    wait_node_gpus(n, n)
    print("  recovered after the quiet period and a probe:")
    show_node_gpus()


def _open_fifo(path):
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader yet
        return None


def s_timeslicing(ctx):
    pod = apply_chart(ctx, "sharing.timeSlicing replicas 4")
    print(f"  plugin pod {pod['metadata']['name']} Running with time-slicing replicas 4")
    n = ctx["ngpus"]
    wait_node_gpus(4 * n, 4 * n)
    show_node_gpus()


def s_metrics(ctx):
    from prometheus_client.parser import text_string_to_metric_families
    pod = apply_chart(ctx, "metrics.enabled")
    ctr = [c for c in pod["spec"]["containers"] if c["name"] == "gpu-device-plugin-ctr"][0]
    if not ctr.get("readinessProbe") or not ctr.get("livenessProbe"):
        raise Fail("the metrics variant has no probes")
    # Ready (apply_chart waited for it) means the kubelet's /readyz probe answered 200.
    ip = pod["status"]["podIP"]
    port = ctr["ports"][0]["containerPort"]
    print(f"  plugin pod {pod['metadata']['name']} Ready through its /readyz probe; scraping {ip}:{port}")
    text = urllib.request.urlopen(f"http://{ip}:{port}/metrics", timeout=30).read().decode()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]

    def value(name, **labels):
        got = [s.value for s in samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
        return got[0] if len(got) == 1 else None
    p = "gpu_device_plugin_"
    if value(p + "registered", resource=RES) != 1.0:
        raise Fail(f"not registered in /metrics:\n{text[:2000]}")
    healthy = [s for s in samples if s.name == p + "device_healthy" and s.labels["resource"] == RES]
    if len(healthy) != ctx["ngpus"] or any(s.value != 1.0 for s in healthy):
        raise Fail(f"device_healthy: {[(s.labels['device'], s.value) for s in healthy]}")
    if value(p + "registrations_total", resource=RES, outcome="ok") is None:
        raise Fail("no registrations_total")
    print(f"  /metrics: {len(samples)} samples parsed; {RES} registered, {len(healthy)} GPUs Healthy")
    status = urllib.request.urlopen(f"http://{ip}:{port}/healthz", timeout=30).status
    if status != 200:
        raise Fail(f"/healthz answered {status}")
    wait_node_gpus(ctx["ngpus"], ctx["ngpus"])


SCENARIOS = [("dry-run", s_dry_run), ("static", s_static), ("walkthrough", s_walkthrough),
             ("plugin-pod", s_plugin_pod), ("kubelet", s_kubelet), ("helm", s_helm),
             ("xid", s_xid), ("timeslicing", s_timeslicing),
             ("metrics", s_metrics)] + cluster_scenarios.SCENARIOS + api_scenarios.SCENARIOS + \
    nvidia_chart_scenarios.SCENARIOS + dra_scenarios.SCENARIOS


def main():
    global A
    p = argparse.ArgumentParser()
    for opt in ("kubectl", "kubeconfig", "cluster", "state", "profile", "helm-render", "source"):
        p.add_argument("--" + opt, required=True)
    A = p.parse_args()

    profile = yaml.safe_load(open(A.profile))
    uuids = [d["uuid"] for d in profile["devices"]]
    work = tempfile.mkdtemp(prefix="e2e-manifests-", dir=A.state)
    # The operator's overlay: the shipped manifest as is, only the image replaced.
    overlay = os.path.join(work, "overlay")
    os.makedirs(overlay)
    shutil.copy(os.path.join(A.source, "deployments", "static", "gpu-device-plugin.yml"), overlay)
    with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
        yaml.safe_dump({"resources": ["gpu-device-plugin.yml"],
                        "images": [{"name": SHIPPED_IMAGE, "newName": IMAGE_NAME, "newTag": IMAGE_TAG}]}, f)
    charts = {}
    for variant, config, extra in (("default values", None, {}),
                            ("health.quietPeriod 15s", "version: v1\nhealth:\n  quietPeriod: 15s\n", {}),
                            ("sharing.timeSlicing replicas 4",
                             "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                             "    - name: nvidia.com/gpu\n      replicas: 4\n", {}),
                            ("metrics.enabled", None,
                             {"metrics": {"enabled": True},
                              "devicePlugin": {"enableHostNetwork": True}})):
        path = os.path.join(work, variant.split()[0].replace(".", "-") + ".yaml")
        with open(path, "w") as f:
            f.write(render_chart({**chart_values(config), **extra}))
        charts[variant] = path
    charts.update(cluster_scenarios.render_charts(work))
    ctx = {"uuids": uuids, "ngpus": len(uuids), "overlay": overlay, "charts": charts}
    print(f"profile {A.profile}: {len(uuids)} GPUs")

    # GDP_E2E_SCENARIOS=a,b,...: only those (a developer's shortcut; later scenarios build
    # on earlier ones, so name the ones they need too). CI runs them all.
    only = [n for n in os.environ.get("GDP_E2E_SCENARIOS", "").split(",") if n]
    for name, fn in SCENARIOS:
        if only and name not in only:
            continue
        t0 = time.monotonic()
        print(f"--- {name}")
        try:
            fn(ctx)
        except Skip as e:
            not_applicable.append(name)
            print(f"SKIP {name}: {e}")
            continue
        except (Fail, subprocess.TimeoutExpired) as e:
            failed.append(name)
            print(f"FAIL {name}: {e}")
            for args in (("get", "pods", "-A", "-o", "wide"), ("describe", "node", NODE)):
                print(f"$ kubectl {' '.join(args)}")
                print(kubectl(*args, check=False))
            break  # later scenarios build on this one
        passed.append(name)
        print(f"ok {name} ({time.monotonic() - t0:.1f} s)")
    skipped = (len(only) if only else len(SCENARIOS)) - len(passed) - len(failed) - len(not_applicable)
    print(f"{len(passed)} passed, {len(failed)} failed" + (f", {skipped} skipped" if skipped else "") +
          (f", {len(not_applicable)} not applicable here (SKIP: {', '.join(not_applicable)})"
           if not_applicable else ""))
    sys.exit(1 if failed or skipped else 0)


try:
    main()
except KeyboardInterrupt:  # Ctrl-C: run.sh's trap tears the cluster down
    sys.exit(130)
