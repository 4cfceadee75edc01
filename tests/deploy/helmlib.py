"""What the Helm chart tests read from rendered objects: the plugin's DaemonSet, container,
env and mounts, the RBAC rules with their scopes, and whether the built plugin accepts the
rendered environment. Shared by test_helm.py and helm_dra.py."""

import json
import os
import subprocess
import tempfile

import deploylib as d


def daemonset(files):
    (ds,) = files["daemonset.yml"]
    sel = ds["spec"]["selector"]["matchLabels"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    d.check(all(labels.get(k) == v for k, v in sel.items()), f"selector {sel} vs labels {labels}")
    return ds, ds["spec"]["template"]["spec"]


def plugin_ctr(pod):
    (ctr,) = [c for c in pod["containers"] if c["name"] == "gpu-device-plugin-ctr"]
    return ctr


def env_of(ctr):
    return {e["name"]: e.get("value") for e in ctr.get("env", [])}


def mounts_of(pod, ctr):
    vols = {v["name"]: v for v in pod["volumes"]}
    out = {}
    for m in ctr.get("volumeMounts", []):
        if d.check(m["name"] in vols, f"mount {m['name']} without a volume"):
            out[m["mountPath"]] = (vols[m["name"]], m.get("readOnly", False))
    return out


def plugin_accepts(env, config_text=None):
    """Run the built plugin's `config print` with the rendered env: the values
    the chart produces must load. Returns the printed configuration."""
    exe = os.path.join(d.BUILD, "src", "gpu-device-plugin")
    e = {k: v for k, v in env.items() if k not in d.RUNTIME_ENV and k != "CONFIG_FILE" and v is not None}
    e["PATH"] = os.environ.get("PATH", "/usr/bin")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=d.scratch_dir()) as f:
        if config_text is not None:
            f.write(config_text)
            f.flush()
            e["CONFIG_FILE"] = f.name
        r = subprocess.run([exe, "config", "print"], env=e, capture_output=True, text=True)
    if not d.check(r.returncode == 0, f"plugin rejects rendered env {e}: {r.stderr.strip()}"):
        return {}
    return json.loads(r.stdout)


# Where each resource's rules must be (issue 18 item 9, least privilege): the Node is
# cluster-scoped, so it is in the ClusterRole, with DRA's ResourceSlices (cluster-scoped)
# and ResourceClaims (in any namespace); Events about the Node must be in "default"
# (kube-apiserver's legacyValidateEvent); the NodeFeature and the own pod are in the
# release namespace.
RBAC_SCOPE = {("", "nodes"): ("ClusterRole", None), ("", "events"): ("Role", "default"),
              ("nfd.k8s-sigs.io", "nodefeatures"): ("Role", "kube-system"),
              ("", "pods"): ("Role", "kube-system"),
              ("resource.k8s.io", "resourceslices"): ("ClusterRole", None),
              ("resource.k8s.io", "resourceclaims"): ("ClusterRole", None)}


def rbac_rules(files, namespace="kube-system"):
    """Every role's rules as {(apiGroup, resource): verbs}, after checking that each rule
    is in its scope (RBAC_SCOPE; the release namespace is `namespace`), once, without a
    wildcard, and that each role is bound, by a binding of its own kind and namespace,
    to the chart's ServiceAccount and nothing else."""
    out = {}
    objs = files["rbac.yml"]
    sas = [(o["metadata"]["name"], o["metadata"].get("namespace")) for o in objs
           if o["kind"] == "ServiceAccount"]
    for o in objs:
        if o["kind"] not in ("ClusterRole", "Role"):
            continue
        where = o["metadata"].get("namespace")
        for r in o["rules"]:
            d.check(set(r) == {"apiGroups", "resources", "verbs"}, f"rule fields {r}")
            for g in r["apiGroups"]:
                for res in r["resources"]:
                    kind, ns = RBAC_SCOPE.get((g, res), ("?", "?"))
                    if ns == "kube-system":
                        ns = namespace
                    d.check((o["kind"], where) == (kind, ns),
                            f"{g}/{res} in a {o['kind']} in {where}, want a {kind} in {ns}")
                    d.check((g, res) not in out, f"{g}/{res} granted twice")
                    d.check("*" not in r["verbs"] + [g, res], f"wildcard in {r}")
                    out[(g, res)] = r["verbs"]
        binds = [b for b in objs if b["kind"] == o["kind"] + "Binding"
                 and b["metadata"].get("namespace") == where
                 and b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": o["kind"],
                                      "name": o["metadata"]["name"]}]
        d.check(len(binds) == 1 and [(s["kind"], s["name"], s["namespace"]) for s in binds[0]["subjects"]]
                == [("ServiceAccount", n, ns) for n, ns in sas] and len(sas) == 1,
                f"{o['kind']} {o['metadata']['name']} bound to the ServiceAccount only: {binds}")
    roles = {o["metadata"]["name"] for o in objs if o["kind"] in ("ClusterRole", "Role")}
    d.check(all(o["roleRef"]["name"] in roles for o in objs if o["kind"].endswith("Binding")),
            "every binding's role is rendered")
    return out


def downward(ctr):
    return {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in ctr.get("env", [])
            if "valueFrom" in e}
