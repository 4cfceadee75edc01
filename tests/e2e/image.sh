#!/bin/sh
# The e2e cluster's images, built here without a registry or a container builder, as OCI
# image-layout archives for `ctr images import`:
#   gpu-device-plugin.tar  localhost/gpu-device-plugin:e2e — the product image: the plugin
#                          built as deployments/container/Dockerfile builds it (release,
#                          prefix /usr, werror off), its tree made by the same rootfs.sh,
#                          its config (ENV, ENTRYPOINT, USER, LABEL) read from the
#                          Dockerfile's runtime stage
#   pause.tar              localhost/gdp-e2e/pause:1 — the sandbox (tests/e2e/pause.c, static)
#   busybox.tar            localhost/gdp-e2e/busybox:1 — Debian's busybox-static, for test pods
#
# usage: image.sh <source dir> <work dir> <out dir>; prints the product image's sizes.
set -eu
src=$(realpath "$1")
work=$(realpath -m "$2")
out=$(realpath -m "$3")
here=$(dirname "$(realpath "$0")")
mkdir -p "$work" "$out"

# The product image.
bld=$work/plugin-build
[ -f "$bld/build.ninja" ] || meson setup "$bld" "$src" --buildtype=release --prefix=/usr -Dwerror=false >"$work/meson-setup.log"
ninja -C "$bld" src/gpu-device-plugin >"$work/ninja.log" || { tail -n 30 "$work/ninja.log" >&2; exit 1; }
rm -rf "$work/rootfs"
"$src/deployments/container/rootfs.sh" "$bld/src/gpu-device-plugin" "$work/rootfs"
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
/usr/bin/python3 "$here/oci-image.py" --rootfs "$work/rootfs" --name localhost/gpu-device-plugin:e2e \
    --out "$out/gpu-device-plugin.tar" --dockerfile "$src/deployments/container/Dockerfile" \
    --build-arg "GIT_COMMIT=$commit" >"$out/gpu-device-plugin.json"

# pause
rm -rf "$work/pause-root"
mkdir -p "$work/pause-root"
gcc -static -Os -s -Wall -Wextra -Werror -o "$work/pause-root/pause" "$here/pause.c"
/usr/bin/python3 "$here/oci-image.py" --rootfs "$work/pause-root" --name localhost/gdp-e2e/pause:1 \
    --out "$out/pause.tar" --entrypoint '["/pause"]' >/dev/null

# busybox: the static binary and the applets the test pods use.
rm -rf "$work/busybox-root"
mkdir -p "$work/busybox-root/bin" "$work/busybox-root/tmp"
cp /bin/busybox "$work/busybox-root/bin/busybox"
for app in sh sleep cat ls echo env true; do ln -s busybox "$work/busybox-root/bin/$app"; done
/usr/bin/python3 "$here/oci-image.py" --rootfs "$work/busybox-root" --name localhost/gdp-e2e/busybox:1 \
    --out "$out/busybox.tar" --env PATH=/bin --cmd '["/bin/sh"]' >/dev/null
cat "$out/gpu-device-plugin.json"
