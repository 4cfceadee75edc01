"""Helm chart: templates are balanced, values.yaml has every key of NVIDIA's
chart, and (with helm-render, Go's text/template) the rendered objects carry
the env mapping, mounts, security contexts and config wiring of NVIDIA's
chart, with env values the built plugin accepts.

usage: test_helm.py [helm-render]   (without it only the static checks run)"""

import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as d  # noqa: E402
import helm_dra  # noqa: E402
from helmlib import (daemonset, downward, env_of, mounts_of, plugin_accepts,  # noqa: E402
                     plugin_ctr, rbac_rules)

# Keys of NVIDIA's nvidia-device-plugin values (v0.20.0) a drop-in must accept.
NVIDIA_KEYS = """
config.name config.map config.default config.fallbackStrategies
compatWithCPUManager migStrategy failOnInitError deviceListStrategy deviceIDStrategy
nvidiaDriverRoot nvidiaDevRoot gdrcopyEnabled gdsEnabled mofedEnabled deviceDiscoveryStrategy
nameOverride fullnameOverride namespaceOverride selectorLabelsOverride allowDefaultNamespace
imagePullSecrets image.repository image.pullPolicy image.tag updateStrategy.type
podAnnotations podSecurityContext securityContext resources nodeSelector affinity tolerations
priorityClassName runtimeClassName devicePlugin.enabled gfd.enabled mps.root mps.enableHostPID
cdi.nvidiaHookPath cdi.featureFlags
gfd.nameOverride gfd.namespaceOverride gfd.noTimestamp gfd.sleepInterval gfd.securityContext
noTimestamp sleepInterval
""".split()

# NVIDIA's v0.20.0 values.yaml as a values file (every key it declares, with its default;
# NFD's subchart keys included), for "a values file written for NVIDIA's chart renders".
NVIDIA_VALUES = {
    "config": {"name": "", "map": {}, "default": "", "fallbackStrategies": ["named", "single"]},
    "compatWithCPUManager": None, "migStrategy": None, "failOnInitError": None,
    "deviceListStrategy": None, "deviceIDStrategy": None, "nvidiaDriverRoot": None,
    "gdrcopyEnabled": None, "gdsEnabled": None, "mofedEnabled": None, "deviceDiscoveryStrategy": None,
    "nameOverride": "", "fullnameOverride": "", "namespaceOverride": "", "selectorLabelsOverride": {},
    "allowDefaultNamespace": False, "imagePullSecrets": [],
    "image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "pullPolicy": "IfNotPresent", "tag": ""},
    "updateStrategy": {"type": "RollingUpdate"}, "podAnnotations": {}, "podSecurityContext": {},
    "securityContext": {}, "resources": {}, "nodeSelector": {},
    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "priorityClassName": "system-node-critical", "runtimeClassName": None,
    "devicePlugin": {"enabled": True},
    "gfd": {"enabled": False, "nameOverride": "gpu-feature-discovery", "namespaceOverride": "",
            "noTimestamp": None, "sleepInterval": None, "securityContext": {"privileged": True}},
    "nfd": {"nameOverride": "node-feature-discovery",
            "master": {"serviceAccount": {"name": "node-feature-discovery", "create": True},
                       "config": {"extraLabelNs": ["nvidia.com"]}},
            "worker": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                                        "effect": "NoSchedule"}],
                       "config": {"sources": {"pci": {"deviceClassWhitelist": ["02", "03"],
                                                      "deviceLabelFields": ["vendor"]}}}}},
    "mps": {"root": "/run/nvidia/mps", "enableHostPID": True},
    "cdi": {"nvidiaHookPath": None, "featureFlags": None},
}

OPENERS = ("if", "range", "with", "define", "block")


def check_balanced(path):
    text = open(path).read()
    name = os.path.relpath(path, d.CHART)
    d.check(text.count("{{") == text.count("}}"), f"{name}: unbalanced {{{{ }}}}")
    stack = []
    for m in re.finditer(r"\{\{-?\s*(/\*.*?\*/)?\s*([a-z]*)", text, re.S):
        if m.group(1):
            continue
        word = m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if word in OPENERS:
            stack.append((word, line))
        elif word == "else":
            d.check(stack and stack[-1][0] in ("if", "range", "with"), f"{name}:{line}: else outside if/range/with")
        elif word == "end":
            if d.check(stack, f"{name}:{line}: end without an open block"):
                stack.pop()
    d.check(not stack, f"{name}: blocks never ended: {stack}")


