"""The e2e scenario of DRA (issue 20, after nvidia_chart_scenarios.py's): our chart with
dra.enabled on a Kubernetes >= 1.34 node (resource.k8s.io/v1), everything asserted through
the API server and the pods. Where the API server serves no resource.k8s.io/v1 (below
1.34) it raises scenarios.py's Skip: one line, counted as skipped (not applicable), never
as passed. What the cluster does is asked of it, never of the variables that set it up.
Uses scenarios.py's helpers (it is __main__).

  dra  the chart's DRA mode (health.quietPeriod 15s, the simulated node's device nodes as
       character devices under a dev root passed as NVIDIA_DEV_ROOT): the ResourceSlice of
       pool <node> with one device gpu-<minor> per GPU and NVIDIA's attributes; the
       DeviceClasses; a pod with a claim for one GPU and one with a claim for two GPUs
       selected by CEL on productName Running, their claims allocated to our devices, and
       `ls /dev` in each shows exactly the claimed GPUs' nodes (CDI); an Xid withdraws the
       device from the slice where the API server drops device taints (DRADeviceTaints
       off), taints it where the server keeps them (a tainted slice written with
       --dry-run=server says which), and recovery restores it (where the API server and
       the kubelet report ResourceHealthStatus on, an Xid on the GPU of a claim held by a
       pod shows in the pod's status, then clears); a kubelet restart (waited for until
       the new kubelet holds the pods and serves exec in them) and a plugin pod restart
       keep the slice and the pods (a new claim is prepared by the new plugin pod);
       deleting a pod removes its claim's CDI spec. A failed run removes what it made,
       claim specs left in the CDI root included.
  dra-cuda  the driver in the container (issue 29): the chart's DRA mode given a driver
       root rendered by nvml-sim-render --driver-root, the nvidia-cdi-hook stand-in as
       cdi.nvidiaHookPath; pods of a plain Debian image with cuda-probe (tests/cdi/), one
       at a time, with a claim for one GPU (the last full one, by CEL on its UUID), for
       two GPUs and (if the profile has MIG devices, as GDP_E2E_PROFILE=
       sim/profiles/a100-mig-mixed.yaml has) for one MIG device (a 1g.5gb by CEL on its
       profile, class mig.nvidia.com): each prints cuda-probe's and nvidia-smi -L's lines,
       exactly the claim's devices (names and UUIDs of the slice) and memalloc ok, and
       the four hooks ran for it on the node. SKIP below 1.34 and below containerd 1.7.
  cdi-cri  the same node with the device plugin alone, deviceListStrategy=cdi-cri: a pod
       with nvidia.com/gpu: 1 sees exactly the GPU the kubelet's checkpoint records, given
       as the CDI name Allocate returned (a GPU in MIG mode, given whole under the chart's
       MIG strategy none: nvidia-smi lists it, CUDA has no device). SKIP below kubelet
       1.28 (no CDI devices in the CRI) and below containerd 1.7."""

import base64
import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys

import yaml

import __main__ as h

DRIVER = "gpu.nvidia.com"
CDI_ROOT = "/var/run/cdi"  # the chart's dra.cdiRoot, watched by cluster.sh's containerd 1.7
NVIDIA_MAJOR = 195
CTL_MINOR = 255
QUIET = "version: v1\nhealth:\n  quietPeriod: 15s\n"


def server_version():
    """gitVersion and (major, minor) from it: Debian's 1.20 build leaves major and minor
    empty (no git tree at build time) but sets gitVersion."""
    git = json.loads(h.kubectl("version", "-o", "json"))["serverVersion"].get("gitVersion", "")
    m = re.match(r"v(\d+)\.(\d+)\.", git)
    return git, (int(m.group(1)), int(m.group(2))) if m else None


def render_dra(dev_root, git_version):
    """The chart in DRA mode for this cluster (its version as Helm's Capabilities), with
    API access as render_chart_api gives it, and the dev root mounted at its own path: the
    CDI specs name host paths under it, and the plugin looks for the control nodes there."""
    # The MPS runner's DaemonSet (dra.mps.enabled, on by default) off: these scenarios make
    # no MPS claim, and its process would load the simulated NVML too, whose control FIFO
    # then has two readers, either of which takes an injected Xid (dra failed so on 1.36.3).
    values = h.chart_values(QUIET, dra={"enabled": True, "mps": {"enabled": False}},
                            devicePlugin={"enabled": True, "enableHostNetwork": True})
    return render_node_chart(values, git_version, {"e2e-dev-root": dev_root},
                             {"NVIDIA_DEV_ROOT": dev_root}, api=True)


def render_node_chart(values, git_version, host_dirs, env, api=False):
    """The chart with these values for this cluster (its version as Helm's Capabilities);
    host_dirs {volume name: host directory} mounted read-only in the plugin container at
    their own paths, env added to it; api: the API server reachable (the host network's
    127.0.0.1, as render_chart_api gives it)."""
    sys.path.insert(0, os.path.join(h.A.source, "tests", "deploy"))
    import deploylib  # noqa: E402
    major, minor = git_version.lstrip("v").split(".")[:2]
    files, _ = deploylib.render(h.A.helm_render, values, cluster={"Capabilities": {
        "KubeVersion": {"Version": git_version, "Major": major, "Minor": minor}}})
    docs = [d for name in sorted(files) for d in files[name]]
    for d in docs:
        if d["kind"] != "DaemonSet":
            continue
        pod = d["spec"]["template"]["spec"]
        for vol, path in host_dirs.items():
            pod.setdefault("volumes", []).append({"name": vol, "hostPath": {
                "path": path, "type": "Directory"}})
        for c in pod["containers"]:
            if c["name"] == "gpu-device-plugin-ctr":
                if api:
                    c["env"] += [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                                 {"name": "KUBERNETES_SERVICE_PORT", "value": "16443"}]
                c["env"] += [{"name": k, "value": v} for k, v in env.items()]
                for vol, path in host_dirs.items():
                    c.setdefault("volumeMounts", []).append({"name": vol, "mountPath": path,
                                                             "readOnly": True})
    return yaml.safe_dump_all(docs, sort_keys=False)


def make_dev_root(path, minors):
    """What a GPU node's /dev has for these GPUs: /dev/nvidia<minor> and /dev/nvidiactl as
    character devices of NVIDIA's major (containerd's CDI accepts only device nodes)."""
    os.makedirs(os.path.join(path, "dev"))
    for name, minor in [(f"nvidia{m}", m) for m in minors] + [("nvidiactl", CTL_MINOR)]:
        os.mknod(os.path.join(path, "dev", name), 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, minor))


def our_slices():
    return [s for s in h.kjson("get", "resourceslices")["items"]
            if s["spec"].get("driver") == DRIVER and s["spec"].get("nodeName") == h.NODE]


