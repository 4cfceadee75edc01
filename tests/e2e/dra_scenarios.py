"""The e2e scenario of DRA (issue 20, after nvidia_chart_scenarios.py's): our chart with
dra.enabled on a Kubernetes >= 1.34 node (resource.k8s.io/v1), everything asserted through
the API server and the pods. Below 1.34 it raises scenarios.py's Skip: one line, counted
as skipped (not applicable), never as passed. Uses scenarios.py's helpers (it is __main__).

  dra  the chart's DRA mode (health.quietPeriod 15s, the simulated node's device nodes as
       character devices under a dev root passed as NVIDIA_DEV_ROOT): the ResourceSlice of
       pool <node> with one device gpu-<minor> per GPU and NVIDIA's attributes; the
       DeviceClasses; a pod with a claim for one GPU and one with a claim for two GPUs
       selected by CEL on productName Running, their claims allocated to our devices, and
       `ls /dev` in each shows exactly the claimed GPUs' nodes (CDI); an Xid withdraws the
       device from the slice (no DRADeviceTaints gate; with it, cluster.sh's
       GDP_E2E_FEATURE_GATES, taints it) and recovery restores it (with ResourceHealthStatus
       on, an Xid on the GPU of a claim held by a pod shows in the pod's
       status, then clears); a kubelet
       restart and a plugin pod restart keep the slice and the pods (a new claim is
       prepared by the new plugin pod); deleting a pod removes its claim's CDI spec."""

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
    sys.path.insert(0, os.path.join(h.A.source, "tests", "deploy"))
    import deploylib  # noqa: E402
    values = h.chart_values(QUIET, dra={"enabled": True},
                            devicePlugin={"enabled": True, "enableHostNetwork": True})
    major, minor = git_version.lstrip("v").split(".")[:2]
    files, _ = deploylib.render(h.A.helm_render, values, cluster={"Capabilities": {
        "KubeVersion": {"Version": git_version, "Major": major, "Minor": minor}}})
    docs = [d for name in sorted(files) for d in files[name]]
    for d in docs:
        if d["kind"] != "DaemonSet":
            continue
        pod = d["spec"]["template"]["spec"]
        pod.setdefault("volumes", []).append({"name": "e2e-dev-root", "hostPath": {
            "path": dev_root, "type": "Directory"}})
        for c in pod["containers"]:
            if c["name"] == "gpu-device-plugin-ctr":
                c["env"] += [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                             {"name": "KUBERNETES_SERVICE_PORT", "value": "16443"},
                             {"name": "NVIDIA_DEV_ROOT", "value": dev_root}]
                c.setdefault("volumeMounts", []).append({"name": "e2e-dev-root", "mountPath": dev_root,
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


def gates():
    """The feature gates cluster.sh gave every component (GDP_E2E_FEATURE_GATES)."""
    pairs = [g.split("=", 1) for g in os.environ.get("GDP_E2E_FEATURE_GATES", "").split(",") if "=" in g]
    return {k: v.lower() == "true" for k, v in pairs}


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


def s_dra(ctx):
    git_version, version = server_version()
    served = subprocess.run([h.A.kubectl, "--kubeconfig", h.A.kubeconfig, "get", "--raw",
                             "/apis/resource.k8s.io/v1"], capture_output=True).returncode == 0
    if not served or version is None or version < (1, 34):
        if served or (version or (1, 0)) >= (1, 34):  # one without the other: say so, fail
            raise h.Fail(f"server {git_version!r}, resource.k8s.io/v1 served: {served}")
        raise h.Skip(f"skipped: Kubernetes < 1.34 has no resource.k8s.io/v1 (server {git_version})")
    with contextlib.ExitStack() as undo:
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
    undo.callback(lambda: h.kubectl("delete", "resourceslices", "--field-selector",
                                    f"spec.driver={DRIVER}", "--ignore-not-found", check=False))
    undo.callback(lambda: h.kubectl("delete", "-f", chart, "--ignore-not-found", "--wait=true",
                                    check=False))
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
    undo.callback(lambda: h.kubectl("delete", "resourceclaim", "one-gpu", "two-gpus", "three",
                                    "--ignore-not-found", "--wait=true", check=False))
    undo.callback(lambda: h.kubectl("delete", "pod", *pods, "dra-three", "--ignore-not-found",
                                    "--wait=true", check=False))
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

    # Health: the API server drops taints without DRADeviceTaints, so an Xid withdraws; with
    # the gate on (GDP_E2E_FEATURE_GATES) the device is tainted. With ResourceHealthStatus
    # on, an Xid on a held GPU shows in its pod's status.
    g = gates()
    free = next(u for u, n in by_uuid.items() if n not in claimed)
    xid_cycle(by_uuid[free], free, names, taints_kept=g.get("DRADeviceTaints", False))
    if g.get("ResourceHealthStatus"):
        # Which claims the kubelet reports on depends on its version: 1.34 matches the
        # container's claim name against the ResourceClaim's own name (so the pod names
        # its claim "health", as the object is named); later kubelets look the claim up in
        # status.resourceClaimStatuses, which lists only claims made from a template.
        undo.callback(lambda: h.kubectl("delete", "resourceclaimtemplate,resourceclaim", "health",
                                        "--ignore-not-found", check=False))
        undo.callback(lambda: h.kubectl("delete", "pod", "dra-health", "--ignore-not-found", "--wait=true",
                                        check=False))
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
                  taints_kept=g.get("DRADeviceTaints", False), pod="dra-health", claim_uid=uid)
        h.kubectl("delete", "pod", "dra-health", "--wait=true")
        h.kubectl("delete", "resourceclaimtemplate,resourceclaim", "health", "--ignore-not-found",
                  "--wait=true")
        h.wait(f"claim {made} gone", lambda: not h.kjson(
            "get", "resourceclaims", "--field-selector", f"metadata.name={made}")["items"])

    # A kubelet restart: the kubelet wipes the node's slices; they come back, pods untouched.
    before = h.containers_state(pods)
    plug = h.wait_one_plugin_pod()
    ids = slice_ids()
    r = subprocess.run(["sh", h.A.cluster, "kubelet-restart"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise h.Fail(f"kubelet restart: {r.stderr.strip()}")
    h.wait("node Ready after the kubelet restart", lambda: [
        c for c in h.kjson("get", "node", h.NODE)["status"]["conditions"]
        if c["type"] == "Ready" and c["status"] == "True"])
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


SCENARIOS = [("dra", s_dra)]
