"""Container recipe (Docker cannot run here): the stages, the scratch runtime
stage holding exactly what deployments/container/rootfs.sh puts together (run
here on the built binary: every shared library it links is in the tree), the
env the NVIDIA runtime needs, the entrypoint, the NVIDIA-name symlink, OCI
labels. tests/e2e builds and runs the same tree as a real image."""

import os
import re
import shlex
import subprocess
import sys
import tempfile

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


def linked_libraries():
    """Paths of the shared libraries (and the loader) the built binary links."""
    exe = os.path.join(d.BUILD, "src", "gpu-device-plugin")
    out = subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout
    return re.findall(r"=> (/\S+)", out) + re.findall(r"^\s*(/\S+) \(0x", out, re.M)


def static_libraries():
    """(name, Debian package) of each library the build linked statically (static-libs.txt
    next to the binary, written by src/meson.build)."""
    path = os.path.join(d.BUILD, "src", "static-libs.txt")
    names = open(path).read().split() if os.path.exists(path) else []
    out = []
    for name in names:
        archive = subprocess.run(["cc", f"-print-file-name=lib{name}.a"], capture_output=True,
                                 text=True, check=True).stdout.strip()
        owner = subprocess.run(["dpkg", "-S", os.path.realpath(archive)], capture_output=True,
                               text=True).stdout
        d.check(owner, f"no Debian package owns {archive}")
        if owner:
            out.append((name, owner.split(":")[0]))
    return out


def check_rootfs():
    """rootfs.sh on the built binary: the binary, the symlink and every linked
    library at the path the loader looks for it (through /lib -> usr/lib)."""
    exe = os.path.join(d.BUILD, "src", "gpu-device-plugin")
    script = os.path.join(d.DEPLOY, "container", "rootfs.sh")
    with tempfile.TemporaryDirectory(dir=d.scratch_dir()) as tmp:
        out = os.path.join(tmp, "rootfs")
        r = subprocess.run(["sh", script, exe, out], capture_output=True, text=True)
        if not d.check(r.returncode == 0, f"rootfs.sh failed: {r.stderr.strip()}"):
            return
        d.check(os.path.isfile(os.path.join(out, "usr/bin/gpu-device-plugin")), "rootfs: binary")
        # the share hook beside it, its own file (copied to the host, so no symlink), and
        # it needs no library the host may lack: glibc only (docs/cdi-hook.md)
        hook = os.path.join(out, "usr/bin/gpu-device-plugin-cdi-hook")
        d.check(os.path.isfile(hook) and not os.path.islink(hook) and os.access(hook, os.X_OK),
                "rootfs: gpu-device-plugin-cdi-hook")
        if os.path.isfile(hook):
            needed = subprocess.run(["ldd", hook], capture_output=True, text=True).stdout
            libs = set(re.findall(r"(lib[\w+.-]*\.so[.\d]*)", needed)) - {"libc.so.6"}
            sanitized = any("san.so" in lib for lib in libs)
            libs = {lib for lib in libs if "san.so" not in lib}  # a sanitizer build's runtime
            if sanitized:  # ... and what that runtime brings (libstdc++, libgcc_s, libm)
                libs -= {"libstdc++.so.6", "libgcc_s.so.1", "libm.so.6"}
            d.check(not libs, f"gpu-device-plugin-cdi-hook links more than glibc: {sorted(libs)}")
        for name in ("nvidia-device-plugin", "gpu-feature-discovery", "config-manager",
                     "mps-control-daemon",  # every program of NVIDIA's image
                     "gpu-kubelet-plugin"):  # and of its DRA driver's
            d.check(os.path.islink(os.path.join(out, "usr/bin", name)) and
                    os.readlink(os.path.join(out, "usr/bin", name)) == "gpu-device-plugin",
                    f"rootfs: {name} symlink")
        # Each name runs its program: --version says which.
        for name, says in (("config-manager", "config-manager (gpu-device-plugin)"),
                           ("gpu-feature-discovery", "gpu-feature-discovery (gpu-device-plugin)"),
                           ("mps-control-daemon", "mps-control-daemon (gpu-device-plugin)")):
            r = subprocess.run([name, "--version"], executable=exe, capture_output=True,
                               text=True)
            d.check(r.returncode == 0 and says in r.stdout, f"{name} --version: {r.stdout!r}")
        d.check(os.readlink(os.path.join(out, "lib")) == "usr/lib", "rootfs: merged /usr (/lib)")
        # /bin/sh for the GPU Operator's entrypoint script and init containers.
        d.check(os.readlink(os.path.join(out, "bin")) == "usr/bin", "rootfs: merged /usr (/bin)")
        d.check(os.readlink(os.path.join(out, "usr/bin/sh")) == "busybox", "rootfs: /bin/sh")
        d.check(os.path.isfile(os.path.join(out, "usr/share/doc/busybox-static/copyright")),
                "rootfs: busybox's copyright")
        libs = linked_libraries()
        d.check(any("libc.so" in lib for lib in libs), f"ldd found no libc: {libs}")
        for lib in libs:
            rel = lib.lstrip("/")
            rel = "usr/" + (rel[4:] if rel.startswith("usr/") else rel)
            d.check(os.path.isfile(os.path.join(out, rel)), f"rootfs lacks {lib}")
        for name, pkg in static_libraries():
            d.check(not any(f"/lib{name}.so" in lib for lib in libs),
                    f"lib{name} is listed as static but the binary loads it: {libs}")
            d.check(os.path.isfile(os.path.join(out, "usr/share/doc", pkg, "copyright")),
                    f"rootfs lacks the licence of lib{name}, linked statically "
                    f"(/usr/share/doc/{pkg}/copyright)")