def slice_devices():
    """{device name: attributes} over our slices of the newest generation."""
    out = {}
    for s in our_slices():
        if s["spec"]["pool"]["name"] != h.NODE:
            raise h.Fail(f"slice {s['metadata']['name']} pool {s['spec']['pool']}")
        for d in s["spec"].get("devices", []):
            out[d["name"]] = {k: next(iter(v.values())) for k, v in d.get("attributes", {}).items()}
    return out


def wait_devices(names, what):
    return h.wait(what, lambda: (lambda got: got if set(got) == set(names) else None)(slice_devices()))


def slice_ids():
    """{slice name: (uid, generation)}: whether a restart re-created or rewrote the slice."""
    return {s["metadata"]["name"]: (s["metadata"]["uid"], s["metadata"].get("generation"))
            for s in our_slices()}


def show_slices():
    h.show("get", "resourceslices", "-o", "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,"
           "DRIVER:.spec.driver,POOL:.spec.pool.name,DEVICES:.spec.devices[*].name")


def claim(name, count, cel=None):
    exactly = {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": count}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}}


def claim_template(name, count):
    c = claim(name, count)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": c["metadata"], "spec": {"spec": c["spec"]}}


def claim_pod(name, claim_name, template=False):
    source = {"resourceClaimTemplateName" if template else "resourceClaimName": claim_name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "automountServiceAccountToken": False,
                     "resourceClaims": [dict(name="gpus", **source)],
                     "containers": [{"name": "c", "image": h.BUSYBOX, "command": ["sleep", "3600"],
                                     "resources": {"claims": [{"name": "gpus"}]}}]}}


def allocated(claim_name, count):
    """The devices the claim is allocated, checked to be ours, this node's pool."""
    c = h.wait(f"claim {claim_name} allocated", lambda: (lambda o: o if o.get("status", {}).get(
        "allocation") else None)(h.kjson("get", "resourceclaim", claim_name)))
    results = c["status"]["allocation"]["devices"]["results"]
    if len(results) != count or any(r["driver"] != DRIVER or r["pool"] != h.NODE for r in results):
        raise h.Fail(f"claim {claim_name} results {results}")
    return c["metadata"]["uid"], sorted(r["device"] for r in results)


def dev_listing(pod):
    return sorted(n for n in h.kubectl("exec", pod, "--", "ls", "/dev").split() if n.startswith("nvidia"))


def cdi_spec(uid):
    return os.path.join(CDI_ROOT, f"k8s.gpu.nvidia.com-claim_{uid}.yaml")


# --- what this cluster does, asked of the cluster ------------------------------------------
#
# Not of GDP_E2E_FEATURE_GATES: that variable says only what was passed, and a release's
# defaults change under it (1.36 turns DRADeviceTaints and ResourceHealthStatus on).


def served_versions(group):
    """The versions of an API group the API server serves (its discovery), [] for none."""
    r = subprocess.run([h.A.kubectl, "--kubeconfig", h.A.kubeconfig, "get", "--raw", f"/apis/{group}"],
                       capture_output=True, text=True, timeout=120)
    return [v["version"] for v in json.loads(r.stdout).get("versions", [])] if r.returncode == 0 else []


TAINT_PROBE = "gdp-e2e-taint-probe"


def taints_kept():
    """Whether the API server keeps a device's taints (its DRADeviceTaints gate): a
    ResourceSlice with one tainted device, written with --dry-run=server (defaulted, the
    fields of a disabled feature dropped and validated as for a real write; nothing is
    stored), and what came back. With taints kept the plugin taints an unhealthy device;
    without, it withdraws it from the slice."""
    probe = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
             "metadata": {"name": TAINT_PROBE},
             "spec": {"driver": "probe.gdp-e2e.example.com", "nodeName": h.NODE,
                      "pool": {"name": TAINT_PROBE, "generation": 1, "resourceSliceCount": 1},
                      "devices": [{"name": "probe", "taints": [
                          {"key": "gdp-e2e.example.com/probe", "value": "1", "effect": "NoSchedule"}]}]}}
    got = json.loads(h.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                               stdin=json.dumps(probe)))
    return bool(got["spec"]["devices"][0].get("taints"))


def feature_enabled(metrics, gate):
    """A component's own word on a feature gate: kubernetes_feature_enabled in its /metrics
    (every component from 1.26). None when it does not say."""
    got = [v for labels, v in h.metric_samples(metrics, "kubernetes_feature_enabled")
           if labels.get("name") == gate]
    return bool(got[0]) if got else None


def health_in_pod_status():
    """Whether an unhealthy device shows in its pod's status (ResourceHealthStatus): the
    kubelet writes allocatedResourcesStatus only with the gate on, and the API server keeps
    the field only with the gate on; each is asked for its own."""
    api = feature_enabled(h.kubectl("get", "--raw", "/metrics"), "ResourceHealthStatus")
    kubelet = feature_enabled(h.kubelet_get("/metrics"), "ResourceHealthStatus")
    return bool(api and kubelet), f"ResourceHealthStatus: kube-apiserver {api}, kubelet {kubelet}"


def device_taints():
    """{device name: its taints} over our slices."""
    return {d["name"]: d.get("taints", []) for s in our_slices() for d in s["spec"].get("devices", [])}


def container_health(pod):
    """The kubelet's allocatedResourcesStatus of the pod's container (ResourceHealthStatus)."""
    st = h.kjson("get", "pod", pod)["status"].get("containerStatuses", [])
    return st[0].get("allocatedResourcesStatus", []) if st else []


def health_of(pod, claim_uid, device):
    """The health the pod's status gives the device (None: not listed). The kubelet names
    it by the first CDI ID Prepare returned for it, else <driver>/<pool>/<device>."""
    ids = {f"k8s.gpu.nvidia.com/claim={claim_uid}-{device}", f"{DRIVER}/{h.NODE}/{device}"}
    for entry in container_health(pod):
        for r in entry.get("resources") or []:
            if r.get("resourceID") in ids:
                return r.get("health")
    return None


