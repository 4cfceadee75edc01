#!/bin/sh
# Debian packages downloaded for a test, with nothing installed and /etc/apt untouched: a
# private APT_CONFIG (debian-apt.sh: its own sources list for bookworm and trixie, its own
# lists and cache under WORK_DIR; the machine's archive URI and Debian's keyring), `apt-get update`,
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

# shellcheck disable=SC1091 # tests/common/debian-apt.sh
. "$(dirname "$0")/debian-apt.sh"
apt=$work/apt
log=$work/fetch.log
mkdir -p "$out"
trap 'rm -rf "$apt"' EXIT
debian_apt_config "$apt" deb bookworm trixie
uri=$(debian_archive_uri)
echo "archive $uri" >"$log"
apt-get update -q >>"$log" 2>&1 && (cd "$out" && apt-get download -q "$@" >>"$log" 2>&1)
