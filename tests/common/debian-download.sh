#!/bin/sh
# Debian packages downloaded for a test, with nothing installed and /etc/apt untouched: a
# private APT_CONFIG (its own sources list for bookworm and trixie, its own lists and cache
# under WORK_DIR; the machine's archive URI and Debian's keyring), `apt-get update`,
# `apt-get download`. The callers (tests/dra/containerd17.sh, tests/cdi/debian-rootfs.sh)
# unpack what they need with `dpkg-deb -x`.
#
# usage: debian-download.sh WORK_DIR OUT_DIR PACKAGE/SUITE...
#   The .debs land in OUT_DIR; apt's output in WORK_DIR/fetch.log. Exit 1 when the archive
#   cannot be reached or a package is missing; the caller says so in its own words (the
#   archive's URI is the first line of the log). The package lists (~40 MB) are removed
#   either way.
set -eu
work=$1
out=$2
shift 2

# The archive the machine already uses (deb822 or one-line form), as tests/e2e/deps.sh finds it.
uri=$(sed -n 's/^URIs:[[:space:]]*\(http[^[:space:]]*\/debian\)[[:space:]]*$/\1/p' \
      /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
[ -n "$uri" ] || uri=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\/debian\) .*/\2/p' \
      /etc/apt/sources.list 2>/dev/null | head -n1)
[ -n "$uri" ] || uri=http://deb.debian.org/debian

apt=$work/apt
log=$work/fetch.log
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$out"
trap 'rm -rf "$apt"' EXIT
key=/usr/share/keyrings/debian-archive-keyring.gpg
printf 'deb [signed-by=%s] %s bookworm main\ndeb [signed-by=%s] %s trixie main\n' \
    "$key" "$uri" "$key" "$uri" >"$apt/sources.list"
cat >"$apt/apt.conf" <<CONF
Dir::Etc::sourcelist "$apt/sources.list";
Dir::Etc::sourceparts "-";
Dir::Etc::preferences "$apt/preferences";
Dir::Etc::preferencesparts "-";
Dir::State::Lists "$apt/lists";
Dir::Cache "$apt/cache";
Dir::State::status "/var/lib/dpkg/status";
APT::Get::List-Cleanup "false";
APT::Sandbox::User "$(id -un)";
CONF
export APT_CONFIG="$apt/apt.conf"
echo "archive $uri" >"$log"
apt-get update -q >>"$log" 2>&1 && (cd "$out" && apt-get download -q "$@" >>"$log" 2>&1)