def xid_cycle(victim, uuid, all_names, taints_kept=False, pod=None, claim_uid=None):
    """An Xid on victim through the simulator: with taints_kept (the DRADeviceTaints gate
    on) the device stays in the slice with NVIDIA's NoSchedule taint, else it is withdrawn;
    recovery after the quiet period clears the taint or restores it. pod: a pod holding
    victim whose status (ResourceHealthStatus on) must show it Unhealthy, then Healthy."""
    ack = os.path.join(h.A.state, "driver", "run", "ack")
    acked = open(ack).read().count("\n")
    line = f"xid {uuid} 32"
    fd = h.wait("the simulator's control FIFO open in the plugin",
                lambda: h._open_fifo(os.path.join(h.A.state, "driver", "run", "ctl")))
    os.write(fd, (line + "\n").encode())
    os.close(fd)
    h.wait("the simulator's ack", lambda: open(ack).read().count("\n") > acked)
    print(f"  injected through the simulator: {line}")
    if taints_kept:
        want = {"key": "gpu.nvidia.com/xid", "value": "32", "effect": "NoSchedule"}
        taints = h.wait(f"{victim} tainted in the slice", lambda: (lambda t: t if any(
            all(x.get(k) == v for k, v in want.items()) for x in t.get(victim, [])) and
            set(t) == set(all_names) else None)(device_taints()))
        print(f"  {victim} kept in the slice, tainted: {json.dumps(taints[victim], sort_keys=True)}")
    else:
        wait_devices([n for n in all_names if n != victim], f"{victim} withdrawn from the slice")
        print(f"  {victim} withdrawn:")
        show_slices()
    if pod:
        h.wait(f"pod {pod}'s status showing {victim} Unhealthy",
               lambda: health_of(pod, claim_uid, victim) == "Unhealthy")
        print(f"  $ kubectl get pod {pod} -o jsonpath='{{.status.containerStatuses[0].allocatedResourcesStatus}}'")
        print("    " + json.dumps(container_health(pod), sort_keys=True))
    if taints_kept:
        h.wait(f"{victim}'s taint removed after the quiet period", lambda: (lambda t: set(t) == set(
            all_names) and not any(t.values()))(device_taints()))
        print(f"  {victim}'s taint removed after the quiet period and a probe: no device has a taint")
    else:
        wait_devices(all_names, f"{victim} restored after the quiet period")
        print(f"  {victim} restored after the quiet period and a probe:")
        show_slices()
    if pod:
        h.wait(f"pod {pod}'s status showing {victim} Healthy",
               lambda: health_of(pod, claim_uid, victim) == "Healthy")
        print(f"  pod {pod}'s status: " + json.dumps(container_health(pod), sort_keys=True))


def describe_ids(before, after):
    if set(before) != set(after):
        return f"re-created as {sorted(after)}"
    if any(before[n][0] != after[n][0] for n in before):
        return "deleted and re-created (new UID)"
    if before != after:
        return "the same object, rewritten"
    return "the same object, not written"


def need_resource_v1():
    """The server's version, after checking that it serves resource.k8s.io/v1 (else Skip)."""
    git_version, version = server_version()
    served = served_versions("resource.k8s.io")
    if "v1" not in served:
        raise h.Skip(f"skipped: no resource.k8s.io/v1 served (resource.k8s.io versions served: "
                     f"{', '.join(served) or 'none'}; server {git_version}): Kubernetes < 1.34 has none")
    print(f"  {git_version}: resource.k8s.io versions served: {', '.join(served)}")
    return git_version, version


CLAIM_SPEC = re.compile(r"^\.?k8s\.gpu\.nvidia\.com-claim_.*")


def claim_specs_swept(undo):
    """Registered first, so run last: whatever claim spec (or staged one) appeared in the
    CDI root during the scenario and is still there once its pods, claims and plugin are
    gone (a failed run whose pods the kubelet could not unprepare, a force-deleted pod) is
    removed, and said. A run that passes has none left by then."""
    before = set(os.listdir(CDI_ROOT)) if os.path.isdir(CDI_ROOT) else set()

    def sweep():
        left = sorted(f for f in (os.listdir(CDI_ROOT) if os.path.isdir(CDI_ROOT) else [])
                      if f not in before and CLAIM_SPEC.match(f))
        for f in left:
            os.unlink(os.path.join(CDI_ROOT, f))
        if left:
            print(f"  cleanup: {len(left)} claim spec(s) left in {CDI_ROOT}, removed: {', '.join(left)}")
    undo.callback(sweep)


def cleanup(*args, pods=()):
    """An undo step that never raises (the next ones still run, the failure that started
    the unwinding stays the one reported): kubectl args; for pods, a deletion through the
    kubelet first (their claims unprepared, specs removed), forced after 60 s."""
    def step():
        try:
            if pods:
                r = subprocess.run([h.A.kubectl, "--kubeconfig", h.A.kubeconfig, "delete", "pod", *pods,
                                    "--ignore-not-found", "--wait=true", "--timeout=60s"],
                                   capture_output=True, text=True, timeout=120)
                if r.returncode != 0:
                    print(f"  cleanup: pods {', '.join(pods)} not deleted by the kubelet in 60 s "
                          f"({r.stderr.strip()}): forced")
                    h.kubectl("delete", "pod", *pods, "--ignore-not-found", "--grace-period=0",
                              "--force", check=False)
            if args:
                h.kubectl(*args, check=False)
        except (h.Fail, subprocess.TimeoutExpired) as e:
            print(f"  cleanup: kubectl {' '.join(args) or 'delete pod'}: {e}")
    return step


def s_dra(ctx):
    git_version, version = need_resource_v1()
    with contextlib.ExitStack() as undo:
        claim_specs_swept(undo)
        try:
            _dra(ctx, git_version, version, undo)
        except (h.Fail, subprocess.TimeoutExpired):
            # What the cleanup is about to delete, for the failure's record.
            for args in (("get", "resourceslices,resourceclaims,deviceclasses", "-o", "wide"),
                         ("get", "pods", "-o", "wide")):
                print(f"$ kubectl {' '.join(args)}")
                print(h.kubectl(*args, check=False))
            raise


