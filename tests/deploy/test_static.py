"""Static manifests: every YAML under deployments/ parses; each DaemonSet has
the invariants of NVIDIA's static manifest, our image, and only env vars the
built plugin (or the NVIDIA runtime) understands."""

import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as d  # noqa: E402


def check_daemonset(path, ds, env_names):
    name = os.path.basename(path)
    d.check(ds.get("apiVersion") == "apps/v1", f"{name}: apiVersion apps/v1")
    d.check(ds["metadata"].get("namespace") == "kube-system", f"{name}: namespace kube-system")
    spec = ds["spec"]
    sel = spec["selector"]["matchLabels"]
    labels = spec["template"]["metadata"]["labels"]
    d.check(sel and all(labels.get(k) == v for k, v in sel.items()),
            f"{name}: selector {sel} does not match pod labels {labels}")
    d.check(spec.get("updateStrategy", {}).get("type") == "RollingUpdate", f"{name}: RollingUpdate")
    pod = spec["template"]["spec"]
    d.check(pod.get("priorityClassName") == "system-node-critical", f"{name}: priority class")
    d.check({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            in pod.get("tolerations", []), f"{name}: nvidia.com/gpu toleration")
    vols = {v["name"]: v for v in pod["volumes"]}
    (ctr,) = pod["containers"]
    d.check(ctr["image"] == d.IMAGE + ":v0.1.0", f"{name}: image {ctr['image']}")
    mounts = {m["mountPath"]: m["name"] for m in ctr.get("volumeMounts", [])}
    vol = vols.get(mounts.get(d.KUBELET_DIR), {})
    d.check(vol.get("hostPath", {}).get("path") == d.KUBELET_DIR,
            f"{name}: {d.KUBELET_DIR} hostPath mounted at the same path")
    for m in ctr.get("volumeMounts", []):
        d.check(m["name"] in vols, f"{name}: mount {m['name']} has no volume")
    env = {e["name"]: e.get("value") for e in ctr.get("env") or []}
    for k in env:
        d.check(k in env_names or k in d.RUNTIME_ENV, f"{name}: env {k} is not understood by the plugin")
    if "GDP_METRICS_ADDRESS" in env:
        port = int(env["GDP_METRICS_ADDRESS"].rsplit(":", 1)[1])
        d.check(ctr.get("ports") == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}],
                f"{name}: metrics port {ctr.get('ports')}")
        d.check(ctr.get("livenessProbe", {}).get("httpGet") == {"path": "/healthz", "port": "metrics"}
                and ctr.get("readinessProbe", {}).get("httpGet") == {"path": "/readyz", "port": "metrics"},
                f"{name}: probes on the metrics port")
        ann = spec["template"]["metadata"].get("annotations", {})
        d.check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(port),
                f"{name}: scrape annotations {ann}")
    else:
        d.check("livenessProbe" not in ctr and "readinessProbe" not in ctr and "ports" not in ctr,
                f"{name}: probes need the metrics listener (GDP_METRICS_ADDRESS)")
    req = ctr.get("resources", {}).get("requests", {})
    d.check(req.get("cpu") and req.get("memory"), f"{name}: resource requests")
    sc = ctr.get("securityContext", {})
    return env, sc


def main():
    env_names = d.plugin_env_names()
    paths = sorted(glob.glob(os.path.join(d.DEPLOY, "**", "*.y*ml"), recursive=True))
    chart_templates = os.path.join(d.CHART, "templates")
    seen = {}
    for path in paths:
        if path.startswith(chart_templates):
            continue  # Go templates, not YAML: test_helm.py renders them
        try:
            docs = d.load_all(path)
        except Exception as e:  # noqa: BLE001 - report any parse error
            d.check(False, f"{path}: does not parse: {e}")
            continue
        d.check(docs, f"{path}: empty")
        if "/static/" in path:
            for doc in docs:
                d.check(doc.get("kind") == "DaemonSet", f"{path}: unexpected kind {doc.get('kind')}")
                if doc.get("kind") == "DaemonSet":
                    seen[os.path.basename(path)] = check_daemonset(path, doc, env_names)

    env, sc = seen.get("gpu-device-plugin.yml", (None, {}))
    d.check(env == {}, "gpu-device-plugin.yml: env [] like NVIDIA's")
    d.check(sc == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            f"gpu-device-plugin.yml: securityContext {sc}")
    env, sc = seen.get("gpu-device-plugin-compat-with-cpumanager.yml", ({}, {}))
    d.check(env.get("PASS_DEVICE_SPECS") == "true" and sc.get("privileged") is True,
            "compat-with-cpumanager: PASS_DEVICE_SPECS=true and privileged")
    env, sc = seen.get("gpu-device-plugin-with-mig.yml", ({}, {}))
    d.check(env.get("MIG_STRATEGY") in ("single", "mixed")
            and env.get("NVIDIA_MIG_MONITOR_DEVICES") == "all"
            and "SYS_ADMIN" in sc.get("capabilities", {}).get("add", []),
            "with-mig: MIG_STRATEGY, NVIDIA_MIG_MONITOR_DEVICES=all, SYS_ADMIN")
    env, sc = seen.get("gpu-device-plugin-with-metrics.yml", ({}, {}))
    d.check(env == {"GDP_METRICS_ADDRESS": ":9808"}
            and sc == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            f"with-metrics: gpu-device-plugin.yml plus GDP_METRICS_ADDRESS=:9808: {env} {sc}")
    d.check(len(seen) == 4, f"expected 4 static DaemonSets, found {sorted(seen)}")
    d.finish("deploy-static")


main()
