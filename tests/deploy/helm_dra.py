"""The Helm chart's DRA mode (issue 20 item 7): the DaemonSet's env and mounts, the RBAC
rules, NVIDIA's DeviceClasses compared with the objects a 1.34 API server stored, and
each refusal: a Kubernetes below 1.34, GPU lists that would serve one GPU through both
APIs, another NVIDIA device plugin DaemonSet in the cluster (Helm's lookup)."""

import copy
import json
import os

import re

import deploylib as d
from helmlib import daemonset, downward, env_of, mounts_of, plugin_accepts, plugin_ctr, rbac_rules

DATA = os.environ.get("GDP_TEST_DATA") or os.path.join(d.SOURCE, "tests", "data")
DP_DIR = "/var/lib/kubelet/device-plugins"
DRA_ENV = ("GDP_DRA", "KUBELET_PLUGINS_DIRECTORY_PATH", "KUBELET_REGISTRAR_DIRECTORY_PATH",
           "CDI_ROOT", "GDP_DRA_DEVICE_PLUGIN_GPUS")
DRA_RULES = {("", "nodes"): ["get", "list", "watch"],
             ("resource.k8s.io", "resourceslices"): ["list", "watch", "create", "update",
                                                     "delete"],
             ("resource.k8s.io", "resourceclaims"): ["get"],
             ("", "events"): ["create", "patch"]}
ON = {"dra": {"enabled": True}}


VERB_OF = {"KUBE_GET": "get", "KUBE_POST": "create", "KUBE_PUT": "update",
           "KUBE_DELETE": "delete", "KUBE_PATCH_MERGE": "patch", "KUBE_PATCH_STRATEGIC": "patch",
           "KUBE_PATCH_JSON": "patch"}


def slice_verbs_of_code():
    """The verbs the plugin's requests on ResourceSlices need, read from src/dra/: each
    kube_request whose path is SLICES_PATH (or a path made from it in the 15 lines before), and
    a kube_watch_start on it (list, then watch). RBAC grants these and nothing more."""
    verbs = set()
    src = os.path.join(d.SOURCE, "src", "dra")
    for name in sorted(os.listdir(src)):
        if not name.endswith(".c"):
            continue
        with open(os.path.join(src, name), encoding="utf-8") as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines):
            m = re.search(r"kube_request\([^,]+, (KUBE_\w+), (\w+)", line)
            if m and (m.group(2) == "SLICES_PATH" or
                      (m.group(2) == "path" and
                       any("xasprintf(SLICES_PATH" in l for l in lines[max(0, i - 15):i]))):
                verbs.add(VERB_OF[m.group(1)])
            if re.search(r"kube_watch_start(_opt)?\([^,]+, SLICES_PATH", line):
                verbs.update(("list", "watch"))
    return verbs


def static_checks(values):
    code = slice_verbs_of_code()
    d.check(code == {"list", "watch", "create", "update", "delete"},
            f"the plugin's ResourceSlice requests changed: {sorted(code)}; update DRA_RULES")
    d.check(set(DRA_RULES[("resource.k8s.io", "resourceslices")]) == code,
            f"DRA RBAC on resourceslices {DRA_RULES[('resource.k8s.io', 'resourceslices')]}, "
            f"the code's requests need {sorted(code)}")
    """values.yaml: DRA off, NVIDIA's directories and CDI root, the classes on."""
    d.check(values.get("dra") == {
        "enabled": False, "devicePluginGpus": [], "kubeletPluginsDir": "/var/lib/kubelet/plugins",
        "kubeletRegistrarDir": "/var/lib/kubelet/plugins_registry", "cdiRoot": "/var/run/cdi",
        "featureGates": {}, "deviceClasses": {"enabled": True}, "extendedResourceName": None,
        "consumableCapacity": {"enabled": False, "memoryStep": "1Gi", "memoryDefault": "0",
                               "computeDefault": 10},
        "mps": {"enabled": True, "resources": {}}}, f"dra defaults {values.get('dra')}")
    d.check(values.get("gpuResourcesEnabledOverride") is False, "gpuResourcesEnabledOverride defaults to false")