def _dra(ctx, git_version, version, undo):
    profile = yaml.safe_load(open(h.A.profile))
    minors = [d.get("minor_number", i) for i, d in enumerate(profile["devices"])]
    by_uuid = {d["uuid"]: f"gpu-{m}" for d, m in zip(profile["devices"], minors)}
    names = sorted(by_uuid.values())
    dev_root = os.path.join(h.A.state, "driver", "dra-dev-root")
    undo.callback(shutil.rmtree, dev_root, ignore_errors=True)
    make_dev_root(dev_root, minors)

    # One plugin per node: the DaemonSets of the earlier scenarios go.
    for ds in h.kjson("get", "daemonsets", "-A")["items"]:
        if ds["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "gpu-device-plugin":
            h.kubectl("delete", "daemonset", "-n", ds["metadata"]["namespace"], ds["metadata"]["name"],
                      "--wait=true")
    h.wait("earlier plugin pods gone", lambda: not h.plugin_pods())
    h.kubectl("label", "node", h.NODE, "nvidia.com/gpu.present=true", "--overwrite")
    chart = os.path.join(h.A.state, "dra-chart.yaml")
    with open(chart, "w") as f:
        f.write(render_dra(dev_root, git_version))
    undo.callback(cleanup("delete", "resourceslices", "--field-selector", f"spec.driver={DRIVER}",
                          "--ignore-not-found"))
    undo.callback(cleanup("delete", "-f", chart, "--ignore-not-found", "--wait=true"))
    ctx["charts"]["dra"] = chart
    pod = h.apply_chart(ctx, "dra")
    print(f"  plugin pod {pod['metadata']['name']} Running with dra.enabled, {git_version}")

    # The slice: one pool named after the node, gpu-<minor> per GPU, NVIDIA's attributes.
    devs = wait_devices(names, f"ResourceSlice of {DRIVER} with {names}")
    show_slices()
    for name, attrs in devs.items():
        want = {"type": "gpu", "uuid": next(u for u, n in by_uuid.items() if n == name)}
        if any(attrs.get(k) != v for k, v in want.items()) or not attrs.get("productName"):
            raise h.Fail(f"{name} attributes {attrs}")
    product = devs[names[0]]["productName"]
    first = our_slices()[0]
    owners = [(o["kind"], o["name"]) for o in first["metadata"].get("ownerReferences", [])]
    print(f"  slice {first['metadata']['name']}: owner {owners}, pool {first['spec']['pool']}, "
          f"device {names[0]}:")
    print("    " + json.dumps(next(d for d in first["spec"]["devices"] if d["name"] == names[0]), sort_keys=True))
    print(f"  {len(devs)} devices, productName {product!r}, attributes: {sorted(devs[names[0]])}")
    classes = {c["metadata"]["name"] for c in h.kjson("get", "deviceclasses")["items"]}
    if not {"gpu.nvidia.com", "mig.nvidia.com"} <= classes:
        raise h.Fail(f"DeviceClasses {classes}")
    h.show("get", "deviceclasses")

    # Claims: one GPU; two GPUs by CEL on productName.
    cel = f"device.attributes['{DRIVER}'].productName == '{product}'"
    pods = {"dra-one": ("one-gpu", 1, None), "dra-two": ("two-gpus", 2, cel)}
    undo.callback(cleanup("delete", "resourceclaim", "one-gpu", "two-gpus", "three",
                          "--ignore-not-found", "--wait=true"))
    undo.callback(cleanup(pods=[*pods, "dra-three"]))
    held = {}
    for pname, (cname, count, sel) in pods.items():
        h.kubectl("apply", "-f", "-", stdin=json.dumps(claim(cname, count, sel)))
        h.kubectl("apply", "-f", "-", stdin=json.dumps(claim_pod(pname, cname)))
    for pname, (cname, count, _) in pods.items():
        h.pod_running(pname)
        held[pname] = allocated(cname, count)
    h.show("get", "resourceclaims", "-o", "custom-columns=NAME:.metadata.name,"
           "DRIVER:.status.allocation.devices.results[*].driver,POOL:.status.allocation.devices.results[*].pool,"
           "DEVICES:.status.allocation.devices.results[*].device,RESERVED:.status.reservedFor[*].name")
    h.show("get", "pods", *pods, "-o", "wide")
    claimed = [d for _, ds in held.values() for d in ds]
    if len(set(claimed)) != 3:
        raise h.Fail(f"claims not disjoint: {held}")

    def check_dev(pname):
        want = sorted(["nvidiactl"] + [f"nvidia{d.split('-')[1]}" for d in held[pname][1]])
        got = dev_listing(pname)
        print(f"  $ kubectl exec {pname} -- ls /dev  (nvidia*): {' '.join(got)}")
        if got != want:
            raise h.Fail(f"{pname} /dev {got}, want {want} (claim {held[pname]})")
        if not os.path.exists(cdi_spec(held[pname][0])):
            raise h.Fail(f"no CDI spec {cdi_spec(held[pname][0])} for {pname}'s claim")
    for pname in pods:
        check_dev(pname)
    print("  $ kubectl exec dra-two -- ls /dev: " + " ".join(h.kubectl("exec", "dra-two", "--", "ls", "/dev").split()))
    with open(cdi_spec(held["dra-two"][0])) as f:
        spec = yaml.safe_load(f)
    nodes = [(n["path"], n.get("hostPath")) for e in [spec.get("containerEdits", {})] +
             [d["containerEdits"] for d in spec["devices"]] for n in e.get("deviceNodes", [])]
    print(f"  {cdi_spec(held['dra-two'][0])}: kind {spec['kind']}, devices "
          f"{[d['name'] for d in spec['devices']]}, device nodes {nodes}")
    if any(not hp or not hp.startswith(dev_root + "/") for _, hp in nodes):
        raise h.Fail(f"CDI device nodes not under the dev root {dev_root}: {nodes}")

    # Health: an API server that drops taints (DRADeviceTaints off) makes an Xid withdraw
    # the device; one that keeps them, taint it. Where the kubelet and the API server
    # have ResourceHealthStatus, an Xid on a held GPU shows in its pod's status. Both
    # asked of the cluster (above), not of the gates given to it.
    kept = taints_kept()
    health, health_words = health_in_pod_status()
    print(f"  the API server {'keeps' if kept else 'drops'} device taints (a tainted ResourceSlice "
          f"written with --dry-run=server); {health_words}")
    free = next(u for u, n in by_uuid.items() if n not in claimed)
    xid_cycle(by_uuid[free], free, names, taints_kept=kept)
    if health:
        # Which claims the kubelet reports on depends on its version: 1.34 matches the
        # container's claim name against the ResourceClaim's own name (so the pod names
        # its claim "health", as the object is named); later kubelets look the claim up in
        # status.resourceClaimStatuses, which lists only claims made from a template.
        undo.callback(cleanup("delete", "resourceclaimtemplate,resourceclaim", "health",
                              "--ignore-not-found"))
        undo.callback(cleanup(pods=["dra-health"]))
        from_template = version > (1, 34)
        pod = claim_pod("dra-health", "health", template=from_template)
        pod["spec"]["resourceClaims"][0]["name"] = "health"
        pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "health"}]
        h.kubectl("apply", "-f", "-", stdin=json.dumps(
            claim_template("health", 1) if from_template else claim("health", 1)))
        h.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        h.pod_running("dra-health")
        made = (h.kjson("get", "pod", "dra-health")["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
                if from_template else "health")
        uid, (dev,) = allocated(made, 1)
        print(f"  pod dra-health Running with claim {made}"
              f"{' (from template health)' if from_template else ''}: {dev}")
        xid_cycle(dev, next(u for u, n in by_uuid.items() if n == dev), names,
                  taints_kept=kept, pod="dra-health", claim_uid=uid)
        h.kubectl("delete", "pod", "dra-health", "--wait=true")
        # Unprepared before the kubelet restart below: the pod object can be gone before
        # its claim is unprepared, and a kubelet restarted meanwhile never unprepared it
        # (1.36.3, 2026-12-07: its spec was left in the CDI root).
        spec = cdi_spec(uid)
        h.wait(f"{spec} removed after dra-health was deleted", lambda: not os.path.exists(spec))
        h.kubectl("delete", "resourceclaimtemplate,resourceclaim", "health", "--ignore-not-found",
                  "--wait=true")
        h.wait(f"claim {made} gone", lambda: not h.kjson(
            "get", "resourceclaims", "--field-selector", f"metadata.name={made}")["items"])

    # A kubelet restart: the slice is kept or comes back, pods untouched. What the API
    # server says right after it (node Ready, pods Running, the slice) is still the old
    # kubelet's; exec answers "pod does not exist" until the new one has taken the pods
    # over (1.35.6 on 2026-12-07, three runs of three; 1.36.3, two of four), so the wait
    # asks the new kubelet itself (scenarios.py's restart_kubelet).
    before = h.containers_state(pods)
    plug = h.wait_one_plugin_pod()
    ids = slice_ids()
    h.restart_kubelet([*pods, f"kube-system/{plug['metadata']['name']}"], exec_in=list(pods))
    wait_devices(names, "the slice after the kubelet restart")
    if h.containers_state(pods) != before or h.wait_one_plugin_pod()["metadata"]["uid"] != plug["metadata"]["uid"]:
        raise h.Fail("claim pods or the plugin pod changed across the kubelet restart")
    for pname in pods:
        check_dev(pname)
    print(f"  kubelet restarted: slice back ({describe_ids(ids, slice_ids())}), claim pods and "
          "plugin pod untouched")
    show_slices()

    # A plugin pod restart: the checkpoint keeps the claims; a new claim is prepared.
    h.kubectl("delete", "pod", "-n", "kube-system", plug["metadata"]["name"], "--wait=true")
    ids = slice_ids()
    new = h.wait_one_plugin_pod(not_uid=plug["metadata"]["uid"])
    wait_devices(names, "the slice after the plugin pod restart")
    print(f"  plugin pod restarted: slice {describe_ids(ids, slice_ids())}")
    if h.containers_state(pods) != before:
        raise h.Fail("claim pods changed across the plugin pod restart")
    h.kubectl("apply", "-f", "-", stdin=json.dumps(claim("three", 1)))
    h.kubectl("apply", "-f", "-", stdin=json.dumps(claim_pod("dra-three", "three")))
    h.pod_running("dra-three")
    held["dra-three"] = allocated("three", 1)
    if held["dra-three"][1][0] in claimed:
        raise h.Fail(f"dra-three got a held GPU: {held}")
    check_dev("dra-three")
    print(f"  plugin pod {plug['metadata']['name']} deleted, {new['metadata']['name']} Running; "
          f"claim pods untouched; dra-three got {held['dra-three'][1][0]} from the new plugin pod")

    # Unprepare: deleting a pod removes its claim's CDI spec from the host's CDI root.
    for pname in list(held):
        spec = cdi_spec(held[pname][0])
        h.kubectl("delete", "pod", pname, "--wait=true")
        h.wait(f"{spec} removed after {pname} was deleted", lambda: not os.path.exists(spec))
        print(f"  pod {pname} deleted: {os.path.basename(spec)} removed from {CDI_ROOT}")
    # Each spec was written into a file made while its claim's GET was in flight: none of
    # those temporary files is left, through the plugin pod's restart too.
    left = [f for f in os.listdir(CDI_ROOT) if f.startswith(".k8s.gpu.nvidia.com-claim_")]
    if left:
        raise h.Fail(f"staged spec files left in {CDI_ROOT}: {left}")
    h.kubectl("delete", "resourceclaim", "one-gpu", "two-gpus", "three", "--wait=true")


# --- the driver in the container: dra-cuda and cdi-cri -------------------------------------
#
# The node gets the driver's user-space stand-ins (docs/simulator.md, "Driver root") as a
# GPU node has its driver: `nvml-sim-render --driver-root` (libcuda, NVML, nvidia-smi,
# firmware, the persistenced socket) given to the chart as nvidiaDriverRoot (mounted at
# /driver-root in the plugin, the specs' host paths under it), tests/cdi/nvidia-cdi-hook
# at the path given as cdi.nvidiaHookPath (its directory mounted in the plugin at that
# path, where the plugin checks it exists), the profile's /dev as character devices
# (195:<minor>, nvidia-caps 237:<N>) as nvidiaDevRoot and its /proc/driver/nvidia-caps
# as GDP_PROC_ROOT (the MIG capability minors). The pods run a plain Debian 12 image
# (tests/cdi/debian-rootfs.sh) with cuda-probe and get nothing of the driver but what
# the CDI IDs bring: no device, no library, no LD_LIBRARY_PATH; only the profile, read-only,
# and MOCK_NVML_CONFIG naming it (the simulator's stand-in for the kernel's state).

CUDA_IMAGE = "localhost/gdp-e2e/cuda:1"
CTR_PROFILE = "/etc/nvml-sim/profile.yaml"
HOOKS = ["create-symlinks", "enable-cuda-compat", "update-ldcache",
         "disable-device-node-modification"]
CAPS_MAJOR = 237  # nvidia-caps: dynamic on a real host; unused on this one
# Each section: "== <name>", its output (stderr too), "== rc <status>"; then "== end", and the
# pod stays (a finished pod's claim would be deallocated before it is read).
CUDA_SCRIPT = r"""sec() { n=$1; shift; echo "== $n"; "$@" 2>&1; echo "== rc $?"; }
sec probe cuda-probe
sec smi nvidia-smi -L
echo "== end"
exec sleep 3600
"""


def build_dir():
    b = os.environ.get("GDP_BUILD_DIR")
    if not b:
        raise h.Fail("GDP_BUILD_DIR unset: the meson build directory (run.sh's) is needed "
                     "for cuda-probe and nvml-sim-render")
    return os.path.realpath(b)


def cuda_image(ctx):
    """localhost/gdp-e2e/cuda:1 imported once per run: the Debian rootfs, cuda-probe in
    /usr/local/bin, the image's own ld.so.cache (a Debian image has one), as
    tests/cdi/test_cdi_containerd.py builds its image."""
    if ctx.get("cuda-image"):
        return CUDA_IMAGE
    probe = os.path.join(build_dir(), "tests", "cdi", "cuda-probe")
    if not os.access(probe, os.X_OK):
        raise h.Fail(f"no {probe} (ninja -C {build_dir()})")
    r = subprocess.run(["sh", os.path.join(h.A.source, "tests", "cdi", "debian-rootfs.sh")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise h.Fail(f"debian-rootfs.sh: {r.stderr.strip()}")
    work = os.path.join(h.A.state, "cuda-image")
    root = os.path.join(work, "root")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(r.stdout.strip(), root, symlinks=True)
    os.makedirs(os.path.join(root, "usr", "local", "bin"), exist_ok=True)
    shutil.copyfile(probe, os.path.join(root, "usr", "local", "bin", "cuda-probe"))
    os.chmod(os.path.join(root, "usr", "local", "bin", "cuda-probe"), 0o755)
    subprocess.run(["/sbin/ldconfig", "-r", root], check=True)
    tar = os.path.join(work, "cuda.tar")
    subprocess.run([sys.executable, os.path.join(h.A.source, "tests", "e2e", "oci-image.py"),
                    "--rootfs", root, "--name", CUDA_IMAGE, "--out", tar, "--env",
                    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "--cmd", '["/bin/sh"]'], check=True, capture_output=True, text=True)
    r = subprocess.run(["sh", h.A.cluster, "import", tar], capture_output=True, text=True)
    if r.returncode != 0:
        raise h.Fail(f"cluster.sh import {tar}: {r.stderr.strip()}")
    shutil.rmtree(work)
    ctx["cuda-image"] = True
    print(f"  image {CUDA_IMAGE}: Debian 12 (libc6, libc-bin, busybox-static, base-files) "
          "+ cuda-probe, imported")
    return CUDA_IMAGE


def node_driver(undo):
    """The node's driver stand-ins under $STATE/driver/cuda, removed when undo unwinds.
    Returns {driver-root, dev-root, proc-root, hook, hook-log}."""
    base = os.path.join(h.A.state, "driver", "cuda")
    undo.callback(shutil.rmtree, base, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)
    n = {"driver-root": os.path.join(base, "driver-root"), "dev-root": os.path.join(base, "host"),
         "proc-root": os.path.join(base, "proc"), "hook-dir": os.path.join(base, "hook")}
    render = os.path.join(build_dir(), "sim", "nvml", "nvml-sim-render")
    r = subprocess.run([render, "--profile", h.A.profile, "--driver-root", n["driver-root"],
                        "--dev-root", os.path.join(n["dev-root"], "dev"),
                        "--proc-root", n["proc-root"]], capture_output=True, text=True)
    if r.returncode != 0:
        raise h.Fail(f"nvml-sim-render: {(r.stdout + r.stderr).strip()}")
    # The rendering's /dev holds plain files; containerd's CDI takes device nodes only. The
    # nodes that are no GPU get made-up minors of NVIDIA's major, as tests/dra does.
    dev = os.path.join(n["dev-root"], "dev")
    extra = {"nvidiactl": CTL_MINOR, "nvidia-uvm": 254, "nvidia-uvm-tools": 253, "nvidia-modeset": 252}
    nodes = [(name, NVIDIA_MAJOR, int(name[6:]) if name[6:].isdigit() else extra.get(name))
             for name in os.listdir(dev) if name.startswith("nvidia") and name != "nvidia-caps"]
    caps = os.path.join(dev, "nvidia-caps")
    nodes += [(os.path.join("nvidia-caps", c), CAPS_MAJOR, int(c[len("nvidia-cap"):]))
              for c in (os.listdir(caps) if os.path.isdir(caps) else [])]
    for name, major, minor in nodes:
        if minor is None:
            raise h.Fail(f"nvml-sim-render made {dev}/{name}, unknown here")
        os.unlink(os.path.join(dev, name))
        os.mknod(os.path.join(dev, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    os.makedirs(n["hook-dir"])
    n["hook"] = os.path.join(n["hook-dir"], "nvidia-cdi-hook")
    shutil.copy2(os.path.join(h.A.source, "tests", "cdi", "nvidia-cdi-hook"), n["hook"])
    n["hook-log"] = os.path.join(n["hook-dir"], "nvidia-cdi-hook.log")  # the stand-in's
    return n


def driver_chart(n, values, git_version, api):
    """The chart's driver values for node n, its dev root and the hook's directory mounted
    in the plugin at their paths (nvidiaDevRoot, cdi.nvidiaHookPath: the chart passes them
    on and mounts neither), the proc root the same way as GDP_PROC_ROOT."""
    values.update(nvidiaDriverRoot=n["driver-root"], nvidiaDevRoot=n["dev-root"],
                  cdi={"nvidiaHookPath": n["hook"]})
    return render_node_chart(values, git_version,
                             {"e2e-dev-root": n["dev-root"], "e2e-proc-root": n["proc-root"],
                              "e2e-hook": n["hook-dir"]},
                             {"GDP_PROC_ROOT": n["proc-root"]}, api=api)


def hook_lines(n):
    if not os.path.exists(n["hook-log"]):
        return []
    with open(n["hook-log"]) as f:
        return f.read().splitlines()


def cuda_pod(name, claim_name=None, gpus=0):
    """A pod of the cuda image running CUDA_SCRIPT once: a claim's devices or nvidia.com/gpu."""
    c = {"name": "c", "image": CUDA_IMAGE, "command": ["sh", "-c", CUDA_SCRIPT],
         "env": [{"name": "MOCK_NVML_CONFIG", "value": CTR_PROFILE}],
         "volumeMounts": [{"name": "profile", "mountPath": CTR_PROFILE, "readOnly": True}]}
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False, "containers": [c],
            "volumes": [{"name": "profile", "hostPath": {
                "path": os.path.join(h.A.state, "driver", "run", "profile.yaml"), "type": "File"}}]}
    if claim_name:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim_name}]
        c["resources"] = {"claims": [{"name": "gpus"}]}
    else:
        c["resources"] = {"limits": {h.RES: str(gpus)}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def run_cuda_pod(n, pod):
    """Run the pod until it has printed its sections; those ({name: (rc, lines)}) and the
    hooks that ran for it. Prints what it printed."""
    name = pod["metadata"]["name"]
    before = len(hook_lines(n))
    h.kubectl("apply", "-f", "-", stdin=json.dumps(pod))

    def done():  # the log once it has the end line; the pod if it ended
        p = h.kjson("get", "pod", name)
        if p["status"].get("phase") in ("Succeeded", "Failed"):
            return p
        log = h.kubectl("logs", name).splitlines() if p["status"].get("phase") == "Running" else []
        return log if "== end" in log else None
    log = h.wait(f"pod {name} Running and through its checks", done)
    if isinstance(log, dict):
        print(f"  $ kubectl logs {name}\n" + h.kubectl("logs", name, check=False))
        raise h.Fail(f"pod {name} {log['status']['phase']}: "
                     f"{json.dumps(log['status'].get('containerStatuses'))}")
    print(f"  $ kubectl logs {name}")
    for line in log:
        print(f"    {line}")
    got, sec, body = {}, None, []
    for line in log:
        if line.startswith("== rc ") and sec:
            got[sec] = (int(line[6:]), body)
            sec, body = None, []
        elif line.startswith("== "):
            sec, body = line[3:], []
        elif sec:
            body.append(line)
    if log[-1:] != ["== end"] or set(got) != {"probe", "smi"}:
        raise h.Fail(f"pod {name} log: {log}")
    hooks = hook_lines(n)[before:]
    for line in hooks:
        print(f"    (hook on the node) {line}")
    return got, hooks


def expect_devices(name, got, hooks, devices):
    """devices: [(GPU index in NVML order, GPU name, GPU UUID, None or (MIG profile, MIG
    UUID))] the pod must see, exactly: cuda-probe lists them and allocates on each,
    nvidia-smi -L lists them (a MIG device under its parent); the four hooks ran once."""
    devices = sorted(devices)
    want_probe = [f"count {len(devices)}"] + [
        f"gpu {i} {gname} MIG {mig[0]} {mig[1]}" if mig else f"gpu {i} {gname} {uuid}"
        for i, (_, gname, uuid, mig) in enumerate(devices)] + ["memalloc ok"]
    want_smi = []
    for i, (_, gname, uuid, mig) in enumerate(devices):
        want_smi.append(f"GPU {i}: {gname} (UUID: {uuid})")
        if mig:
            want_smi.append("  MIG %-11s Device %2d: (UUID: %s)" % (mig[0], 0, mig[1]))
    if got["probe"] != (0, want_probe) or got["smi"] != (0, want_smi):
        raise h.Fail(f"pod {name}: cuda-probe {got['probe']}, nvidia-smi -L {got['smi']}; "
                     f"want {want_probe} and {want_smi}")
    if [x.split()[0] for x in hooks] != HOOKS:
        raise h.Fail(f"pod {name}: hooks {hooks}, want one each of {HOOKS}")


def show_driver_edits(path, n):
    """One line on a CDI spec's driver part; its hooks must run the path given the plugin."""
    with open(path) as f:
        spec = yaml.safe_load(f)  # JSON is YAML
    edits = [spec.get("containerEdits", {})] + [d.get("containerEdits", {}) for d in spec["devices"]]
    hooks = [hk for e in edits for hk in e.get("hooks", [])]
    mounts = [m for e in edits for m in e.get("mounts", [])]
    print(f"  {path}: devices {[d['name'] for d in spec['devices']]}, {len(mounts)} mounts "
          f"from {n['driver-root']}, hooks {[hk['args'][1] for hk in hooks]}")
    if {hk["path"] for hk in hooks} != {n["hook"]}:
        raise h.Fail(f"{path}: hooks {hooks}, want {n['hook']}")


def runtime_versions():
    """(kubelet (major, minor) or None, containerd (major, minor) or None, the node's words)."""
    info = h.kjson("get", "node", h.NODE)["status"]["nodeInfo"]
    kl = re.match(r"v(\d+)\.(\d+)\.", info.get("kubeletVersion", ""))
    rt = re.match(r"containerd://v?(\d+)\.(\d+)\.", info.get("containerRuntimeVersion", ""))
    return ((int(kl.group(1)), int(kl.group(2))) if kl else None,
            (int(rt.group(1)), int(rt.group(2))) if rt else None,
            f"kubelet {info.get('kubeletVersion')}, {info.get('containerRuntimeVersion')}")


def need_cdi_runtime():
    kubelet, ctrd, words = runtime_versions()
    if ctrd is None or ctrd < (1, 7):
        raise h.Skip(f"skipped: the runtime applies no CDI spec below containerd 1.7 ({words})")
    return kubelet, words


def profile_gpus():
    """{GPU UUID: (NVML index, name, MIG mode on)} from the cluster's profile."""
    p = yaml.safe_load(open(h.A.profile))
    dflt = p.get("device_defaults", {})
    return {d["uuid"]: (i, d.get("name", dflt.get("name")), (d.get("mig") or dflt.get("mig") or {}).get(
        "mode_current") == "enabled") for i, d in enumerate(p["devices"])}


def replace_plugin(ctx, variant, text):
    """One plugin per node: the DaemonSets of earlier scenarios go, this chart comes."""
    for ds in h.kjson("get", "daemonsets", "-A")["items"]:
        if ds["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "gpu-device-plugin":
            h.kubectl("delete", "daemonset", "-n", ds["metadata"]["namespace"], ds["metadata"]["name"],
                      "--wait=true")
    h.wait("earlier plugin pods gone", lambda: not h.plugin_pods())
    h.kubectl("label", "node", h.NODE, "nvidia.com/gpu.present=true", "--overwrite")
    path = os.path.join(h.A.state, f"{variant}-chart.yaml")
    with open(path, "w") as f:
        f.write(text)
    ctx["charts"][variant] = path
    return path, h.apply_chart(ctx, variant)


def s_dra_cuda(ctx):
    git_version, _ = need_resource_v1()
    _, words = need_cdi_runtime()
    with contextlib.ExitStack() as undo:
        claim_specs_swept(undo)
        try:
            _dra_cuda(ctx, git_version, words, undo)
        except (h.Fail, subprocess.TimeoutExpired):
            for args in (("get", "resourceslices,resourceclaims", "-o", "wide"), ("get", "pods", "-o", "wide"),
                         ("describe", "pods", "-l", "gdp-e2e=dra-cuda")):
                print(f"$ kubectl {' '.join(args)}")
                print(h.kubectl(*args, check=False))
            raise


def _dra_cuda(ctx, git_version, words, undo):
    cuda_image(ctx)
    n = node_driver(undo)
    # The MPS runner's DaemonSet (dra.mps.enabled, on by default) off: these scenarios make
    # no MPS claim, and its process would load the simulated NVML too, whose control FIFO
    # then has two readers, either of which takes an injected Xid (dra failed so on 1.36.3).
    values = h.chart_values(QUIET, dra={"enabled": True, "mps": {"enabled": False}},
                            devicePlugin={"enabled": True, "enableHostNetwork": True})
    chart, plug = replace_plugin(ctx, "dra-cuda", driver_chart(n, values, git_version, api=True))
    undo.callback(cleanup("delete", "resourceslices", "--field-selector", f"spec.driver={DRIVER}",
                          "--ignore-not-found"))
    undo.callback(cleanup("delete", "-f", chart, "--ignore-not-found", "--wait=true"))
    print(f"  plugin pod {plug['metadata']['name']} Running: dra.enabled, nvidiaDriverRoot "
          f"{n['driver-root']}, cdi.nvidiaHookPath {n['hook']}; {git_version}, {words}")
    gpus = profile_gpus()
    devs = h.wait(f"a ResourceSlice of {DRIVER}", lambda: slice_devices() or None)
    show_slices()
    full = sorted((d for d, a in devs.items() if a.get("type") == "gpu"),
                  key=lambda d: gpus[devs[d]["uuid"]][0])
    migs = sorted(d for d, a in devs.items() if a.get("type") == "mig")
    if len(full) < 2:
        raise h.Fail(f"the slice has {full}: two full GPUs are needed")

    def seen(dev):
        a = devs[dev]
        if a["type"] == "mig":
            parent = a["parentUUID"]
            return (gpus[parent][0], a["productName"], parent, (a["profile"], a["uuid"]))
        return (gpus[a["uuid"]][0], a["productName"], a["uuid"], None)

    # The one GPU by CEL on its UUID, the last full GPU: not the device a first fit gives,
    # and CUDA must still number it 0.
    last = devs[full[-1]]["uuid"]
    claims = [("cuda-one", "one-gpu",
               claim("cuda-one-gpu", 1, f"device.attributes['{DRIVER}'].uuid == '{last}'")),
              ("cuda-two", "two-gpus", claim("cuda-two-gpus", 2))]
    if migs:
        # One MIG device by CEL on the slice's profile attribute: 1g.5gb where there is
        # one, else a profile of whole compute slices (3g.20gb, not 1c.2g.10gb).
        profiles = sorted({devs[d]["profile"] for d in migs})
        prof = "1g.5gb" if "1g.5gb" in profiles else next(
            (p for p in profiles if re.match(r"^\d+g\.\d+gb$", p)), profiles[0])
        c = claim("cuda-mig", 1, f"device.attributes['{DRIVER}'].profile == '{prof}'")
        c["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "mig.nvidia.com"
        claims.append(("cuda-mig", "mig", c))
    else:
        print(f"  the profile {os.path.basename(h.A.profile)} has no MIG device: no MIG claim "
              "(GDP_E2E_PROFILE=sim/profiles/a100-mig-mixed.yaml has some)")
    names = [p for p, _, _ in claims]
    undo.callback(cleanup("delete", "resourceclaim", *[c["metadata"]["name"] for _, _, c in claims],
                          "--ignore-not-found", "--wait=true"))
    undo.callback(cleanup(pods=names))
    # One pod at a time, each deleted (its claim unprepared, its spec gone) before the next.
    for pname, what, c in claims:
        cname = c["metadata"]["name"]
        h.kubectl("apply", "-f", "-", stdin=json.dumps(c))
        pod = cuda_pod(pname, claim_name=cname)
        pod["metadata"]["labels"] = {"gdp-e2e": "dra-cuda"}
        count = c["spec"]["devices"]["requests"][0]["exactly"]["count"]
        print(f"  --- claim {cname} ({what}), pod {pname}")
        got, hooks = run_cuda_pod(n, pod)
        uid, held = allocated(cname, count)
        print(f"  claim {cname}: {', '.join(held)} "
              f"({', '.join(devs[d]['uuid'] for d in held)})")
        expect_devices(pname, got, hooks, [seen(d) for d in held])
        spec = cdi_spec(uid)
        show_driver_edits(spec, n)
        h.kubectl("delete", "pod", pname, "--wait=true")
        h.wait(f"{spec} removed after {pname} was deleted", lambda: not os.path.exists(spec))
        h.kubectl("delete", "resourceclaim", cname, "--wait=true")
        print(f"  {pname}: exactly {', '.join(held)}, memalloc ok; the four hooks ran; "
              f"pod deleted, {os.path.basename(spec)} removed")


def s_cdi_cri(ctx):
    kubelet, _, w = runtime_versions()
    if kubelet is None or kubelet < (1, 28):
        raise h.Skip(f"skipped: the kubelet passes device plugins' CDI devices through the CRI "
                     f"from 1.28 on ({w})")
    _, words = need_cdi_runtime()
    git_version, _ = server_version()
    with contextlib.ExitStack() as undo:
        try:
            _cdi_cri(ctx, git_version, words, undo)
        except (h.Fail, subprocess.TimeoutExpired):
            for args in (("get", "pods", "-o", "wide"), ("describe", "pod", "cdi-cri")):
                print(f"$ kubectl {' '.join(args)}")
                print(h.kubectl(*args, check=False))
            raise


def checkpoint_devices(pod_uid):
    """The device IDs and the CDI names the kubelet recorded for the pod's nvidia.com/gpu
    (its device manager checkpoint: what Allocate answered)."""
    with open("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint") as f:
        data = json.load(f)["Data"]
    ids, cdi = [], []
    for e in data.get("PodDeviceEntries") or []:
        if e["PodUID"] == pod_uid and e["ResourceName"] == h.RES:
            per_numa = e["DeviceIDs"]
            ids += [i for v in (per_numa.values() if isinstance(per_numa, dict) else [per_numa]) for i in v]
            resp = base64.b64decode(e.get("AllocResp") or "")
            cdi += [m.decode() for m in re.findall(rb"k8s\.device-plugin\.nvidia\.com/gpu=[\w.-]+", resp)]
    return sorted(set(ids)), cdi


def _cdi_cri(ctx, git_version, words, undo):
    cuda_image(ctx)
    n = node_driver(undo)
    # The chart's MIG strategy (none): every GPU is an nvidia.com/gpu, one in MIG mode too
    # (mixed refuses a profile with compute-instance slices, such as a100-mig-mixed's
    # 1c.2g.10gb, as NVIDIA's plugin does).
    values = h.chart_values(QUIET, deviceListStrategy="cdi-cri")
    chart, plug = replace_plugin(ctx, "cdi-cri", driver_chart(n, values, git_version, api=False))
    undo.callback(cleanup("delete", "-f", chart, "--ignore-not-found", "--wait=true"))
    gpus = profile_gpus()
    print(f"  plugin pod {plug['metadata']['name']} Running: deviceListStrategy cdi-cri, "
          f"nvidiaDriverRoot {n['driver-root']}, cdi.nvidiaHookPath {n['hook']}; "
          f"{git_version}, {words}")
    h.wait_node_gpus(len(gpus), len(gpus))
    h.show_node_gpus()
    undo.callback(cleanup(pods=["cdi-cri"]))
    pod = cuda_pod("cdi-cri", gpus=1)
    got, hooks = run_cuda_pod(n, pod)
    uid = h.kjson("get", "pod", "cdi-cri")["metadata"]["uid"]
    ids, cdi = checkpoint_devices(uid)
    print(f"  the kubelet's checkpoint: cdi-cri was allocated {ids}, CDI devices {cdi}")
    if len(ids) != 1 or ids[0] not in gpus:
        raise h.Fail(f"allocated {ids}: want one GPU of the profile")
    if cdi != [f"k8s.device-plugin.nvidia.com/gpu={ids[0]}"]:
        raise h.Fail(f"Allocate's CDI devices {cdi}, want the one of {ids[0]}")
    i, gname, mig = gpus[ids[0]]
    if not mig:
        expect_devices("cdi-cri", got, hooks, [(i, gname, ids[0], None)])
    else:
        # A GPU in MIG mode given whole (no MIG device's capability nodes): nvidia-smi lists
        # it and CUDA has no device on it, as with NVIDIA's plugin on a real driver.
        if got["smi"] != (0, [f"GPU 0: {gname} (UUID: {ids[0]})"]) or got["probe"][0] != 1 or \
                not got["probe"][1][-1].startswith("cuda-probe: cuInit: CUDA_ERROR_NO_DEVICE (100)"):
            raise h.Fail(f"cdi-cri: {ids[0]} (MIG mode): cuda-probe {got['probe']}, nvidia-smi -L {got['smi']}")
        if [x.split()[0] for x in hooks] != HOOKS:
            raise h.Fail(f"cdi-cri: hooks {hooks}, want one each of {HOOKS}")
        print(f"  {ids[0]} is in MIG mode: given whole, nvidia-smi lists it and CUDA has no device")
    show_driver_edits(os.path.join(CDI_ROOT, "k8s.device-plugin.nvidia.com-gpu.json"), n)
    h.kubectl("delete", "pod", "cdi-cri", "--wait=true")
    print(f"  cdi-cri: exactly {ids[0]}{'' if mig else ', memalloc ok'}; the four hooks ran")


SCENARIOS = [("dra", s_dra), ("dra-cuda", s_dra_cuda), ("cdi-cri", s_cdi_cri)]
