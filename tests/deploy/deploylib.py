"""Shared helpers of the deployment tests: paths, YAML loading, the plugin's
env var list (from its --help) and rendering the Helm chart with helm-render."""

import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import scratch  # noqa: E402

SOURCE = os.environ.get("GDP_SOURCE_DIR") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GDP_BUILD_DIR", "")
DEPLOY = os.path.join(SOURCE, "deployments")
CHART = os.path.join(DEPLOY, "helm", "gpu-device-plugin")
IMAGE = "ghcr.io/gpu-device-plugin/gpu-device-plugin"
KUBELET_DIR = "/var/lib/kubelet/device-plugins"

# Read by the NVIDIA container runtime (not by the plugin) when it sets up the
# plugin's own container.
RUNTIME_ENV = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
               "NVIDIA_DISABLE_REQUIRE", "NVIDIA_MIG_MONITOR_DEVICES"}

failures = []
_scratch = None


def scratch_dir():
    """This process's directory for the files handed to helm-render, rootfs.sh and the
    plugin: removed at exit and on SIGTERM/SIGINT (tests/common/scratch.py)."""
    global _scratch
    if _scratch is None:
        _scratch = scratch.mkdtemp("gdp-deploy-")
    return _scratch


def check(cond, what):
    """Record a failed expectation; the test reports all of them at the end."""
    if not cond:
        failures.append(what)
    return cond


def finish(name):
    if failures:
        for f in failures:
            print(f"FAIL: {f}")
        sys.exit(f"{name}: {len(failures)} failure(s)")
    print(f"{name}: ok")


def plugin_env_names():
    """Env vars the built plugin understands, as its --help lists them ([$NAME])."""
    exe = os.path.join(BUILD, "src", "gpu-device-plugin")
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True).stdout
    names = set(re.findall(r"\$([A-Z][A-Z0-9_]*)", out))
    if not names:
        sys.exit("no [$ENV] names in gpu-device-plugin --help")
    # Health-check switches of the reference, read by the health policy, not flags.
    return names | {"DP_DISABLE_HEALTHCHECKS", "DP_ENABLE_HEALTHCHECKS"}


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def merge(base, over):
    """Helm's values merge: maps merge recursively, anything else replaces."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


class RenderError(Exception):
    pass


def render(renderer, values=None, release="gdp", namespace="kube-system", cluster=None):
    """Render the chart with values merged over values.yaml; returns
    {template file name: [documents]} and the NOTES text. cluster: more of Helm's
    context, "Capabilities" and "Lookup" (tests/deploy/helm-render/main.go)."""
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    with open(os.path.join(CHART, "values.yaml")) as f:
        defaults = yaml.safe_load(f)
    ctx = {
        "Values": merge(defaults, values or {}),
        "Chart": {"Name": chart["name"], "Version": chart["version"],
                  "AppVersion": chart["appVersion"]},
        "Release": {"Name": release, "Namespace": namespace, "Service": "Helm"},
        **(cluster or {}),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=scratch_dir()) as tmp:
        json.dump(ctx, tmp)
        tmp.flush()
        r = subprocess.run([renderer, CHART, tmp.name], capture_output=True, text=True)
    if r.returncode != 0:
        raise RenderError(r.stderr.strip())
    files, notes = {}, ""
    for chunk in r.stdout.split("---\n# Source: ")[1:]:
        name, _, text = chunk.partition("\n")
        base = os.path.basename(name)
        if base == "NOTES.txt":
            notes = text
            continue
        try:
            files[base] = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as e:
            raise RenderError(f"{base}: rendered YAML does not parse: {e}\n{text}")
    return files, notes
