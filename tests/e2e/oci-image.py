#!/usr/bin/python3
"""Assemble an OCI image-layout archive from a root filesystem, without a registry
or a container builder, for `ctr images import`.

usage: oci-image.py --rootfs DIR --name REF --out FILE.tar
                    [--dockerfile FILE [--stage NAME] [--build-arg K=V ...]]
                    [--entrypoint JSON] [--cmd JSON] [--env K=V ...] [--user U]

With --dockerfile the image config (ENV, ENTRYPOINT, CMD, USER, WORKDIR, LABEL, with ARG
defaults expanded) is read from that stage of the Dockerfile, so the image made here is
configured exactly as `docker build` would configure it; the explicit options add to it.
One layer; every entry owned by 0:0 with mtime 0, so the same tree gives the same digest.
Prints the image's compressed size (bytes) and layer digest on stdout as JSON."""

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shlex
import sys
import tarfile


def dockerfile_config(path, stage, build_args):
    text = re.sub(r"\\\n", " ", open(path).read())
    args, cur, cfg = {}, None, {"Env": [], "Labels": {}}
    expand = lambda s: re.sub(r"\$\{(\w+)\}|\$(\w+)",  # noqa: E731
                              lambda m: args.get(m.group(1) or m.group(2), ""), s)
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "FROM":
            cur = rest.partition(" AS ")[2].strip() or rest
            continue
        if word == "ARG":
            k, _, v = rest.partition("=")
            args[k] = build_args.get(k, v if _ else args.get(k, ""))
            continue
        if cur != stage:
            continue
        if word in ("ENV", "LABEL"):
            for kv in shlex.split(rest):
                k, _, v = kv.partition("=")
                if word == "ENV":
                    cfg["Env"] = [e for e in cfg["Env"] if not e.startswith(k + "=")] + [f"{k}={expand(v)}"]
                else:
                    cfg["Labels"][k] = expand(v)
        elif word in ("ENTRYPOINT", "CMD"):
            key = "Entrypoint" if word == "ENTRYPOINT" else "Cmd"
            cfg[key] = json.loads(rest) if rest.startswith("[") else ["/bin/sh", "-c", rest]
        elif word == "USER":
            cfg["User"] = expand(rest)
        elif word == "WORKDIR":
            cfg["WorkingDir"] = expand(rest)
    if cur is None:
        sys.exit(f"oci-image: {path}: no FROM")
    return cfg


def layer_tar(rootfs):
    """The rootfs as an uncompressed tar, deterministic (sorted, 0:0, mtime 0)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for top, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in sorted(dirs + files):
                path = os.path.join(top, name)
                info = tar.gettarinfo(path, os.path.relpath(path, rootfs))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isfile():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def blob(out, data):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    out.addfile(info, io.BytesIO(data))
    return f"sha256:{digest}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rootfs", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--dockerfile")
    p.add_argument("--stage", default="runtime")
    p.add_argument("--build-arg", action="append", default=[])
    p.add_argument("--entrypoint")
    p.add_argument("--cmd")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--user")
    a = p.parse_args()

    cfg = {"Env": [], "Labels": {}}
    if a.dockerfile:
        cfg = dockerfile_config(a.dockerfile, a.stage, dict(kv.split("=", 1) for kv in a.build_arg))
    cfg["Env"] += a.env
    if a.entrypoint:
        cfg["Entrypoint"] = json.loads(a.entrypoint)
    if a.cmd:
        cfg["Cmd"] = json.loads(a.cmd)
    if a.user:
        cfg["User"] = a.user

    raw = layer_tar(a.rootfs)
    gz = gzip.compress(raw, compresslevel=9, mtime=0)
    config = {"architecture": "amd64", "os": "linux", "config": cfg,
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
              "history": [{"created_by": "tests/e2e/oci-image.py"}]}
    config_b = json.dumps(config, sort_keys=True).encode()
    with tarfile.open(a.out, "w") as out:
        layer_d = blob(out, gz)
        config_d = blob(out, config_b)
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                               "digest": config_d, "size": len(config_b)},
                    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                "digest": layer_d, "size": len(gz)}]}
        manifest_b = json.dumps(manifest, sort_keys=True).encode()
        manifest_d = blob(out, manifest_b)
        index = {"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_d,
            "size": len(manifest_b), "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": a.name,
                            "org.opencontainers.image.ref.name": a.name.rpartition(":")[2]}}]}
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                           ("index.json", json.dumps(index, sort_keys=True).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    print(json.dumps({"name": a.name, "compressed": len(gz) + len(config_b) + len(manifest_b),
                      "uncompressed": len(raw), "layer": layer_d}))


main()
