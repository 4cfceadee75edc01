#!/bin/sh
# Install the Debian 12 packages the build, the demo and the tests need (idempotent).
# etcd-server and openssl: the kube-apiserver suite (tests/kube/test_kube_apiserver.py).
# lld: the profile-ordered release link (src/link-order.txt, meson option link_order).
# busybox-static: the image's /bin/sh (deployments/container/rootfs.sh).
set -eu
PKGS="gcc git meson ninja-build pkg-config libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
libyaml-dev libjansson-dev protobuf-compiler python3-grpcio python3-protobuf python3-yaml valgrind
golang-go golang-google-grpc-dev golang-google-protobuf-dev libmbedtls-dev libhttp-parser-dev
python3-prometheus-client etcd-server openssl lld busybox-static"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing:$missing" >&2
$SUDO apt-get update -qq >&2 || true
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >&2