def has_key(values, dotted):
    node = values
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def static_checks():
    for path in sorted(glob.glob(os.path.join(d.CHART, "templates", "*"))):
        check_balanced(path)
    values = d.load_all(os.path.join(d.CHART, "values.yaml"))[0]
    for key in NVIDIA_KEYS:
        d.check(has_key(values, key), f"values.yaml: missing NVIDIA key {key}")
    for key in ("compatWithCPUManager", "migStrategy", "failOnInitError", "deviceListStrategy",
                "deviceIDStrategy", "nvidiaDriverRoot", "nvidiaDevRoot", "gdrcopyEnabled",
                "gdsEnabled", "mofedEnabled", "deviceDiscoveryStrategy"):
        d.check(values.get(key, "") is None, f"values.yaml: {key} must default to null (plugin default)")
    d.check(values["config"]["fallbackStrategies"] == ["named", "single"], "fallbackStrategies default")
    d.check(values["priorityClassName"] == "system-node-critical", "priorityClassName default")
    d.check(values["mps"]["root"] == "/run/nvidia/mps", "mps.root default")
    d.check(values["gfd"]["securityContext"] == {"privileged": True}
            and values["gfd"]["nameOverride"] == "gpu-feature-discovery", "gfd defaults as NVIDIA's")
    for key, want in NVIDIA_VALUES.items():
        if key not in ("image", "resources", "nfd"):  # ours: image, resources; nfd is a subchart's
            d.check(covers(want, values.get(key)), f"values.yaml: {key} default differs from NVIDIA's")
    d.check(covers(NVIDIA_VALUES["image"], dict(values["image"], repository=NVIDIA_VALUES["image"]["repository"])),
            "image defaults but the repository")
    d.check(values["metrics"] == {"enabled": False, "port": 9808, "scrapeAnnotations": True},
            "metrics defaults: off, port 9808")
    d.check(values["image"]["repository"] == d.IMAGE, "image.repository")
    helm_dra.static_checks(values)
    chart = d.load_all(os.path.join(d.CHART, "Chart.yaml"))[0]
    d.check(chart["apiVersion"] == "v2" and chart["name"] == "gpu-device-plugin", "Chart.yaml")


