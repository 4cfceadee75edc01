#!/bin/sh
# The e2e suite (meson test --suite e2e, or scripts/test.sh): a real single-node Kubernetes
# built from Debian's archive, the product image built here, the shipped manifests applied
# as an operator would, the scenarios of scenarios.py. Torn down on success, failure and
# Ctrl-C. Where it cannot run (not root, no cgroups) it says so in one line and skips
# (exit 77) — except under CI=true, where that is a failure.
#
# usage: run.sh   (env: GDP_SOURCE_DIR, GDP_BUILD_DIR as meson sets them; GDP_E2E_PROFILE)
#   KUBE_BIN_DIR=<dir>        kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
#                             and kubectl of any release 1.20-1.36, instead of kube-build.sh's
#   CONTAINERD_BIN_DIR=<dir>  containerd, containerd-shim-runc-v2 (and ctr) instead of PATH's
#                             (a containerd 1.7 turns CDI on; Debian 12's 1.6 has none)
set -eu
here=$(dirname "$(realpath "$0")")
src=$(realpath "${GDP_SOURCE_DIR:-$here/../..}")
build=$(realpath "${GDP_BUILD_DIR:?GDP_BUILD_DIR: the meson build directory}")
profile=$(realpath "${GDP_E2E_PROFILE:-$src/sim/profiles/topo-dgx1-v100.yaml}")
logs=$build/meson-logs/e2e
t0=$(date +%s)

cannot() {
    if [ "${CI:-}" = true ]; then
        echo "e2e: cannot run here: $* (CI=true: failing, not skipping)" >&2
        exit 1
    fi
    echo "e2e: skipped: $*" >&2
    exit 77
}
[ "$(id -u)" -eq 0 ] || cannot "needs root (it runs a kubelet and containerd, mounts, creates cgroups)"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    [ -w /sys/fs/cgroup ] || cannot "cgroup v2 at /sys/fs/cgroup is not writable"
else
    for c in cpu memory pids; do
        [ -w "/sys/fs/cgroup/$c" ] || cannot "no writable cgroup hierarchy /sys/fs/cgroup/$c"
    done
fi
grep -qw overlay /proc/filesystems || cannot "no overlay filesystem (containerd's snapshotter)"

# meson's test environment points LD_LIBRARY_PATH at the simulated NVML for the other
# suites; the cluster's daemons get the driver the way a node does (sim-runtime.py) or not at all.
unset LD_LIBRARY_PATH MALLOC_PERTURB_

elapsed() { echo "$(( $(date +%s) - t0 )) s"; }
sh "$here/deps.sh"
if [ -n "${KUBE_BIN_DIR:-}" ]; then
    bin=$(realpath "$KUBE_BIN_DIR") # cluster.sh up checks what is in it
else
    bin=$(sh "$here/kube-build.sh")
fi
if [ -n "${CONTAINERD_BIN_DIR:-}" ]; then
    CONTAINERD_BIN_DIR=$(realpath "$CONTAINERD_BIN_DIR")
    export CONTAINERD_BIN_DIR
fi
echo "e2e: Kubernetes binaries in $bin ($(elapsed))"
sh "$here/image.sh" "$src" "$build/e2e-image" "$build/e2e-image/out" | /usr/bin/python3 -c '
import json, sys
i = json.load(sys.stdin)
print("e2e: image %(name)s: %(compressed)d bytes compressed, %(uncompressed)d bytes unpacked" % i)'
echo "e2e: images built ($(elapsed))"

rm -rf "$logs"
mkdir -p "$logs"
teardown() {
    t1=$(date +%s)
    if sh "$here/cluster.sh" down; then
        echo "e2e: torn down in $(( $(date +%s) - t1 )) s; total $(elapsed)"
    else
        echo "e2e: teardown incomplete (see above)" >&2
        return 1
    fi
}
# shellcheck disable=SC2154 # rc is assigned inside the trap
trap 'rc=$?; trap - EXIT INT TERM; teardown || rc=1; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sh "$here/cluster.sh" up "$bin" "$logs" "$build/sim/nvml/libnvidia-ml.so.1" "$profile"
sh "$here/cluster.sh" import "$build/e2e-image/out/pause.tar" "$build/e2e-image/out/busybox.tar" \
    "$build/e2e-image/out/gpu-device-plugin.tar"
echo "e2e: cluster up, images imported ($(elapsed))"
state=${GDP_E2E_STATE:-/var/lib/gdp-e2e}
/usr/bin/python3 "$here/scenarios.py" --kubectl "$bin/kubectl" --kubeconfig "$state/admin.kubeconfig" \
    --cluster "$here/cluster.sh" --state "$state" --profile "$profile" \
    --helm-render "$build/tests/deploy/helm-render" --source "$src" || {
    echo "e2e: scenarios failed; daemon logs in $logs" >&2
    exit 1
}
echo "e2e: scenarios done ($(elapsed))"
