"""The e2e scenarios of the cluster features (9-13 of scenarios.py's list): charts whose
plugin talks to the API server (GPU labels in three delivery modes, RBAC, per-node config by
node label, Events). Uses scenarios.py's helpers, which runs them (it is __main__)."""

import json
import os
import subprocess
import time

import yaml

import __main__ as h


def render_chart_api(values):
    """The chart for a plugin that talks to the API server. This cluster has no kube-proxy
    and its API server listens on 127.0.0.1 only: the pod uses the host's network and is
    pointed at that address (in a real cluster the in-cluster defaults just work)."""
    values = dict(values, devicePlugin={"enabled": True, "enableHostNetwork": True})
    docs = list(yaml.safe_load_all(h.render_chart(values)))
    for d in docs:
        if d and d["kind"] == "DaemonSet":
            for c in d["spec"]["template"]["spec"]["containers"]:
                if c["name"] == "gpu-device-plugin-ctr":
                    c["env"] += [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                                 {"name": "KUBERNETES_SERVICE_PORT", "value": "16443"}]
    return yaml.safe_dump_all(docs, sort_keys=False)


def render_charts(work):
    """The chart variants these scenarios apply, rendered into work: {variant: path}."""
    charts = {}
    ts = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
    for variant, values in (
            ("gfd NodeFeature", h.chart_values(gfd={"enabled": True})),
            ("gfd feature file", h.chart_values(gfd={"enabled": True}, nfd={"enableNodeFeatureApi": False})),
            ("gfd node labels", h.chart_values(gfd={"enabled": True, "nodeLabelsPatch": True})),
            ("gfd node labels, no timestamp",
             h.chart_values(gfd={"enabled": True, "nodeLabelsPatch": True, "noTimestamp": True})),
            ("per-node configs", h.chart_values(config={"map": {
                "default": "version: v1\n", "ts": ts,
                "ts-quiet": ts + "health:\n  quietPeriod: 30s\n",
                "bad": "version: v1\nflags:\n  migStrategy: bogus\n"}}))):
        path = os.path.join(work, variant.replace(" ", "-").replace(",", "") + ".yaml")
        with open(path, "w") as f:
            f.write(render_chart_api(values))
        charts[variant] = path
    return charts


FEATURE_FILE = "/etc/kubernetes/node-feature-discovery/features.d/gfd"
GPU_COUNT = "nvidia.com/gpu.count"
HEAL_S = 60  # published labels someone deletes are back within this (issue 18 A2)


def node_labels():
    return h.kjson("get", "node", h.NODE)["metadata"].get("labels", {})


def s_nodefeature(ctx):
    h.kubectl("apply", "-f", os.path.join(h.A.source, "tests", "e2e", "nodefeature-crd.yaml"))
    h.wait("the NodeFeature CRD served", lambda: subprocess.run(
        [h.A.kubectl, "--kubeconfig", h.A.kubeconfig, "get", "nodefeatures", "-A"],
        capture_output=True).returncode == 0)
    pod = h.apply_chart(ctx, "gfd NodeFeature")
    name = f"nvidia-features-for-{h.NODE}"

    def nf():
        r = subprocess.run([h.A.kubectl, "--kubeconfig", h.A.kubeconfig, "get", "nodefeature", "-n",
                            "kube-system", name, "-o", "json"], capture_output=True, text=True)
        if r.returncode != 0:
            return None
        o = json.loads(r.stdout)
        return o if o.get("spec", {}).get("labels", {}).get(GPU_COUNT) == str(ctx["ngpus"]) else None
    o = h.wait(f"NodeFeature kube-system/{name} with {GPU_COUNT}={ctx['ngpus']}", nf)
    meta = o["metadata"]
    if meta.get("labels", {}).get("nfd.node.kubernetes.io/node-name") != h.NODE:
        raise h.Fail(f"NodeFeature labels {meta.get('labels')}")
    owners = {r["kind"]: r for r in meta.get("ownerReferences", [])}
    if not owners.get("DaemonSet", {}).get("controller") or owners.get("Pod", {}).get("name") != \
            pod["metadata"]["name"]:
        raise h.Fail(f"NodeFeature owners {meta.get('ownerReferences')}")
    print(f"  NodeFeature {name}: {len(o['spec']['labels'])} labels, owned by DaemonSet "
          f"{owners['DaemonSet']['name']} and pod {owners['Pod']['name']}")

    # Healing (issue 18 A2): deleted, it is back within 60 s; so it is after NFD's CRD
    # (and every NodeFeature with it) is deleted and installed again.
    h.kubectl("delete", "nodefeature", "-n", "kube-system", name)
    t0 = time.monotonic()
    h.wait(f"NodeFeature {name} re-created", nf, timeout=HEAL_S)
    print(f"  NodeFeature deleted: back in {time.monotonic() - t0:.1f} s")
    crd = os.path.join(h.A.source, "tests", "e2e", "nodefeature-crd.yaml")
    h.kubectl("delete", "-f", crd, "--wait=true")
    h.kubectl("apply", "-f", crd)
    t0 = time.monotonic()
    h.wait(f"NodeFeature {name} back after the CRD was re-installed", nf, timeout=HEAL_S)
    print(f"  NodeFeature CRD re-installed: the object back in {time.monotonic() - t0:.1f} s")


