#!/bin/sh
# containerd 1.7 and runc for tests/dra/test_dra_containerd.py, taken from Debian's archive:
# bookworm's containerd is 1.6, which has no CDI, so containerd comes from trixie; runc from
# bookworm. Nothing is installed and /etc/apt is not touched: a private APT_CONFIG (its own
# sources list, lists and cache under the cache directory; the machine's archive URI and
# keyring), `apt-get download`, `dpkg-deb -x`. The binaries are static Go programs (runc
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

# The archive the machine already uses (deb822 or one-line form), as tests/e2e/deps.sh finds it.
uri=$(sed -n 's/^URIs:[[:space:]]*\(http[^[:space:]]*\/debian\)[[:space:]]*$/\1/p' \
      /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
[ -n "$uri" ] || uri=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\/debian\) .*/\2/p' \
      /etc/apt/sources.list 2>/dev/null | head -n1)
[ -n "$uri" ] || uri=http://deb.debian.org/debian

apt=$cache/apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
key=/usr/share/keyrings/debian-archive-keyring.gpg
printf 'deb [signed-by=%s] %s bookworm main\ndeb [signed-by=%s] %s trixie main\n' \
    "$key" "$uri" "$key" "$uri" >"$apt/sources.list"
cat >"$apt/apt.conf" <<EOF
Dir::Etc::sourcelist "$apt/sources.list";
Dir::Etc::sourceparts "-";
Dir::Etc::preferences "$apt/preferences";
Dir::Etc::preferencesparts "-";
Dir::State::Lists "$apt/lists";
Dir::Cache "$apt/cache";
Dir::State::status "/var/lib/dpkg/status";
APT::Get::List-Cleanup "false";
APT::Sandbox::User "$(id -un)";
EOF
export APT_CONFIG="$apt/apt.conf"
log=$cache/fetch.log
work=$cache/work
rm -rf "$work"
mkdir -p "$work/debs" "$work/root"
if ! apt-get update -q >"$log" 2>&1 ||
   ! (cd "$work/debs" && apt-get download -q containerd/trixie runc/bookworm >>"$log" 2>&1); then
    echo "containerd17.sh: cannot fetch containerd (trixie) and runc (bookworm)" \
        "from $uri (see $log)" >&2
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
# The package lists (~40 MB) are not needed once the binaries are there.
rm -rf "$work" "$apt"
echo "$bin"
