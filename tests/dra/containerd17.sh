#!/bin/sh
# containerd 1.7 and runc for tests/dra/test_dra_containerd.py, taken from Debian's archive:
# bookworm's containerd is 1.6, which has no CDI, so containerd comes from trixie; runc from
# bookworm. Nothing is installed and /etc/apt is not touched (tests/common/debian-download.sh),
# `dpkg-deb -x`. The binaries are static Go programs (runc
# links only libseccomp, which bookworm has) and run on Debian 12 as they are.
#
# usage: containerd17.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/gpu-device-plugin/containerd17.
#   Prints the directory holding containerd, containerd-shim-runc-v2, ctr and runc; exits 1
#   with one line on stderr when the archive cannot be reached. A second run only prints.
set -eu
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache=${1:-${XDG_CACHE_HOME:-$home/.cache}/gpu-device-plugin/containerd17}
bin=$cache/bin
BINS="containerd containerd-shim-runc-v2 ctr runc"

have() {
    for b in $BINS; do [ -x "$bin/$b" ] || return 1; done
}

mkdir -p "$cache"
# One fetch at a time (the normal and the sanitizer build may run the test together).
exec 9>"$cache/lock"
flock 9
if have; then
    echo "$bin"
    exit 0
fi

log=$cache/fetch.log
work=$cache/work
rm -rf "$work"
mkdir -p "$work/debs" "$work/root"
if ! sh "$(dirname "$0")/../common/debian-download.sh" "$cache" "$work/debs" \
        containerd/trixie runc/bookworm; then
    echo "containerd17.sh: cannot fetch containerd (trixie) and runc (bookworm)" \
        "from Debian's archive (see $log)" >&2
    rm -rf "$work"
    exit 1
fi
for deb in "$work"/debs/*.deb; do
    dpkg-deb -x "$deb" "$work/root"
done
mkdir -p "$work/bin"
for b in $BINS; do
    f=$(find "$work/root/usr/bin" "$work/root/usr/sbin" -name "$b" -type f 2>/dev/null | head -n1)
    [ -n "$f" ] || { echo "containerd17.sh: $b is not in $(ls "$work/debs")" >&2; exit 1; }
    cp "$f" "$work/bin/$b"
done
ls "$work/debs" >"$work/bin/PACKAGES"
rm -rf "$bin"
mv "$work/bin" "$bin"
rm -rf "$work"
echo "$bin"
