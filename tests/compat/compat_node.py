"""The node half of compat.py's model of the reference: what a simulator profile's GPUs
and MIG devices are (UUIDs, `i:j` indices, profiles, NUMA) and the rendered host's MIG
capability minors (nvidia-plugin-behavior.md §4.1-4.7). Independent of the plugin's code."""

import os
import re

import yaml


def profile_path(name, harness, shared_profiles, source):
    """Shared NVIDIA mock profiles by bare name, the simulator's own ones from sim/profiles."""
    if name in shared_profiles:
        return harness.profile_path(name)
    return os.path.join(source, "sim", "profiles", name + ".yaml")


def _get(node, path):
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _dget(dev, defaults, path):
    v = _get(dev, path)
    return v if v is not None else _get(defaults, path)


def _enabled(v):
    return v is True or str(v).lower() in ("enabled", "true", "1", "yes", "on")


def derive_mig_uuid(gpu_uuid, gi, ci):
    """The simulator's MIG UUID for a CI without an explicit `uuid` (sim/nvml docs)."""
    m = (1 << 64) - 1
    h1, h2 = 0xcbf29ce484222325, 0x84222325cbf29ce4
    for b in ("%s/%d/%d" % (gpu_uuid, gi, ci)).encode():
        h1 = ((h1 ^ b) * 0x100000001b3) & m
        h2 = (((h2 ^ b) * 0x100000001b3) + 1) & m
    return "MIG-%08x-%04x-%04x-%04x-%012x" % (h1 >> 32, (h1 >> 16) & 0xffff, h1 & 0xffff,
                                              h2 >> 48, h2 & 0xffffffffffff)


def _slices(profile):
    return int(re.match(r"(\d+)g\.", profile).group(1))


def load_node(path):
    """GPUs of a profile in NVML index order: {index, uuid, name, minor, numa, mig_enabled,
    migs: [{j, uuid, profile, gi, ci}]}. A MIG device's profile is the GI profile when its
    CI spans the GI (`1g.5gb+me`), else the CI profile (`1c.2g.10gb`) (§4.4)."""
    with open(path, encoding="utf-8") as f:
        prof = yaml.safe_load(f)
    defaults = prof.get("device_defaults") or {}
    numa_of = {}
    for rc in _get(prof, "pcie_topology.root_complexes") or []:
        for bdf in rc.get("devices") or []:
            numa_of[bdf.strip().lower()] = rc.get("numa_node")
    gpus = []
    for i, d in enumerate(prof.get("devices") or []):
        bdf = (_get(d, "pci.bus_id") or "").strip().lower()
        g = {
            "index": i,
            "uuid": d["uuid"],
            "name": _dget(d, defaults, "name"),
            "minor": d.get("minor_number", i),
            "numa": numa_of.get(bdf),
            "mig_enabled": _enabled(_dget(d, defaults, "mig.mode_current")),
            "migs": [],
        }
        if g["mig_enabled"]:
            for gi in _dget(d, defaults, "mig.gpu_instances") or []:
                cis = gi.get("compute_instances") or [{"id": 0, "profile": gi["profile"]}]
                for ci in cis:
                    m = re.match(r"(\d+)c\.", ci["profile"])
                    partial = m is not None and int(m.group(1)) < _slices(gi["profile"])
                    g["migs"].append({
                        "j": len(g["migs"]),
                        "uuid": ci.get("uuid") or derive_mig_uuid(d["uuid"], gi["id"], ci["id"]),
                        "profile": ci["profile"] if partial else gi["profile"],
                        "gi": gi["id"],
                        "ci": ci["id"],
                    })
        gpus.append(g)
    return gpus


def read_mig_minors(proc_root):
    """`gpu<g>/gi<i>[/ci<c>]/access <minor>` lines of the rendered host (§4.7)."""
    out = {}
    path = os.path.join(proc_root, "driver", "nvidia-caps", "mig-minors")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2:
                    out[parts[0]] = int(parts[1])
    return out