def captured(name):
    with open(os.path.join(DATA, "dra", "objects", name)) as f:
        return json.load(f)


def refused(render, vals, msg, **kw):
    what = f"{vals} {str(kw)[:160]}"
    try:
        render(vals, **kw)
        d.check(False, f"{what}: rendered, want an error mentioning {msg!r}")
    except d.RenderError as e:
        d.check(msg in str(e), f"{what}: error {str(e)[-600:]} does not mention {msg!r}")


def host_mount(pod, ctr, path):
    """(hostPath volume, readOnly) mounted at path, or ({}, None)."""
    vol, ro = mounts_of(pod, ctr).get(path, ({}, None))
    return vol.get("hostPath", {}), ro


def off_checks(render):
    files, notes = render()
    _, pod = daemonset(files)
    ctr = plugin_ctr(pod)
    env = env_of(ctr)
    d.check(not any(k in env for k in DRA_ENV), f"no DRA env by default: {env}")
    d.check(not files["deviceclasses.yml"], "no DeviceClasses by default")
    d.check(set(mounts_of(pod, ctr)) == {DP_DIR, "/dev/shm", "/mps", "/var/run/cdi"},
            f"default mounts {sorted(mounts_of(pod, ctr))}")
    d.check("DRA" not in notes, "NOTES say nothing of DRA by default")
    # Without DRA a GPU list, the version and other device plugins do not matter.
    render({"dra": {"devicePluginGpus": ["all"]}},
           cluster={"Capabilities": kube("v1.20.15"), "Lookup": daemonsets(operator_plugin())})


