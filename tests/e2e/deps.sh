#!/bin/sh
# Debian packages the e2e cluster needs (idempotent): the cluster's daemons, the CNI
# plugins, what builds the Kubernetes binaries from Debian's source package, and what the
# images are made of. kubectl is not installed here: Debian's kubernetes-client conflicts
# with other kubectl packages, so kube-build.sh unpacks it into its cache instead.
# Also the deb-src entry `apt-get source kubernetes` needs, pointing at the same Debian
# archive as the machine's own deb entry.
set -eu
PKGS="etcd-server containerd runc containernetworking-plugins iptables
busybox-static dpkg-dev golang-go openssl iproute2 util-linux mount python3 python3-yaml gcc libc6-dev"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
updated=""

# deb-src for bookworm from the archive the machine already uses (deb822 or one-line form).
src=/etc/apt/sources.list.d/gdp-e2e-deb-src.sources
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    uri=$(sed -n 's/^URIs:[[:space:]]*\(http[^[:space:]]*\/debian\)[[:space:]]*$/\1/p' \
          /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
    [ -n "$uri" ] || uri=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\/debian\) .*/\2/p' \
          /etc/apt/sources.list 2>/dev/null | head -n1)
    [ -n "$uri" ] || { echo "e2e deps: no Debian archive URI in the apt sources" >&2; exit 1; }
    printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$uri" | $SUDO tee "$src" >/dev/null
    $SUDO apt-get update -qq >&2
    updated=1
fi

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "e2e deps: installing:$missing" >&2
[ -n "$updated" ] || $SUDO apt-get update -qq >&2 || true
# --no-install-recommends: containerd's and etcd's recommends are not needed here.
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