def main():
    text = open(DOCKERFILE).read()
    st = stages(instructions(text))
    d.check(list(st) == ["build", "runtime"], f"stages {list(st)}")
    build, runtime = st.get("build", []), st.get("runtime", [])
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.M))
    expand = lambda s: re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), s)  # noqa: E731
    d.check(build and expand(build[0][1]) == "debian:12", f"build stage FROM {build[:1]}")
    d.check(runtime and runtime[0][1] == "scratch", f"runtime stage FROM {runtime[:1]}")

    need_build = {"gcc", "meson", "ninja-build", "pkg-config", "python3", "protobuf-c-compiler",
                  "libnghttp2-dev", "libprotobuf-c-dev", "libyaml-dev", "libjansson-dev",
                  "libmbedtls-dev", "libhttp-parser-dev"}
    # and whatever this build actually linked: the package of each static archive, and
    # lld when the release link order was used (a library added later cannot be missed)
    need_build |= {pkg for _, pkg in static_libraries()}
    exe = os.path.join(d.BUILD, "src", "gpu-device-plugin")
    comment = subprocess.run(["readelf", "-p", ".comment", exe], capture_output=True,
                             text=True).stdout
    if "LLD" in comment:
        need_build.add("lld")
    missing = need_build - apt_packages(build)
    d.check(not missing, f"build stage lacks {sorted(missing)}")
    d.check(not any(w == "RUN" for w, _ in runtime), "the scratch runtime stage runs nothing")
    d.check(re.search(r"rootfs\.sh /build/src/gpu-device-plugin /out\b", text),
            "build stage assembles /out with rootfs.sh")
    copies = [r for w, r in runtime if w == "COPY"]
    d.check(copies == ["--from=build /out/ /"], f"runtime holds only /out: {copies}")
    check_rootfs()

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
    d.check(env.get("PATH") == "/usr/bin", "ENV PATH=/usr/bin (a scratch image has none)")
    d.check(("USER", "0:0") in runtime, "USER 0:0 (the kubelet's socket directory is root's)")
    labels = " ".join(r for w, r in runtime if w == "LABEL")
    for key in ("title", "description", "version", "revision", "source", "licenses"):
        d.check(f"org.opencontainers.image.{key}=" in labels, f"OCI label {key}")
    ignore = open(DOCKERFILE + ".dockerignore").read().split()
    d.check("build-*" in ignore and ".git" in ignore, "build directories kept out of the context")
    d.finish("deploy-dockerfile")


main()