def on_checks(render, env_names):
    files, notes = render(ON)
    _, pod = daemonset(files)
    ctr = plugin_ctr(pod)
    env = env_of(ctr)
    want = {"GDP_DRA": "true", "KUBELET_PLUGINS_DIRECTORY_PATH": "/var/lib/kubelet/plugins",
            "KUBELET_REGISTRAR_DIRECTORY_PATH": "/var/lib/kubelet/plugins_registry",
            "CDI_ROOT": "/var/run/cdi"}
    d.check({k: env.get(k) for k in DRA_ENV} == dict(want, GDP_DRA_DEVICE_PLUGIN_GPUS=None),
            f"DRA env {env}")
    d.check(downward(ctr) == {"NODE_NAME": "spec.nodeName", "NAMESPACE": "metadata.namespace",
                              "POD_NAME": "metadata.name"}, f"DRA: node name from the downward API: {env}")
    for k in env:
        d.check(k in env_names or k in d.RUNTIME_ENV, f"rendered env {k} is not understood by the plugin")
    m = mounts_of(pod, ctr)
    d.check(set(m) == {DP_DIR, "/dev/shm", "/mps", "/var/run/cdi", "/var/lib/kubelet/plugins",
                       "/var/lib/kubelet/plugins_registry"}, f"DRA mounts {sorted(m)}")
    for path, kind in (("/var/lib/kubelet/plugins", "DirectoryOrCreate"),
                       ("/var/lib/kubelet/plugins_registry", "Directory"), (DP_DIR, "Directory"),
                       ("/var/run/cdi", "DirectoryOrCreate")):
        hp, ro = host_mount(pod, ctr, path)
        d.check(hp == {"path": path, "type": kind} and not ro,
                f"{path}: the host's, same path, {kind}, writable: {hp} ro={ro}")
    d.check(ctr["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            f"DRA adds no privilege: {ctr['securityContext']}")
    rules = rbac_rules(files)
    d.check(rules == DRA_RULES, f"DRA RBAC {rules}")
    d.check(pod.get("serviceAccountName") == f"{files['rbac.yml'][0]['metadata']['name']}",
            "the pod runs as the chart's ServiceAccount")
    got = plugin_accepts(env).get("extensions", {}).get("dra")
    d.check(got == {"enabled": True, "registrarDir": "/var/lib/kubelet/plugins_registry",
                    "pluginsDir": "/var/lib/kubelet/plugins", "cdiRoot": "/var/run/cdi",
                    "devicePluginGpus": [], "featureGates": {"DynamicMIG": False},
                    "consumableCapacity": False, "shareMemoryStep": "1024Mi",
                    "shareMemoryDefault": "0", "shareComputeDefault": 10},
            f"plugin's DRA settings from the rendered env: {got}")
    # GPU shares: the chart's values reach the plugin, which accepts them
    files, _ = render({"dra": {"enabled": True, "consumableCapacity": {
        "enabled": True, "memoryStep": "512Mi", "memoryDefault": "8Gi", "computeDefault": 25}}})
    got = plugin_accepts(env_of(plugin_ctr(daemonset(files)[1]))).get("extensions", {}).get("dra")
    d.check({k: got.get(k) for k in ("consumableCapacity", "shareMemoryStep", "shareMemoryDefault",
                                     "shareComputeDefault")} ==
            {"consumableCapacity": True, "shareMemoryStep": "512Mi", "shareMemoryDefault": "8192Mi",
             "shareComputeDefault": 25}, f"GPU shares from the chart: {got}")
    d.check("driver gpu.nvidia.com" in notes and "all of them through DRA" in notes
            and "kubectl get deviceclasses gpu.nvidia.com mig.nvidia.com" in notes, f"NOTES: {notes}")

    # NVIDIA's classes, selectors exactly as a 1.34 API server stored NVIDIA's gpu.nvidia.com.
    classes = {o["metadata"]["name"]: o for o in files["deviceclasses.yml"]}
    d.check(sorted(classes) == ["gpu.nvidia.com", "mig.nvidia.com"], f"DeviceClasses {sorted(classes)}")
    gpu = captured("deviceclass-gpu.json")
    mig_spec = json.loads(json.dumps(gpu["spec"]).replace("type == 'gpu'", "type == 'mig'"))
    for name, spec in (("gpu.nvidia.com", gpu["spec"]), ("mig.nvidia.com", mig_spec)):
        o = classes.get(name, {})
        d.check(o.get("apiVersion") == gpu["apiVersion"] and o.get("kind") == gpu["kind"]
                and o.get("spec") == spec, f"DeviceClass {name}: {o.get('spec')}, want {spec}")
        d.check(o.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/instance") == "gdp",
                f"{name} labelled as the release's")
    d.check(mig_spec != gpu["spec"], "the mig selector differs from the gpu one")

    # Every setting, with NVIDIA's names where they exist.
    vals = {"dra": {"enabled": True, "devicePluginGpus": [0, "GPU-2fa81118-5a5f-aa66-7660-471eed407181"],
                    "kubeletPluginsDir": "/data/kubelet/plugins",
                    "kubeletRegistrarDir": "/data/kubelet/plugins_registry", "cdiRoot": "/etc/cdi",
                    "extendedResourceName": "nvidia.com/gpu"}}
    files, notes = render(vals)
    _, pod = daemonset(files)
    ctr = plugin_ctr(pod)
    env = env_of(ctr)
    d.check({k: env.get(k) for k in DRA_ENV} == {
        "GDP_DRA": "true", "KUBELET_PLUGINS_DIRECTORY_PATH": "/data/kubelet/plugins",
        "KUBELET_REGISTRAR_DIRECTORY_PATH": "/data/kubelet/plugins_registry", "CDI_ROOT": "/etc/cdi",
        "GDP_DRA_DEVICE_PLUGIN_GPUS": "0,GPU-2fa81118-5a5f-aa66-7660-471eed407181"}, f"DRA env {env}")
    for path, kind in (("/data/kubelet/plugins", "DirectoryOrCreate"),
                       ("/data/kubelet/plugins_registry", "Directory"), ("/etc/cdi", "DirectoryOrCreate"),
                       ("/var/run/cdi", "DirectoryOrCreate"), (DP_DIR, "Directory")):
        hp, _ = host_mount(pod, ctr, path)
        d.check(hp == {"path": path, "type": kind}, f"{path} mounted from the host: {hp}")
    got = plugin_accepts(env).get("extensions", {}).get("dra", {})
    d.check(got.get("devicePluginGpus") == ["0", "GPU-2fa81118-5a5f-aa66-7660-471eed407181"]
            and got.get("cdiRoot") == "/etc/cdi", f"plugin's DRA settings: {got}")
    d.check("GPUs 0,GPU-2fa81118-5a5f-aa66-7660-471eed407181 as nvidia.com/gpu" in notes, f"NOTES {notes}")
    classes = {o["metadata"]["name"]: o for o in files["deviceclasses.yml"]}
    extres = captured("deviceclass-extended-resource.json")
    d.check(classes["gpu.nvidia.com"]["spec"] == extres["spec"],
            f"extendedResourceName as 1.34 stores it: {classes['gpu.nvidia.com']['spec']}")
    d.check(captured("deviceclass-extended-resource-default-gates.json")["spec"] == gpu["spec"],
            "without DRAExtendedResource 1.34 drops the field (the values comment says so)")
    d.check("extendedResourceName" not in classes["mig.nvidia.com"]["spec"], "mig class: no extended resource")

    # DRA alone (devicePlugin.enabled=false): the same DaemonSet and RBAC; no classes on request.
    files, _ = render({"dra": {"enabled": True, "deviceClasses": {"enabled": False}},
                       "devicePlugin": {"enabled": False}})
    d.check(len(files["daemonset.yml"]) == 1 and rbac_rules(files) == DRA_RULES
            and not files["deviceclasses.yml"], "dra.enabled without the device plugin")
    # With per-node config and GFD the node rule merges (rbac_rules refuses a resource twice).
    files, _ = render({"dra": {"enabled": True}, "gfd": {"enabled": True, "nodeLabelsPatch": True}})
    rules = rbac_rules(files)
    d.check(rules == {**DRA_RULES, ("", "nodes"): ["get", "list", "watch", "patch"]},
            f"DRA with nodeLabelsPatch: {rules}")


def mps_checks(render):
    """DRA's MPS claims: the mps-control-daemon DaemonSet (docs/dra.md "MPS sharing"), with
    DRA only, apart from the plugin's pod, given the plugins directory (Bidirectional, for
    each daemon's shm tmpfs) and GDP_DRA; no RBAC of its own; off with dra.mps.enabled."""
    files, _ = render()
    d.check(not files.get("mps-control-daemon.yml"), "no MPS DaemonSet without DRA")
    files, _ = render(ON)
    docs = files.get("mps-control-daemon.yml") or []
    if not d.check(len(docs) == 1, f"DRA: one MPS DaemonSet, got {len(docs)}"):
        return
    (ds,) = docs
    _, plugin_pod = daemonset(files)
    pod = ds["spec"]["template"]["spec"]
    sel, labels = ds["spec"]["selector"]["matchLabels"], ds["spec"]["template"]["metadata"]["labels"]
    d.check(ds["kind"] == "DaemonSet" and ds["metadata"]["name"].endswith("-mps-control-daemon"),
            f"{ds['kind']} {ds['metadata']['name']}")
    d.check(all(labels.get(k) == v for k, v in sel.items()), f"selector {sel} vs labels {labels}")
    plugin_sel = daemonset(files)[0]["spec"]["selector"]["matchLabels"]
    d.check(not all(labels.get(k) == v for k, v in plugin_sel.items()),
            f"the plugin's DaemonSet ({plugin_sel}) must not select the MPS pods ({labels})")
    (ctr,) = pod["containers"]
    d.check(ctr["command"] == ["mps-control-daemon"], f"command {ctr['command']}")
    env = env_of(ctr)
    d.check(env.get("GDP_DRA") == "true" and
            env.get("KUBELET_PLUGINS_DIRECTORY_PATH") == "/var/lib/kubelet/plugins", f"MPS env {env}")
    got = plugin_accepts(env).get("extensions", {}).get("dra", {})
    d.check(got.get("enabled") is True and got.get("pluginsDir") == "/var/lib/kubelet/plugins",
            f"the binary reads the MPS DaemonSet's env as DRA with its plugins dir: {got}")
    d.check(ctr["securityContext"] == {"privileged": True}, f"MPS: privileged {ctr['securityContext']}")
    (m,) = [m for m in ctr["volumeMounts"] if m["mountPath"] == "/var/lib/kubelet/plugins"]
    d.check(m.get("mountPropagation") == "Bidirectional", f"the shm tmpfs reaches the host: {m}")
    hp, _ = host_mount(pod, ctr, "/var/lib/kubelet/plugins")
    d.check(hp == {"path": "/var/lib/kubelet/plugins", "type": "DirectoryOrCreate"}, f"hostPath {hp}")
    d.check("serviceAccountName" not in pod, "the MPS pods talk to no API server: no ServiceAccount")
    d.check(pod.get("hostPID") is True, "hostPID as NVIDIA's MPS daemon (mps.enableHostPID)")
    d.check(rbac_rules(files) == DRA_RULES, "no RBAC beyond the plugin's")
    # the plugin's own pod is unchanged by it: no privilege, no propagation
    d.check(not any(mm.get("mountPropagation") for c in plugin_pod["containers"]
                    for mm in c.get("volumeMounts", [])), "the plugin's pod propagates no mount")
    files, _ = render({"dra": {"enabled": True, "kubeletPluginsDir": "/data/kubelet/plugins"}})
    (ds,) = files["mps-control-daemon.yml"]
    pod = ds["spec"]["template"]["spec"]
    (ctr,) = pod["containers"]
    d.check(env_of(ctr).get("KUBELET_PLUGINS_DIRECTORY_PATH") == "/data/kubelet/plugins" and
            host_mount(pod, ctr, "/data/kubelet/plugins")[0].get("path") == "/data/kubelet/plugins",
            "MPS: the plugins directory follows dra.kubeletPluginsDir")
    files, _ = render({"dra": {"enabled": True, "mps": {"enabled": False}}})
    d.check(not files.get("mps-control-daemon.yml"), "dra.mps.enabled=false: no MPS DaemonSet")


def kube(version):
    major, minor = version.lstrip("v").split(".")[:2]
    return {"KubeVersion": {"Version": version, "Major": major, "Minor": minor}}


def daemonsets(*items):
    return {"apps/v1/DaemonSet//": {"apiVersion": "v1", "kind": "List", "items": list(items)}}


def operator_plugin():
    """The GPU Operator's device-plugin DaemonSet (tests/data/gpu-operator)."""
    (ds,) = [o for o in d.load_all(os.path.join(DATA, "gpu-operator", "device-plugin.yaml"))
             if o["kind"] == "DaemonSet"]
    return ds


def refusal_checks(render):
    for version, ok in (("v1.33.5", False), ("v1.20.15", False), ("v1.34.0", True),
                        ("v1.34.1-gke.1000", True), ("v1.35.0+k3s1", True), ("v2.0.0", True)):
        if ok:
            render(ON, cluster={"Capabilities": kube(version)})
        else:
            refused(render, ON, f"dra.enabled needs Kubernetes >= 1.34 (resource.k8s.io/v1, DRA on by "
                                f"default); the target is {version}", cluster={"Capabilities": kube(version)})
    not_gpu = "is not a GPU index or UUID (GPU-...)"
    for vals, msg in (
            ({"devicePluginGpus": ["all"]}, f'"all" {not_gpu}'),
            ({"devicePluginGpus": ["0,1"]}, f'"0,1" {not_gpu}'),
            ({"devicePluginGpus": ["MIG-0a1b"]}, f'"MIG-0a1b" {not_gpu}'),
            ({"devicePluginGpus": [12345]}, f'"12345" {not_gpu}'),
            ({"devicePluginGpus": "0"}, "dra.devicePluginGpus: 0 is not a list"),
            ({"kubeletPluginsDir": "plugins"}, '"plugins": kubeletPluginsDir, kubeletRegistrarDir and '
                                               'cdiRoot must be absolute paths'),
            ({"cdiRoot": "/"}, "must be absolute paths"),
            ({"cdiRoot": None}, '"": kubeletPluginsDir, kubeletRegistrarDir and cdiRoot must be absolute'),
            ({"kubeletPluginsDir": DP_DIR + "/"}, f"{DP_DIR} named twice"),
            ({"cdiRoot": "/var/lib/kubelet/plugins_registry"}, "/var/lib/kubelet/plugins_registry named twice"),
            ({"extendedResourceName": "gpu"}, 'dra.extendedResourceName: "gpu" is not an extended resource'),
            ({"extendedResourceName": "nvidia.com/gpu", "deviceClasses": {"enabled": False}},
             "dra.extendedResourceName is set on the gpu.nvidia.com DeviceClass")):
        refused(render, {"dra": dict(vals, enabled=True)}, msg)
    refused(render, {"dra": {"enabled": True, "devicePluginGpus": [0]}, "devicePlugin": {"enabled": False}},
            "dra.devicePluginGpus keeps GPUs on the device plugin, but devicePlugin.enabled=false")
    refused(render, {"resources": {"gpus": {"enabled": True}}}, "resources.gpus: NVIDIA's DRA chart's switch "
            "is dra.enabled here")

    # Another NVIDIA device plugin in the cluster (what Helm's lookup answers at install).
    operator = operator_plugin()
    nvidia = copy.deepcopy(operator)
    nvidia["metadata"].update(name="plugin", namespace="nvidia")
    for c in nvidia["spec"]["template"]["spec"]["containers"]:
        c.update(name="ctr", image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0")
    nvidia["spec"]["template"]["spec"].pop("initContainers", None)
    own, _ = render(ON)
    (own_ds,) = own["daemonset.yml"]
    other_release, _ = render(ON, release="second")
    (second,) = other_release["daemonset.yml"]
    sriov = {"metadata": {"name": "sriov-device-plugin", "namespace": "net"}, "spec": {"template": {"spec": {
        "containers": [{"name": "kube-sriovdp", "image": "ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin"}],
        "volumes": [{"name": "dp", "hostPath": {"path": DP_DIR}}]}}}}
    gfd = {"metadata": {"name": "gpu-feature-discovery", "namespace": "nvidia"}, "spec": {"template": {"spec": {
        "containers": [{"name": "gfd", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                        "command": ["gpu-feature-discovery"]}],
        "volumes": [{"name": "sys", "hostPath": {"path": "/sys"}}]}}}}
    bare = {"metadata": {"name": "bare", "namespace": "x"}, "spec": {"template": {"spec": {"containers": []}}}}
    msg = "dra.enabled: another NVIDIA device plugin runs in this cluster (DaemonSet "
    for items, found in (([operator], "gpu-operator/nvidia-device-plugin-daemonset"),
                         ([bare, nvidia, sriov], "nvidia/plugin"),
                         ([second], "kube-system/second-gpu-device-plugin"),
                         ([operator, nvidia], "gpu-operator/nvidia-device-plugin-daemonset, nvidia/plugin")):
        cluster = {"Lookup": daemonsets(*items)}
        refused(render, ON, msg + found + ")", cluster=cluster)
        render(dict(ON, gpuResourcesEnabledOverride=True), cluster=cluster)
        render({}, cluster=cluster)
    # An upgrade sees its own DaemonSet; GFD runs NVIDIA's image without the device-plugin
    # directory; other vendors' plugins mount it under other names.
    render(ON, cluster={"Lookup": daemonsets(own_ds, sriov, gfd, bare)})


def checks(render, env_names):
    off_checks(render)
    on_checks(render, env_names)
    mps_checks(render)
    refusal_checks(render)