def feature_file():
    try:
        return dict(line.split("=", 1) for line in open(FEATURE_FILE).read().splitlines())
    except OSError:
        return None


def s_feature_file(ctx):
    h.apply_chart(ctx, "gfd feature file")
    got = h.wait(f"{FEATURE_FILE} with {GPU_COUNT}={ctx['ngpus']}",
               lambda: (feature_file() or {}).get(GPU_COUNT) == str(ctx["ngpus"]) and feature_file())
    print(f"  {FEATURE_FILE}: {len(got)} labels, e.g. nvidia.com/gpu.product={got.get('nvidia.com/gpu.product')}")


def s_node_labels(ctx):
    h.apply_chart(ctx, "gfd node labels")
    h.wait(f"{FEATURE_FILE} removed by the plugin that wrote it", lambda: feature_file() is None)
    n = str(ctx["ngpus"])
    got = h.wait(f"Node label {GPU_COUNT}={n} and a timestamp",
               lambda: node_labels().get(GPU_COUNT) == n and "nvidia.com/gfd.timestamp" in node_labels()
               and node_labels())
    ours = sorted(k for k in got if k.startswith("nvidia.com/") and k != "nvidia.com/gpu.present")
    print(f"  Node {h.NODE}: {len(ours)} GPU labels, e.g. nvidia.com/gpu.product={got.get('nvidia.com/gpu.product')}")
    # Healing (issue 18 A2): labels stripped or altered by someone are patched back.
    h.kubectl("label", "node", h.NODE, f"{GPU_COUNT}-", "nvidia.com/gpu.product=altered",
              "--overwrite")
    t0 = time.monotonic()
    h.wait("the stripped and altered GPU labels restored",
           lambda: node_labels().get(GPU_COUNT) == n and
           node_labels().get("nvidia.com/gpu.product") == got.get("nvidia.com/gpu.product"),
           timeout=HEAL_S)
    print(f"  Node labels stripped and altered: restored in {time.monotonic() - t0:.1f} s")
    h.apply_chart(ctx, "gfd node labels, no timestamp")
    got = h.wait("nvidia.com/gfd.timestamp removed from the Node",
               lambda: "nvidia.com/gfd.timestamp" not in node_labels() and node_labels())
    if got.get(GPU_COUNT) != n or got.get("nvidia.com/gpu.present") != "true":
        raise h.Fail(f"labels after the removal: {got}")
    print("  nvidia.com/gfd.timestamp removed; other GPU labels and nvidia.com/gpu.present kept")


def plugin_log():
    pod = h.wait_one_plugin_pod()
    return h.kubectl("logs", "-n", "kube-system", pod["metadata"]["name"], check=False)


def s_rbac(ctx):
    role = [d for d in yaml.safe_load_all(open(ctx["charts"]["gfd node labels, no timestamp"]))
            if d and d["kind"] == "ClusterRole"][0]
    for r in role["rules"]:
        if "nodes" in r["resources"]:
            r["verbs"] = [v for v in r["verbs"] if v != "patch"]
    h.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(role))
    h.kubectl("label", "node", h.NODE, f"{GPU_COUNT}-")  # a label of ours gone: the plugin must patch
    old = h.wait_one_plugin_pod()
    h.delete_pod("kube-system", old["metadata"]["name"])
    h.wait_one_plugin_pod(not_uid=old["metadata"]["uid"])
    line = h.wait("the plugin's 403 line", lambda: [
        l for l in plugin_log().splitlines() if 'grant verb "patch" on resource "nodes"' in l])
    print(f"  {line[0].strip()[:200]}")


def registrations(log):
    return log.count("Registered device plugin for 'nvidia.com/gpu'")


def plugin_list(*args):
    """`gpu-device-plugin list` run in the plugin's container (kubectl exec: its
    environment, its service account, the same per-node selection serve makes)."""
    pod = h.wait_one_plugin_pod()
    return h.kubectl("exec", "-n", "kube-system", pod["metadata"]["name"], "-c",
                     "gpu-device-plugin-ctr", "--", "gpu-device-plugin", "list", *args)


