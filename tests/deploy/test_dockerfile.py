"""Container recipe (Docker cannot run here): the stages, the runtime
packages cover every shared library the built binary links, the env the
NVIDIA runtime needs, the entrypoint, the NVIDIA-name symlink, OCI labels."""

import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as d  # noqa: E402

DOCKERFILE = os.path.join(d.DEPLOY, "container", "Dockerfile")


def instructions(text):
    text = re.sub(r"\\\n", " ", text)  # line continuations
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages(ins):
    """{stage name: [(instruction, args)]} with the FROM image under 'FROM'."""
    out, cur = {}, None
    for word, rest in ins:
        if word == "FROM":
            image, _, name = rest.partition(" AS ")
            cur = name.strip() or image
            out[cur] = [("FROM", image.strip())]
        elif cur:
            out[cur].append((word, rest))
    return out


def apt_packages(stage):
    pkgs = set()
    for word, rest in stage:
        if word == "RUN" and "apt-get install" in rest:
            tail = rest.split("apt-get install", 1)[1].split("&&")[0]
            pkgs |= {w for w in shlex.split(tail) if not w.startswith("-")}
    return pkgs


def linked_packages():
    """Debian packages of the shared libraries the built binary links."""
    exe = os.path.join(d.BUILD, "src", "gpu-device-plugin")
    out = subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout
    pkgs = {}
    for lib in re.findall(r"=> (/\S+)", out):
        real = os.path.realpath(lib)
        r = subprocess.run(["dpkg", "-S", real], capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True)
        if d.check(r.returncode == 0, f"{lib}: not from a Debian package"):
            pkgs[os.path.basename(lib)] = r.stdout.split(":")[0]
    return pkgs


def main():
    text = open(DOCKERFILE).read()
    st = stages(instructions(text))
    d.check(list(st) == ["build", "runtime"], f"stages {list(st)}")
    build, runtime = st.get("build", []), st.get("runtime", [])
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.M))
    expand = lambda s: re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), s)  # noqa: E731
    d.check(build and expand(build[0][1]) == "debian:12", f"build stage FROM {build[:1]}")
    d.check(runtime and expand(runtime[0][1]) in ("debian:12-slim", "gcr.io/distroless/cc-debian12"),
            f"runtime stage FROM {runtime[:1]}")

    need_build = {"gcc", "meson", "ninja-build", "pkg-config", "python3", "protobuf-c-compiler",
                  "libnghttp2-dev", "libprotobuf-c-dev", "libyaml-dev", "libjansson-dev"}
    missing = need_build - apt_packages(build)
    d.check(not missing, f"build stage lacks {sorted(missing)}")
    rt = apt_packages(runtime)
    for lib, pkg in linked_packages().items():
        # libc6, libgcc-s1 and libstdc++6 are in debian:12-slim (apt needs
        # them); the sanitizer runtimes only appear in -Db_sanitize builds.
        if pkg in ("libc6", "libgcc-s1", "libstdc++6") or re.match(r"lib[a-z]*san\d", pkg):
            continue
        d.check(pkg in rt, f"runtime stage lacks {pkg} (for {lib})")
    d.check(not any(p.endswith("-dev") for p in rt), f"-dev packages in the runtime stage: {rt}")

    env = {}
    for word, rest in runtime:
        if word == "ENV":
            for kv in shlex.split(rest):
                k, _, v = kv.partition("=")
                env[k] = v
    d.check(env.get("NVIDIA_VISIBLE_DEVICES") == "all", "ENV NVIDIA_VISIBLE_DEVICES=all")
    d.check(env.get("NVIDIA_DRIVER_CAPABILITIES") == "compute,utility", "ENV NVIDIA_DRIVER_CAPABILITIES")
    d.check(env.get("NVIDIA_DISABLE_REQUIRE") == "true", "ENV NVIDIA_DISABLE_REQUIRE=true")
    entry = [r for w, r in runtime if w == "ENTRYPOINT"]
    d.check(entry == ['["gpu-device-plugin"]'], f"ENTRYPOINT {entry}")
    d.check(re.search(r"ln -s gpu-device-plugin \S*/usr/bin/nvidia-device-plugin", text),
            "nvidia-device-plugin symlink next to the binary")
    d.check(re.search(r"install .*/usr/bin/gpu-device-plugin", text), "binary installed as /usr/bin/gpu-device-plugin")
    d.check(any(w == "COPY" and r.startswith("--from=build") for w, r in runtime), "runtime copies from build")
    labels = " ".join(r for w, r in runtime if w == "LABEL")
    for key in ("title", "description", "version", "revision", "source", "licenses"):
        d.check(f"org.opencontainers.image.{key}=" in labels, f"OCI label {key}")
    ignore = open(DOCKERFILE + ".dockerignore").read().split()
    d.check("build-*" in ignore and ".git" in ignore, "build directories kept out of the context")
    d.finish("deploy-dockerfile")


main()
