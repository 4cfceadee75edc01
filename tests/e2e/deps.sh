#!/bin/sh
# Debian packages the e2e cluster needs (idempotent): the cluster's daemons, the CNI
# plugins, what builds the Kubernetes binaries from Debian's source package, and what the
# images are made of. kubectl is not installed here: Debian's kubernetes-client conflicts
# with other kubectl packages, so kube-build.sh unpacks it into its cache instead.
# Nothing under /etc/apt is written: kube-build.sh reads Debian's source package through a
# private apt configuration of its own (tests/common/debian-apt.sh), and KUBE_BIN_DIR
# needs none.
set -eu
PKGS="etcd-server containerd runc containernetworking-plugins iptables
busybox-static dpkg-dev golang-go openssl iproute2 util-linux mount python3 python3-yaml gcc libc6-dev"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "e2e deps: installing:$missing" >&2
$SUDO apt-get update -qq >&2 || true
# --no-install-recommends: containerd's and etcd's recommends are not needed here.
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
