#!/bin/sh
# The Kubernetes binaries of the e2e cluster, built ONCE per Debian source version of
# `kubernetes` and cached outside the clone: prints the cache's bin directory.
#
#   $GDP_E2E_CACHE (default /var/cache/gpu-device-plugin/e2e)/<version>/bin/
#       kube-apiserver kube-controller-manager kube-scheduler kubelet   built from source
#       kubectl                                                      Debian's kubernetes-client
#
# Debian ships only the client of 1.20; the server binaries come from the same source
# package (the full upstream v1.20.2 tree with vendor/), built with Debian's Go in GOPATH
# mode (module mode fails with Go 1.19 on this tree), all four in one `go build` so shared
# packages compile once. A rerun with the cache present costs a directory test.
set -eu
root=${GDP_E2E_CACHE:-/var/cache/gpu-device-plugin/e2e}
mkdir -p "$root"
# Debian's source packages through a private apt configuration (deb and deb-src for
# bookworm, the machine's archive; lists in the cache, refreshed once a day): nothing under
# /etc/apt is written (tests/common/debian-apt.sh).
# shellcheck disable=SC1091 # tests/common/debian-apt.sh
. "$(dirname "$0")/../common/debian-apt.sh"
debian_apt_config "$root/apt" "deb deb-src" bookworm
(
    flock 8
    if [ -z "$(find "$root/apt/lists" -name '*_Sources' -mtime -1 2>/dev/null)" ]; then
        apt-get update -qq >"$root/apt/update.log" 2>&1 || {
            cat "$root/apt/update.log" >&2; exit 1; }
    fi
) 8>"$root/.apt-lock"
ver=$(apt-cache showsrc kubernetes 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -n1)
[ -n "$ver" ] || { echo "kube-build: no source package 'kubernetes' in $(debian_archive_uri) bookworm (see $root/apt/update.log)" >&2; exit 1; }
# "-r2": the recipe's revision, so binaries built by an older recipe are not reused
# (2: reflect2 1.0.2, below).
cache="$root/$ver-r2"
bins="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"
done_() { for b in $bins; do [ -x "$cache/bin/$b" ] || return 1; done; }
if done_; then echo "$cache/bin"; exit 0; fi

# One builder at a time; a second caller waits and then finds the cache.
exec 9>"$root/.lock"
flock 9
if done_; then echo "$cache/bin"; exit 0; fi

# A failed or interrupted build leaves $work behind: its unpacked source and Go cache make
# the next attempt resume instead of starting over.
work="$cache/build"
if [ ! -f "$work/src/.unpacked" ]; then
    rm -rf "$work"
    mkdir -p "$work/src"
    cd "$work/src"
    echo "kube-build: fetching Debian source kubernetes $ver" >&2
    # Root downloads without apt's _apt sandbox user: its note goes to the log.
    apt-get source -qq "kubernetes=$ver" >/dev/null 2>"$work/apt-source.log" || {
        cat "$work/apt-source.log" >&2; exit 1; }
    touch "$work/src/.unpacked"
fi
cd "$work/src"
tree=$(find . -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
tree=${tree#./}
if [ -z "$tree" ] || [ ! -d "$tree/vendor" ]; then
    echo "kube-build: no vendored tree in $work/src" >&2
    exit 1
fi
# Kubernetes 1.20 vendors modern-go/reflect2 1.0.1, whose unsafe map iteration faults
# under Go >= 1.18: kube-apiserver dies ("fatal error: fault" in mapiterinit, from
# json-iterator) on the first write of a custom resource, such as NFD's NodeFeature
# (modern-go/reflect2 issue 23, fixed in 1.0.2, which later Kubernetes releases vendor).
# Debian's golang-github-modern-go-reflect2-dev is 1.0.2: it replaces the vendored copy.
r2="$tree/vendor/github.com/modern-go/reflect2"
if [ ! -f "$r2/.debian-reflect2" ]; then
    (cd "$work" && rm -rf reflect2 golang-github-modern-go-reflect2-dev_*.deb &&
        apt-get download -qq golang-github-modern-go-reflect2-dev >/dev/null 2>>"$work/apt-source.log" &&
        dpkg-deb -x golang-github-modern-go-reflect2-dev_*.deb reflect2) || {
        cat "$work/apt-source.log" >&2; exit 1; }
    rm -rf "$r2"
    cp -r "$work/reflect2/usr/share/gocode/src/github.com/modern-go/reflect2" "$r2"
    rm -f "$r2/go.mod" "$r2/go.sum"
    touch "$r2/.debian-reflect2"
fi
mkdir -p "$work/gopath/src/k8s.io" "$work/out"
ln -sfn "$work/src/$tree" "$work/gopath/src/k8s.io/kubernetes"
export GOPATH="$work/gopath" GO111MODULE=off GOFLAGS="" GOCACHE="$work/gocache" GOTOOLCHAIN=local
cd "$work/gopath/src/k8s.io/kubernetes"

# kube-apiserver needs pkg/generated/openapi, which upstream's make generates and does not
# ship: the same openapi-gen run as build/root/Makefile.generated_files (every package of
# the tree, staging seen as vendor/, with a +k8s:openapi-gen= tag).
if [ ! -f pkg/generated/openapi/zz_generated.openapi.go ]; then
    echo "kube-build: generating pkg/generated/openapi" >&2
    go build -o "$work/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
    dirs=$(find -H . \( -path './_*' -o -path './.*' -o -path ./vendor -o -path ./debian \) -prune \
               -o -type f -name '*.go' -print \
           | xargs grep -l '^// *+k8s:' | xargs grep -l '+k8s:openapi-gen=' \
           | sed 's|^\./staging/src|vendor|; s|^\./||; s|/[^/]*$||' \
           | grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' \
           | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd, -)
    "$work/openapi-gen" --logtostderr -i "$dirs" -p k8s.io/kubernetes/pkg/generated/openapi \
        -O zz_generated.openapi -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
        -r "$work/openapi-violations.report" 2>"$work/openapi-gen.log" || {
        tail -n 20 "$work/openapi-gen.log" >&2; exit 1; }
fi

# The upstream version the tree is (Debian's version is 1.20.5+really1.20.2-...).
up=$(echo "$ver" | sed -n 's/.*really\([0-9.]*\).*/\1/p')
[ -n "$up" ] || up=$(echo "$ver" | sed 's/[-+~].*//')
major=${up%%.*}; minor=$(echo "$up" | cut -d. -f2)
pkg=k8s.io/kubernetes/vendor/k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=v$up -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"

echo "kube-build: building kube-apiserver kube-controller-manager kube-scheduler kubelet v$up (several minutes, once)" >&2
start=$(date +%s)
go build -tags providerless -trimpath -ldflags "$ldflags" -o "$work/out/" \
    ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubelet
echo "kube-build: built in $(( $(date +%s) - start )) s" >&2

# Debian's kubectl for the same version, unpacked rather than installed.
cd "$work"
apt-get download -qq "kubernetes-client=$ver" >/dev/null 2>>"$work/apt-source.log"
dpkg-deb -x kubernetes-client_*.deb client
cp client/usr/bin/kubectl out/kubectl

"$work/out/kubelet" --version >&2
rm -rf "${cache:?}/bin"
mv "$work/out" "$cache/bin"
# The sources and the Go cache (~1 GB) are not kept: the binaries are the cache.
rm -rf "$work"
echo "$cache/bin"
