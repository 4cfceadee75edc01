#!/bin/sh
# The runtime image's whole filesystem, built from scratch: the stripped plugin binary, its
# NVIDIA-name symlinks (one per program of NVIDIA's image), every shared library it links
# (as the dynamic loader resolves them on the build machine, which is Debian 12 in both
# callers) with their Debian copyright files, the copyright files of the libraries linked
# into it statically (static-libs.txt), Debian's merged-/usr symlinks (/bin -> usr/bin,
# /lib -> usr/lib, /lib64 -> usr/lib64) and a static busybox as /bin/sh (below). No
# package manager. Both the Dockerfile's build stage and tests/e2e/image.sh run this
# script, so the Dockerfile's image and the locally assembled one hold the same files.
#
# usage: rootfs.sh <gpu-device-plugin binary> <out dir>
# As root it also runs the binary chrooted in <out dir>, proving the tree is self-contained
# (not for a sanitizer build, below).
set -eu
[ $# -eq 2 ] || { echo "usage: rootfs.sh <gpu-device-plugin binary> <out dir>" >&2; exit 2; }
bin=$1
out=$2
mkdir -p "$out/usr/bin" "$out/usr/lib" "$out/usr/lib64"
ln -sfn usr/lib "$out/lib"
ln -sfn usr/lib64 "$out/lib64"
ln -sfn usr/bin "$out/bin"
install -m 0755 -s "$bin" "$out/usr/bin/gpu-device-plugin"
# Every program NVIDIA's image offers, by the name its chart and the GPU Operator run, and
# the name of NVIDIA's DRA kubelet plugin: one binary, which picks the program from the
# name it is run as (src/main.c, config-load.c for gpu-kubelet-plugin).
for name in nvidia-device-plugin gpu-feature-discovery config-manager mps-control-daemon \
        gpu-kubelet-plugin; do
    ln -sf gpu-device-plugin "$out/usr/bin/$name"
done
# The OCI hook of a GPU share's CDI spec (docs/cdi-hook.md), built beside the plugin: the
# plugin copies it from beside itself to the host's kubelet plugins directory, where the
# runtime runs it on the host; it links glibc only, so it needs no library of this tree
# there. Its own binary (not a symlink), since the copy must stand alone. Without it the
# image still works, shares are then enforced by MPS only (the plugin says so).
hook=$(dirname "$bin")/gpu-device-plugin-cdi-hook
if [ -f "$hook" ]; then
    install -m 0755 -s "$hook" "$out/usr/bin/gpu-device-plugin-cdi-hook"
else
    echo "rootfs.sh: note: no $hook beside the plugin (ninja src/gpu-device-plugin-cdi-hook)" >&2
fi

# ldd lines: "libx.so.1 => /lib/x86_64-linux-gnu/libx.so.1 (0x...)" and the loader
# "/lib64/ld-linux-x86-64.so.2 (0x...)". Each is copied (dereferenced) to the same path
# under /usr, which the /lib and /lib64 symlinks make visible at the path ldd printed.
libs=$(ldd "$bin" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (0x.*/\1/p')
[ -n "$libs" ] || { echo "rootfs.sh: ldd found no libraries for $bin" >&2; exit 1; }
for lib in $libs; do
    rel=${lib#/}
    rel=usr/${rel#usr/}
    mkdir -p "$out/$(dirname "$rel")"
    cp -L "$lib" "$out/$rel"
    # The licence of what we redistribute.
    if pkg=$(dpkg -S "$(realpath "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null); then
        pkg=${pkg%%:*}
        if [ -f "/usr/share/doc/$pkg/copyright" ]; then
            mkdir -p "$out/usr/share/doc/$pkg"
            cp "/usr/share/doc/$pkg/copyright" "$out/usr/share/doc/$pkg/copyright"
        fi
    fi
done
# A shell, as NVIDIA's image has one (a static busybox): the GPU Operator runs the plugin
# container as `/bin/sh -c /bin/entrypoint.sh` (a script that waits for its driver
# validation, sources it and execs nvidia-device-plugin) and its init containers as
# `sh -c 'until [ -f ... ]; do sleep 5; done'`. Debian's busybox-static runs its applets
# (sleep, cat, [) without PATH; sh is its only link.
busybox=/bin/busybox
[ -x "$busybox" ] || { echo "rootfs.sh: $busybox missing (Debian's busybox-static)" >&2; exit 1; }
install -m 0755 "$busybox" "$out/usr/bin/busybox"
ln -sf busybox "$out/usr/bin/sh"
mkdir -p "$out/usr/share/doc/busybox-static"
cp /usr/share/doc/busybox-static/copyright "$out/usr/share/doc/busybox-static/copyright"

# The libraries linked statically (meson's static_deps option) are in the binary, not in
# ldd's list; the build writes their names next to it, and their licences ship as well.
static_list=$(dirname "$bin")/static-libs.txt
if [ -f "$static_list" ]; then
    while IFS= read -r name; do
        [ -n "$name" ] || continue
        archive=$(${CC:-cc} -print-file-name="lib$name.a")
        pkg=$(dpkg -S "$(realpath "$archive")" 2>/dev/null || dpkg -S "$archive" 2>/dev/null) ||
            { echo "rootfs.sh: no Debian package owns $archive (lib$name linked statically)" >&2; exit 1; }
        pkg=${pkg%%:*}
        [ -f "/usr/share/doc/$pkg/copyright" ] ||
            { echo "rootfs.sh: /usr/share/doc/$pkg/copyright missing (lib$name)" >&2; exit 1; }
        mkdir -p "$out/usr/share/doc/$pkg"
        cp "/usr/share/doc/$pkg/copyright" "$out/usr/share/doc/$pkg/copyright"
    done < "$static_list"
fi
# A sanitizer build (tests only, never an image) cannot run there: its runtime needs /proc.
if [ "$(id -u)" -eq 0 ] && command -v chroot >/dev/null && ! echo "$libs" | grep -q 'lib[a-z]*san\.so'; then
    chroot "$out" /usr/bin/gpu-device-plugin --version >/dev/null
    chroot "$out" /bin/sh -c '[ -x /usr/bin/nvidia-device-plugin ]' # (applets other than
    # the shell's own builtins re-execute /proc/self/exe: there is no /proc here, in a pod there is)
fi