def s_node_config(ctx):
    n = ctx["ngpus"]
    h.kubectl("label", "node", h.NODE, "nvidia.com/device-plugin.config-", check=False)
    h.apply_chart(ctx, "per-node configs")
    h.wait_node_gpus(n, n)

    def annotation():
        return h.kjson("get", "node", h.NODE)["metadata"].get("annotations", {}).get(
            "gpu-device-plugin.github.io/config")
    h.wait("annotation config=default", lambda: annotation() == "default")
    h.kubectl("label", "node", h.NODE, "nvidia.com/device-plugin.config=ts", "--overwrite")
    h.wait_node_gpus(4 * n, 4 * n)
    h.wait("annotation config=ts", lambda: annotation() == "ts")
    source = h.kjson("get", "node", h.NODE)["metadata"]["annotations"].get(
        "gpu-device-plugin.github.io/config-source")
    if source != "node label nvidia.com/device-plugin.config=ts":
        raise h.Fail(f"annotation config-source={source}")
    h.show_node_gpus()
    first = plugin_list().splitlines()[0]
    if first != "Config: ts (node label nvidia.com/device-plugin.config=ts)":
        raise h.Fail(f"list in the plugin's pod: {first}")
    doc = json.loads(plugin_list("--output", "json"))
    rows = [d for r in doc["resources"] for d in r["devices"]]
    if doc["config"]["name"] != "ts" or len(rows) != 4 * n:
        raise h.Fail(f"list --output json: config {doc['config']}, {len(rows)} devices")
    print(f"  list in the plugin's pod: {first}; {len(rows)} devices")
    before = registrations(plugin_log())
    h.kubectl("label", "node", h.NODE, "nvidia.com/device-plugin.config=ts-quiet", "--overwrite")
    h.wait("annotation config=ts-quiet", lambda: annotation() == "ts-quiet")
    log = plugin_log()
    # A switch is one line at -v 0 (the reload's own lines are debug under it).
    if "Applied per-node config ts-quiet" not in log or registrations(log) != before:
        raise h.Fail(f"same resources re-registered: {registrations(log)} registrations, {before} before")
    print(f"  ts -> ts-quiet: same resources, registration kept ({before} registrations)")

    h.kubectl("label", "node", h.NODE, "nvidia.com/device-plugin.config=bad", "--overwrite")

    def rejected():
        ev = h.kjson("get", "events", "-n", "default", "--field-selector",
                   f"involvedObject.name={h.NODE},reason=ConfigRejected")["items"]
        return [e for e in ev if "bad" in e.get("message", "")]
    ev = h.wait("Event ConfigRejected for config bad", rejected)
    print(f"  Event {ev[0]['type']} {ev[0]['reason']}: {ev[0]['message'][:160]}")
    h.wait_node_gpus(4 * n, 4 * n)
    if annotation() != "ts-quiet":
        raise h.Fail(f"annotation {annotation()} after a rejected config")
    print("  the running state kept: capacity and annotation unchanged")
    first = plugin_list().splitlines()[0]
    if not first.startswith("Config: flags and --config-file (per-node config bad (node label "
                            "nvidia.com/device-plugin.config=bad) rejected: "):
        raise h.Fail(f"list in the plugin's pod with config bad: {first}")
    print(f"  list names the rejection: {first[:160]}")

    # A health transition is an Event on the Node too.
    uuid = ctx["uuids"][1]
    fd = h.wait("the simulator's control FIFO open in the plugin",
              lambda: h._open_fifo(os.path.join(h.A.state, "driver", "run", "ctl")))
    os.write(fd, f"xid {uuid} 32\n".encode())
    os.close(fd)

    def unhealthy():
        ev = h.kjson("get", "events", "-n", "default", "--field-selector",
                   f"involvedObject.name={h.NODE},reason=GPUUnhealthy")["items"]
        return [e for e in ev if uuid in e.get("message", "")]
    ev = h.wait(f"Event GPUUnhealthy for {uuid}", unhealthy)
    print(f"  Event {ev[0]['type']} {ev[0]['reason']}: {ev[0]['message'][:200]}")
    h.kubectl("label", "node", h.NODE, "nvidia.com/device-plugin.config-")



SCENARIOS = [("nodefeature", s_nodefeature), ("feature-file", s_feature_file),
             ("node-labels", s_node_labels), ("rbac", s_rbac), ("node-config", s_node_config)]