def covers(want, have):
    """have holds every key of want with the same value (maps: recursively)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and covers(v, have[k]) for k, v in want.items())
    return want == have


# ---- rendered checks -------------------------------------------------------

def rendered_checks(renderer, env_names):
    def render(values=None, **kw):
        return d.render(renderer, values, **kw)

    # Defaults: NVIDIA's defaults plus our resources.
    files, notes = render()
    ds, pod = daemonset(files)
    ctr = plugin_ctr(pod)
    env = env_of(ctr)
    d.check(env == {"MPS_ROOT": "/run/nvidia/mps", "NVIDIA_VISIBLE_DEVICES": "all",
                    "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}, f"default env {env}")
    d.check(ctr["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            f"default securityContext {ctr['securityContext']}")
    d.check(ctr["image"] == d.IMAGE + ":v0.1.0", f"default image {ctr['image']}")
    d.check(ctr["command"] == ["gpu-device-plugin"], "command")
    d.check(ctr["resources"]["requests"] == {"cpu": "10m", "memory": "16Mi"}, "resource requests")
    m = mounts_of(pod, ctr)
    d.check(m.get(d.KUBELET_DIR, ({}, 0))[0].get("hostPath", {}).get("path") == d.KUBELET_DIR, "kubelet dir")
    d.check(m.get("/var/run/cdi", ({}, 0))[0].get("hostPath", {}).get("path") == "/var/run/cdi", "cdi dir")
    d.check(m.get("/mps", ({}, 0))[0].get("hostPath", {}).get("path") == "/run/nvidia/mps", "mps root")
    d.check(m.get("/dev/shm", ({}, 0))[0].get("hostPath", {}).get("path") == "/run/nvidia/mps/shm", "mps shm")
    d.check("/driver-root" not in m and "/config" not in m, "no driver root or config by default")
    d.check(pod["priorityClassName"] == "system-node-critical", "priorityClassName")
    d.check({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"],
            "toleration")
    d.check("nodeAffinity" in pod.get("affinity", {}), "NFD node affinity")
    d.check(not files["configmap.yml"] and not files["rbac.yml"], "no ConfigMap/RBAC by default")
    d.check("ports" not in ctr and "livenessProbe" not in ctr and "readinessProbe" not in ctr
            and "GDP_METRICS_ADDRESS" not in env, "no metrics, port or probes by default")
    d.check(not any(k.startswith("prometheus.io/")
                    for k in ds["spec"]["template"]["metadata"].get("annotations", {})),
            "no scrape annotations by default")
    d.check("serviceAccountName" not in pod and "initContainers" not in pod, "no config-manager by default")
    d.check(ds["metadata"]["namespace"] == "kube-system", "release namespace")
    d.check("kube-system" in notes, "NOTES rendered")

    # Every mapped value -> its env var, as NVIDIA's chart maps them.
    values = {"migStrategy": "single", "failOnInitError": False, "compatWithCPUManager": True,
              "deviceListStrategy": "envvar,cdi-cri", "deviceIDStrategy": "index",
              "nvidiaDriverRoot": "/run/nvidia/driver", "nvidiaDevRoot": "/",
              "gdrcopyEnabled": True, "gdsEnabled": False, "mofedEnabled": True,
              "deviceDiscoveryStrategy": "nvml",
              "cdi": {"nvidiaHookPath": "/usr/local/bin/nvidia-cdi-hook", "featureFlags": ["a", "b"]},
              "logVerbosity": 0, "logFormat": "json", "runtimeClassName": "nvidia",
              "image": {"tag": "v9.9.9"}, "podAnnotations": {"a": "b"}}
    files, _ = render(values)
    ds, pod = daemonset(files)
    ctr = plugin_ctr(pod)
    env = env_of(ctr)
    want = {"MIG_STRATEGY": "single", "FAIL_ON_INIT_ERROR": "false", "PASS_DEVICE_SPECS": "true",
            "DEVICE_LIST_STRATEGY": "envvar,cdi-cri", "DEVICE_ID_STRATEGY": "index",
            "NVIDIA_DRIVER_ROOT": "/run/nvidia/driver", "NVIDIA_DEV_ROOT": "/",
            "GDRCOPY_ENABLED": "true", "GDS_ENABLED": "false", "MOFED_ENABLED": "true",
            "DEVICE_DISCOVERY_STRATEGY": "nvml", "NVIDIA_CDI_HOOK_PATH": "/usr/local/bin/nvidia-cdi-hook",
            "CDI_FEATURE_FLAGS": "a,b", "GDP_LOG_VERBOSITY": "0", "GDP_LOG_FORMAT": "json",
            "NVIDIA_MIG_MONITOR_DEVICES": "all", "MPS_ROOT": "/run/nvidia/mps"}
    for k, v in want.items():
        d.check(env.get(k) == v, f"mapped env {k}={env.get(k)!r}, want {v!r}")
    for k in env:
        d.check(k in env_names or k in d.RUNTIME_ENV, f"rendered env {k} is not understood by the plugin")
    d.check(ctr["securityContext"] == {"privileged": True}, "compatWithCPUManager -> privileged")
    drv = mounts_of(pod, ctr).get("/driver-root")
    d.check(drv and drv[1] and drv[0]["hostPath"]["path"] == "/run/nvidia/driver", "driver root mounted ro")
    d.check(pod.get("runtimeClassName") == "nvidia", "runtimeClassName")
    d.check(ctr["image"].endswith(":v9.9.9"), "image.tag")
    d.check(ds["spec"]["template"]["metadata"].get("annotations") == {"a": "b"}, "podAnnotations")
    cfg = plugin_accepts(env)
    fl = cfg.get("flags", {})
    d.check(fl.get("migStrategy") == "single" and fl.get("failOnInitError") is False
            and fl.get("plugin", {}).get("deviceIDStrategy") == "index"
            and fl.get("plugin", {}).get("passDeviceSpecs") is True
            and fl.get("nvidiaDriverRoot") == "/run/nvidia/driver",
            f"plugin saw the mapped env: {fl}")

    # Metrics: the env var, a named port, the probes on it and the scrape annotations.
    for vals, port in (({"metrics": {"enabled": True}}, 9808),
                       ({"metrics": {"enabled": True, "port": 9500}, "podAnnotations": {"a": "b"}},
                        9500)):
        ds, pod = daemonset(render(vals)[0])
        ctr = plugin_ctr(pod)
        env = env_of(ctr)
        d.check(env.get("GDP_METRICS_ADDRESS") == f":{port}", f"GDP_METRICS_ADDRESS for {vals}: {env}")
        d.check(ctr.get("ports") == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}],
                f"ports for {vals}: {ctr.get('ports')}")
        d.check(ctr.get("livenessProbe", {}).get("httpGet") == {"path": "/healthz", "port": "metrics"},
                f"livenessProbe {ctr.get('livenessProbe')}")
        d.check(ctr.get("readinessProbe", {}).get("httpGet") == {"path": "/readyz", "port": "metrics"},
                f"readinessProbe {ctr.get('readinessProbe')}")
        ann = ds["spec"]["template"]["metadata"].get("annotations", {})
        want_ann = {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
                    "prometheus.io/path": "/metrics"}
        d.check(all(ann.get(k) == v for k, v in want_ann.items()), f"scrape annotations {ann}")
        d.check(ann.get("a") == vals.get("podAnnotations", {}).get("a"), f"podAnnotations kept: {ann}")
        got = plugin_accepts(env)
        d.check(got.get("extensions", {}).get("metricsAddress") == f":{port}",
                f"plugin reads GDP_METRICS_ADDRESS: {got.get('extensions')}")
    ds, _ = daemonset(render({"metrics": {"enabled": True, "scrapeAnnotations": False}})[0])
    d.check(not any(k.startswith("prometheus.io/")
                    for k in ds["spec"]["template"]["metadata"].get("annotations", {}) or {}),
            "scrapeAnnotations=false")

    # Security context rules.
    for vals, want_sc in (
            ({"migStrategy": "mixed"}, {"capabilities": {"add": ["SYS_ADMIN"]}}),
            ({"migStrategy": "none"}, {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}),
            ({"deviceListStrategy": ["envvar", "volume-mounts"]}, {"capabilities": {"add": ["SYS_ADMIN"]}}),
            ({"securityContext": {"runAsUser": 0}, "compatWithCPUManager": True}, {"runAsUser": 0})):
        _, pod = daemonset(render(vals)[0])
        sc = plugin_ctr(pod)["securityContext"]
        d.check(sc == want_sc, f"securityContext for {vals}: {sc}, want {want_sc}")
        mig = env_of(plugin_ctr(pod)).get("NVIDIA_MIG_MONITOR_DEVICES")
        d.check((mig == "all") == (vals.get("migStrategy") == "mixed"), f"MIG monitor env for {vals}")

    # configSelection static: one config for every node at /config/config.yaml.
    cfg_default = "version: v1\nflags:\n  migStrategy: none\n  plugin:\n    deviceIDStrategy: index\n"
    cfg_mig = "version: v1\nflags:\n  migStrategy: mixed\n"
    for vals, key in (({"config": {"map": {"default": cfg_default, "mig": cfg_mig}}}, "default"),
                      ({"config": {"map": {"default": cfg_default, "mig": cfg_mig}, "default": "mig"}}, "mig"),
                      ({"config": {"map": {"only": cfg_default}}}, "only")):
        vals = dict(vals, configSelection="static")
        files, _ = render(vals)
        ds, pod = daemonset(files)
        ctr = plugin_ctr(pod)
        (cm,) = files["configmap.yml"]
        d.check(cm["kind"] == "ConfigMap" and cm["data"] == vals["config"]["map"], f"ConfigMap data for {vals}")
        vol, ro = mounts_of(pod, ctr).get("/config", ({}, 0))
        items = vol.get("configMap", {}).get("items")
        d.check(vol.get("configMap", {}).get("name") == cm["metadata"]["name"]
                and items == [{"key": key, "path": "config.yaml"}], f"config volume {vol}, want key {key}")
        d.check(env_of(ctr).get("CONFIG_FILE") == "/config/config.yaml", "CONFIG_FILE")
        d.check("checksum/config" in ds["spec"]["template"]["metadata"].get("annotations", {}),
                "config checksum annotation")
        d.check(len(pod["containers"]) == 1 and not files["rbac.yml"], "static: no sidecar, no RBAC")
        d.check((env_of(ctr).get("NVIDIA_MIG_MONITOR_DEVICES") == "all") == ("mig" in vals["config"]["map"]),
                f"MIG monitor devices iff a config may use MIG: {vals}")
        got = plugin_accepts(env_of(ctr), cm["data"][key])
        d.check(got.get("flags", {}).get("migStrategy") == ("mixed" if key == "mig" else "none"),
                f"plugin loaded config {key}")

    # configSelection plugin (the default): the plugin selects from the whole ConfigMap by
    # its Node's label, with NVIDIA's config-manager variables; RBAC for exactly that.
    vals = {"config": {"map": {"default": cfg_default, "mig": cfg_mig}, "default": "mig",
                       "fallbackStrategies": ["named", "empty"]}}
    files, _ = render(vals)
    ds, pod = daemonset(files)
    ctr = plugin_ctr(pod)
    env = env_of(ctr)
    (cm,) = files["configmap.yml"]
    vol, _ = mounts_of(pod, ctr).get("/available-configs", ({}, 0))
    d.check(vol.get("configMap", {}).get("name") == cm["metadata"]["name"] and "items" not in vol["configMap"],
            f"the whole ConfigMap at /available-configs: {vol}")
    d.check(env.get("CONFIG_FILE_SRCDIR") == "/available-configs" and env.get("DEFAULT_CONFIG") == "mig"
            and env.get("FALLBACK_STRATEGIES") == "named,empty"
            and env.get("NODE_LABEL") == "nvidia.com/device-plugin.config" and "CONFIG_FILE" not in env,
            f"per-node config env {env}")
    d.check(len(pod["containers"]) == 1 and "initContainers" not in pod, "no sidecar")
    d.check("checksum/config" not in ds["spec"]["template"]["metadata"].get("annotations", {}),
            "no pod roll on config change: the plugin applies it live")
    rules = rbac_rules(files)
    d.check(rules == {("", "nodes"): ["get", "list", "watch", "patch"], ("", "events"): ["create", "patch"]},
            f"per-node config RBAC {rules}")
    d.check(pod.get("serviceAccountName") and downward(ctr) == {"NODE_NAME": "spec.nodeName",
            "NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}, "node name from the downward API")
    for k in env:
        d.check(k in env_names or k in d.RUNTIME_ENV, f"rendered env {k} is not understood by the plugin")

    # gfd: labels from the plugin itself, each delivery mode with only its RBAC.
    for vals, want_rules, want_env, feature_dir in (
            ({"gfd": {"enabled": True}},
             {("nfd.k8s-sigs.io", "nodefeatures"): ["get", "list", "watch", "create", "update"],
              ("", "pods"): ["get"], ("", "events"): ["create", "patch"]},
             {"GDP_GFD": "true", "USE_NODE_FEATURE_API": "true"}, False),
            ({"gfd": {"enabled": True, "noTimestamp": True}, "nfd": {"enableNodeFeatureApi": False},
              "events": {"enabled": False}},
             {}, {"GDP_GFD": "true", "USE_NODE_FEATURE_API": "false", "GFD_NO_TIMESTAMP": "true",
                  "GDP_EVENTS": "false"}, True),
            ({"gfd": {"enabled": True, "nodeLabelsPatch": True}},
             {("", "nodes"): ["get", "list", "watch", "patch"], ("", "events"): ["create", "patch"]},
             {"GDP_GFD": "true", "GDP_NODE_LABELS_PATCH": "true"}, False),
            ({"events": {"enabled": True}}, {("", "events"): ["create", "patch"]}, {}, False)):
        files, _ = render(vals)
        _, pod = daemonset(files)
        ctr = plugin_ctr(pod)
        env = env_of(ctr)
        rules = rbac_rules(files)
        d.check(rules == want_rules, f"RBAC for {vals}: {rules}, want {want_rules}")
        d.check(bool(pod.get("serviceAccountName")) == bool(want_rules), f"ServiceAccount iff RBAC: {vals}")
        for k, v in want_env.items():
            d.check(env.get(k) == v, f"{vals}: env {k}={env.get(k)!r}, want {v!r}")
        d.check("NODE_NAME" in downward(ctr), f"{vals}: NODE_NAME from the downward API")
        m = mounts_of(pod, ctr).get("/etc/kubernetes/node-feature-discovery/features.d")
        d.check(bool(m) == feature_dir, f"{vals}: features.d mounted iff the feature file is used")
        for k in env:
            d.check(k in env_names or k in d.RUNTIME_ENV, f"rendered env {k} is not understood by the plugin")
        got = plugin_accepts(env)
        d.check(got.get("extensions", {}).get("gfd") is bool(vals.get("gfd")), f"plugin saw GDP_GFD: {vals}")

    # config-manager: NVIDIA's binary selects a config per node and SIGHUPs us.
    vals = {"config": {"map": {"default": cfg_default, "mig": cfg_mig}}, "configManager": {"enabled": True}}
    files, _ = render(vals)
    ds, pod = daemonset(files)
    ctr = plugin_ctr(pod)
    (init,) = pod.get("initContainers", [{}])
    side = [c for c in pod["containers"] if c["name"] != "gpu-device-plugin-ctr"]
    d.check(len(side) == 1 and pod.get("shareProcessNamespace") is True, "config-manager sidecar")
    if side:
        senv = env_of(side[0])
        d.check(side[0]["command"] == ["config-manager"] and side[0]["image"].startswith("nvcr.io/nvidia/"),
                "sidecar runs NVIDIA's config-manager")
        d.check(senv.get("PROCESS_TO_SIGNAL") == ctr["command"][0] and senv.get("SIGNAL") == "1"
                and senv.get("SEND_SIGNAL") == "true", f"sidecar signals the plugin with SIGHUP: {senv}")
        d.check(senv.get("CONFIG_FILE_DST") == env_of(ctr).get("CONFIG_FILE") == "/config/config.yaml",
                "config-manager writes the file the plugin reads")
        d.check(env_of(init).get("ONESHOT") == "true" and env_of(init).get("SEND_SIGNAL") == "false", "init oneshot")
    kinds = sorted(o["kind"] for o in files["rbac.yml"])
    d.check(kinds == ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"], f"RBAC objects {kinds}")
    # Everything a plugin with every API feature gets, in a release namespace of its own:
    # the NodeFeature and the pod there, Events in "default", only the Node cluster-wide.
    every, _ = render({"gfd": {"enabled": True}, "configSelection": "plugin",
                       "config": {"map": {"default": cfg_default, "mig": cfg_mig}}},
                      namespace="gpu-operator")
    objs = sorted((o["kind"], o["metadata"].get("namespace")) for o in every["rbac.yml"])
    d.check(objs == [("ClusterRole", None), ("ClusterRoleBinding", None), ("Role", "default"),
                     ("Role", "gpu-operator"), ("RoleBinding", "default"),
                     ("RoleBinding", "gpu-operator"), ("ServiceAccount", "gpu-operator")],
            f"RBAC objects with every API feature: {objs}")
    d.check(rbac_rules(every, "gpu-operator") == {
        ("", "nodes"): ["get", "list", "watch", "patch"],
        ("nfd.k8s-sigs.io", "nodefeatures"): ["get", "list", "watch", "create", "update"],
        ("", "pods"): ["get"], ("", "events"): ["create", "patch"]},
        f"RBAC with every API feature: {objs}")
    d.check(rbac_rules(files) == {("", "nodes"): ["get", "list", "watch"]},
            f"config-manager only reads nodes: {rbac_rules(files)}")
    sa = [o for o in files["rbac.yml"] if o["kind"] == "ServiceAccount"]
    d.check(sa and pod.get("serviceAccountName") == sa[0]["metadata"]["name"], "pod uses the ServiceAccount")
    vol, _ = mounts_of(pod, ctr).get("/config", ({}, 0))
    d.check("emptyDir" in vol, "config-manager writes into an emptyDir")

    # External ConfigMap: nothing rendered for it, key "default", MIG assumed possible.
    files, _ = render({"config": {"name": "my-configs"}, "configSelection": "static"})
    _, pod = daemonset(files)
    ctr = plugin_ctr(pod)
    vol, _ = mounts_of(pod, ctr).get("/config", ({}, 0))
    d.check(not files["configmap.yml"] and vol.get("configMap", {}).get("name") == "my-configs"
            and vol["configMap"].get("items") == [{"key": "default", "path": "config.yaml"}], f"external {vol}")
    d.check("SYS_ADMIN" in ctr["securityContext"].get("capabilities", {}).get("add", []), "external -> SYS_ADMIN")

    # Names and labels.
    files, _ = render({"fullnameOverride": "gdp", "namespaceOverride": "gpu",
                       "selectorLabelsOverride": {"app": "x"}}, namespace="other")
    ds, _ = daemonset(files)
    d.check(ds["metadata"]["name"] == "gdp" and ds["metadata"]["namespace"] == "gpu", "name overrides")
    d.check(ds["spec"]["selector"]["matchLabels"] == {"app": "x"}, "selectorLabelsOverride")
    files, _ = render({"devicePlugin": {"enabled": False}})
    d.check(not files["daemonset.yml"], "devicePlugin.enabled=false renders no DaemonSet")
    files, _ = render({"devicePlugin": {"enableHostNetwork": True}})
    d.check(daemonset(files)[1].get("hostNetwork") is True, "hostNetwork")

    # Refused combinations.
    for vals, ns, msg in (({}, "default", "default"),
                          ({"config": {"map": {"a": "x"}}, "configSelection": "x"}, "kube-system",
                           "configSelection"),
                          ({"config": {"name": "a", "map": {"x": "y"}}}, "kube-system", "not both"),
                          ({"configManager": {"enabled": True}}, "kube-system", "configManager"),
                          ({"config": {"map": {"a": "x", "b": "y"}}, "configSelection": "static"},
                           "kube-system", "no config selected"),
                          ({"migStrategy": "bogus"}, "kube-system", "migStrategy")):
        try:
            render(vals, namespace=ns)
            d.check(False, f"{vals} in {ns}: rendered, want an error mentioning {msg!r}")
        except d.RenderError as e:
            d.check(msg in str(e), f"{vals}: error {e} does not mention {msg!r}")
    render({"allowDefaultNamespace": True}, namespace="default")
    nvidia_values_checks(render)
    helm_dra.checks(render, env_names)


def nvidia_values_checks(render):
    """The values of NVIDIA's chart that have no DaemonSet of their own here (GFD, NFD):
    each is accepted and means the same, or is refused or warned about."""
    # NVIDIA's whole values file renders, as is and with GFD on (NOTES then warn about NFD).
    files, notes = render(NVIDIA_VALUES)
    _, pod = daemonset(files)
    d.check(plugin_ctr(pod)["securityContext"] == {"allowPrivilegeEscalation": False,
                                                   "capabilities": {"drop": ["ALL"]}},
            "NVIDIA's values: gfd.securityContext unused without gfd.enabled")
    d.check("WARNING" not in notes, "no NFD warning without gfd")
    vals = d.merge(NVIDIA_VALUES, {"gfd": {"enabled": True, "nameOverride": "my-gfd",
                                           "namespaceOverride": "gfd-ns"}})
    files, notes = render(vals)
    ds, pod = daemonset(files)
    ctr = plugin_ctr(pod)
    d.check("nfd.enabled unset" in notes and "NodeFeature objects" in notes
            and "gfd.nodeLabelsPatch=true" in notes, f"NOTES warn that NFD is not installed: {notes}")
    d.check(ctr["securityContext"] == {"privileged": True},
            f"gfd.securityContext is the container's with gfd.enabled: {ctr['securityContext']}")
    d.check(ds["metadata"]["name"] == "gdp-gpu-device-plugin" and ds["metadata"]["namespace"] == "kube-system"
            and sorted(f for f, docs in files.items() if docs) == ["daemonset.yml", "rbac.yml"],
            "gfd.nameOverride / namespaceOverride change no name, namespace or object")
    _, notes = render(d.merge(vals, {"nfd": {"enableNodeFeatureApi": False}}))
    d.check("features.d" in notes, f"NOTES name the feature file without the NodeFeature API: {notes}")
    for extra in ({"nfd": {"enabled": False}}, {"gfd": {"nodeLabelsPatch": True}}):
        _, notes = render(d.merge(vals, extra))
        d.check("WARNING" not in notes, f"no NFD warning with {extra}: {notes}")

    # noTimestamp / sleepInterval: the top-level keys (what NVIDIA's GFD template reads) win,
    # gfd.* stand in when they are null; nothing without gfd.enabled.
    gfd_on = {"gfd": {"enabled": True, "nodeLabelsPatch": True}}
    for vals, want in (
            ({"noTimestamp": True, "sleepInterval": "30s"},
             {"GFD_NO_TIMESTAMP": "true", "GFD_SLEEP_INTERVAL": "30s"}),
            ({"noTimestamp": False, "sleepInterval": "infinite",
              "gfd": {"noTimestamp": True, "sleepInterval": "1m"}},
             {"GFD_NO_TIMESTAMP": "false", "GFD_SLEEP_INTERVAL": "infinite"}),
            ({"gfd": {"noTimestamp": True, "sleepInterval": "1m30s"}},
             {"GFD_NO_TIMESTAMP": "true", "GFD_SLEEP_INTERVAL": "1m30s"}),
            # a number from a values file is not a string or int to Helm: unset, as NVIDIA's
            ({"sleepInterval": 60}, {"GFD_NO_TIMESTAMP": None, "GFD_SLEEP_INTERVAL": None})):
        env = env_of(plugin_ctr(daemonset(render(d.merge(gfd_on, vals))[0])[1]))
        for k, v in want.items():
            d.check(env.get(k) == v, f"{vals}: env {k}={env.get(k)!r}, want {v!r}")
        got = plugin_accepts(env)
        d.check(got.get("flags", {}).get("gfd", {}).get("noTimestamp") is (want["GFD_NO_TIMESTAMP"] == "true"),
                f"plugin read GFD_NO_TIMESTAMP for {vals}: {got.get('flags', {}).get('gfd')}")
    env = env_of(plugin_ctr(daemonset(render({"noTimestamp": True, "sleepInterval": "30s"})[0])[1]))
    d.check("GFD_NO_TIMESTAMP" not in env and "GFD_SLEEP_INTERVAL" not in env, "GFD settings only with gfd")

    # gfd.securityContext: the container's with gfd.enabled, after securityContext and
    # compatWithCPUManager; null (Helm drops the default) falls back to the computed rule.
    sys_admin = {"capabilities": {"add": ["SYS_ADMIN"]}}
    for vals, want_sc in (
            ({"gfd": {"enabled": True}}, {"privileged": True}),
            ({"gfd": {"enabled": True, "securityContext": None}},
             {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}),
            ({"gfd": {"enabled": True, "securityContext": None}, "migStrategy": "mixed"}, sys_admin),
            ({"gfd": {"enabled": True, "securityContext": dict(sys_admin, privileged=False)}},
             dict(sys_admin, privileged=False)),
            ({"gfd": {"enabled": True}, "compatWithCPUManager": True}, {"privileged": True}),
            ({"gfd": {"enabled": True}, "securityContext": {"runAsUser": 0}}, {"runAsUser": 0}),
            ({"gfd": {"enabled": False, "securityContext": {"runAsUser": 0}}},
             {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}})):
        sc = plugin_ctr(daemonset(render(dict(vals, nfd={"enabled": False}))[0])[1])["securityContext"]
        d.check(sc == want_sc, f"securityContext for {vals}: {sc}, want {want_sc}")

    # gfd.enableHostNetwork: the one pod also does GFD's work; mps.enableHostNetwork: no MPS pod.
    for vals, want in (({"gfd": {"enabled": True, "enableHostNetwork": True}}, True),
                       ({"gfd": {"enabled": False, "enableHostNetwork": True}}, None),
                       ({"mps": {"enableHostNetwork": True}}, None)):
        pod = daemonset(render(dict(vals, nfd={"enabled": False}))[0])[1]
        d.check(pod.get("hostNetwork") is want, f"hostNetwork for {vals}: {pod.get('hostNetwork')}")

    # Refused as NVIDIA's chart refuses it (namespace), or because NVIDIA's would install NFD.
    for vals, msg in (({"namespace": "gpu"}, "namespace"),
                      ({"nfd": {"enabled": True}}, "nfd.enabled=true"),
                      ({"nfd": {"enabled": True}, "gfd": {"enabled": True, "nodeLabelsPatch": True}},
                       "does not install Node Feature Discovery")):
        try:
            render(vals)
            d.check(False, f"{vals}: rendered, want an error mentioning {msg!r}")
        except d.RenderError as e:
            d.check(msg in str(e), f"{vals}: error {e} does not mention {msg!r}")


def main():
    static_checks()
    if d.failures:  # rendering broken templates would only repeat the problem
        d.finish("deploy-helm")
    renderer = sys.argv[1] if len(sys.argv) > 1 else ""
    if renderer and os.path.exists(renderer):
        rendered_checks(renderer, d.plugin_env_names())
    else:
        print("helm-render not built (no Go toolchain): rendered checks skipped")
    d.finish("deploy-helm")


main()
