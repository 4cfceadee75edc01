#!/bin/sh
# A plain Debian 12 root filesystem for the CDI tests: what a glibc container image holds
# before any runtime touches it, and nothing of NVIDIA's. From Debian's archive as
# tests/dra/containerd17.sh fetches containerd: nothing is installed and /etc/apt is not
# touched (a private APT_CONFIG with its own sources list, lists and cache under the cache
# directory; the machine's archive URI and keyring), `apt-get download`, `dpkg-deb -x`.
#
# Packages (bookworm), only what a container check needs:
#   libc6           the loader and glibc (libcuda and NVML need nothing else)
#   libc-bin        ldconfig, for `ldconfig -p` inside the container
#   busybox-static  /bin/sh and the few tools a check runs
#   base-files      /etc/debian_version, /etc/os-release (update-ldcache reads the first)
# Laid out merged-/usr as Debian 12 images are (/bin, /sbin, /lib, /lib64 -> usr/...).
# No maintainer script runs: there is no /etc/ld.so.cache (a test makes one with the
# host's `ldconfig -r` when it wants the image's own cache) and no NVIDIA file.
#
# usage: debian-rootfs.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/gpu-device-plugin/debian-rootfs.
#   Prints the rootfs directory (read it, copy it; never change it in place); exits 1 with
#   one line on stderr when the archive cannot be reached. A second run only prints.
set -eu
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache=${1:-${XDG_CACHE_HOME:-$home/.cache}/gpu-device-plugin/debian-rootfs}
rootfs=$cache/rootfs
PACKAGES="libc6 libc-bin busybox-static base-files"

mkdir -p "$cache"
# One fetch at a time (the normal and the sanitizer build may run the test together).
exec 9>"$cache/lock"
flock 9
if [ -f "$rootfs/.complete" ]; then
    echo "$rootfs"
    exit 0
fi

log=$cache/fetch.log
work=$cache/work
rm -rf "$work"
mkdir -p "$work/debs" "$work/root"
pkgs=
for p in $PACKAGES; do pkgs="$pkgs $p/bookworm"; done
# shellcheck disable=SC2086 # one word per package
if ! sh "$(dirname "$0")/../common/debian-download.sh" "$cache" "$work/debs" $pkgs; then
    echo "debian-rootfs.sh: cannot fetch $PACKAGES (bookworm) from Debian's archive (see $log)" >&2
    rm -rf "$work"
    exit 1
fi
for deb in "$work"/debs/*.deb; do
    dpkg-deb -x "$deb" "$work/root"
done
r=$work/root
# merged /usr: the packages still ship /bin, /lib, ...; a Debian 12 image has links there.
for d in bin sbin lib lib64; do
    mkdir -p "$r/usr/$d"
    if [ -d "$r/$d" ] && [ ! -L "$r/$d" ]; then
        cp -a "$r/$d/." "$r/usr/$d/"
        rm -rf "${r:?}/$d"
    fi
    ln -s "usr/$d" "$r/$d"
done
[ -x "$r/usr/bin/busybox" ] || { echo "debian-rootfs.sh: no busybox in $(ls "$work/debs")" >&2; exit 1; }
for tool in sh ls cat readlink grep; do
    ln -sf busybox "$r/usr/bin/$tool"
done
[ -e "$r/usr/lib64/ld-linux-x86-64.so.2" ] && [ -f "$r/etc/debian_version" ] ||
    { echo "debian-rootfs.sh: $r has no loader or /etc/debian_version" >&2; exit 1; }
# Mount points a runtime expects, and what a container never carries.
mkdir -p "$r/dev" "$r/proc" "$r/sys" "$r/tmp" "$r/run" "$r/etc/ld.so.conf.d"
rm -rf "$r/usr/share/doc" "$r/usr/share/man" "$r/usr/share/locale" "$r/usr/share/lintian"
ls "$work/debs" >"$r/.packages"
touch "$r/.complete"
rm -rf "$rootfs"
mv "$r" "$rootfs"
rm -rf "$work"
echo "$rootfs"
