#!/bin/sh
# The e2e single-node cluster's lifecycle: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, containerd + runc (through sim-runtime.py, the stand-in for the NVIDIA
# container runtime), a bridge CNI and the kubelet on its real default root /var/lib/kubelet.
# Certificates and tokens are made per run. The Kubernetes binaries are any release from 1.20
# to 1.36 (CI: Debian's 1.20, kube-build.sh); the flags each takes are chosen by the version
# it reports (choose_kube_flags). The rest is Debian 12's, containerd optionally not.
#
#   cluster.sh up <kube bin dir> <log dir> <nvml sim library> <profile>
#       (env CONTAINERD_BIN_DIR: a directory with containerd, containerd-shim-runc-v2 and ctr
#       to use instead of the ones on PATH, e.g. a containerd 1.7 for CDI;
#       env GDP_E2E_FEATURE_GATES: "Gate=true,Other=false", given to every component, e.g.
#       DRADeviceTaints=true,ResourceHealthStatus=true on 1.34 for the dra scenario's taint and
#       pod-status checks; env GDP_E2E_RUNTIME_CONFIG: kube-apiserver --runtime-config, e.g.
#       resource.k8s.io/v1alpha3=true for DeviceTaintRules)
#   cluster.sh down             stop every daemon by PID, unmount, remove cgroups and state
#   cluster.sh kubelet-restart  stop the kubelet by PID and start it again, same arguments
#   cluster.sh import <oci archive>...   into containerd's k8s.io namespace
#
# State lives in $GDP_E2E_STATE (default /var/lib/gdp-e2e): pid files, certificates,
# containerd's root, etcd's data. `down` removes it; `up` first runs `down` if a previous
# run left it behind (a killed run), so a run always starts from nothing.
set -eu
STATE=${GDP_E2E_STATE:-/var/lib/gdp-e2e}
# The node is named localhost: the API server reaches the kubelet (logs) at its Hostname
# address, and a loopback --node-ip is refused by the kubelet, so the name is what keeps
# that connection on 127.0.0.1.
NODE=localhost
KUBELET_ROOT=/var/lib/kubelet
ETCD_PORT=23790
API_PORT=16443
SOCK=$STATE/containerd.sock
BRIDGE=gdpe2e0
SELF=$(realpath "$0")
HERE=$(dirname "$SELF")

say() { echo "e2e: $*" >&2; }
die() { say "$*"; exit 1; }

# --- daemons, by PID ------------------------------------------------------------------------

# start NAME CMD...: in its own session (a Ctrl-C on the terminal reaches only the runner,
# whose trap tears down in order), output to $LOGS/NAME.log.
start() {
    name=$1
    shift
    setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
    echo $! >"$STATE/pids/$name"
}

# alive NAME: its pid file names a live process running the binary we started.
alive() {
    [ -f "$STATE/pids/$1" ] || return 1
    pid=$(cat "$STATE/pids/$1")
    [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$(cat "$STATE/pids/$1.bin" 2>/dev/null || echo "$1")"
}

stop() {
    name=$1
    if alive "$name"; then
        pid=$(cat "$STATE/pids/$name")
        kill -TERM "$pid" 2>/dev/null || true
        i=0
        while [ -d "/proc/$pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        if [ -d "/proc/$pid" ]; then
            say "$name (pid $pid) ignored SIGTERM for 10 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$STATE/pids/$name"
}

# wait_for WHAT SECONDS CMD...: poll CMD until it succeeds.
wait_for() {
    what=$1 secs=$2
    shift 2
    i=0
    until "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -le $((secs * 5)) ] || die "$what not up after $secs s (logs: $LOGS)"
        sleep 0.2
    done
}

kctl() { "$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }
ctr_() { "$CTR" --address "$SOCK" "$@"; }

# --- versions: the one place that maps a release to its flags and config fields -------------
#
# Every binary is asked for its own version (a kubelet and a control plane may differ), and
# sets what that release takes. Kubernetes 1.20 to 1.36 are meant; the flags not listed
# here are the same across that range.

# kube_minor BINARY: N of the "Kubernetes v1.N.x" the binary prints.
kube_minor() {
    v=$("$1" --version 2>/dev/null | sed -n 's/^Kubernetes v1\.\([0-9][0-9]*\)\..*/\1/p')
    [ -n "$v" ] || die "$1 --version does not say 'Kubernetes v1.N.x' (a build without the version ldflags?)"
    [ "$v" -ge 20 ] || die "$1 is Kubernetes 1.$v: this cluster needs 1.20 or newer"
    [ "$v" -le 36 ] || say "$1 is Kubernetes 1.$v: newer than the 1.36 this script knows; trying anyway"
    echo "$v"
}

# Sets APISERVER_FLAGS, KCM_FLAGS, SCHEDULER_FLAGS, KUBELET_FLAGS and KUBELET_CONFIG (lines
# appended to kubelet.yaml) from $BIN's binaries.
choose_kube_flags() {
    api=$(kube_minor "$BIN/kube-apiserver")
    kcm=$(kube_minor "$BIN/kube-controller-manager")
    sch=$(kube_minor "$BIN/kube-scheduler")
    kl=$(kube_minor "$BIN/kubelet")
    APISERVER_FLAGS="" KCM_FLAGS="" SCHEDULER_FLAGS="" KUBELET_FLAGS="" KUBELET_CONFIG=""
    # The unauthenticated HTTP ports, off: kube-apiserver --insecure-port (hidden and
    # without effect in 1.20) and the controller-manager's and scheduler's --port (default
    # 10252 and 10251 in 1.20) were removed in 1.24.
    if [ "$api" -lt 24 ]; then APISERVER_FLAGS="--insecure-port 0"; fi
    if [ "$kcm" -lt 24 ]; then KCM_FLAGS="--port 0"; fi
    if [ "$sch" -lt 24 ]; then SCHEDULER_FLAGS="--port 0"; fi
    # The CRI endpoint: flags before 1.27 (--container-runtime remote: the default was
    # docker until dockershim went in 1.24; the flag was removed in 1.27); from 1.27 the
    # KubeletConfiguration field containerRuntimeEndpoint (the flag is deprecated).
    if [ "$kl" -lt 27 ]; then
        KUBELET_FLAGS="--container-runtime remote --container-runtime-endpoint unix://$SOCK"
    else
        KUBELET_CONFIG="containerRuntimeEndpoint: unix://$SOCK"
    fi
    # cgroup v1 (this script's cgroupfs driver works on both): in maintenance from 1.31,
    # whose kubelet has failCgroupV1 (default false); 1.35 defaults it to true, so the
    # kubelet refuses to start on a v1 host unless told otherwise.
    if [ "$kl" -ge 31 ] && [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
        KUBELET_CONFIG="$KUBELET_CONFIG
failCgroupV1: false"
    fi
    # Not passed at any version, so nothing to choose: kubelet --network-plugin/--cni-*
    # (removed in 1.24; CNI is containerd's, its cni bin_dir/conf_dir below),
    # --pod-infra-container-image (the sandbox image is containerd's sandbox_image),
    # --logtostderr (removed from the components in 1.26). KubeletConfiguration stays
    # kubelet.config.k8s.io/v1beta1 throughout (there is no v1).
    # Feature gates, the same to every component (alpha ones must agree between the API
    # server, the scheduler and the kubelet); the kubelet takes them in its config.
    gates=${GDP_E2E_FEATURE_GATES:-}
    if [ -n "$gates" ]; then
        case $gates in *[!A-Za-z0-9=,]*) die "GDP_E2E_FEATURE_GATES '$gates': want Gate=true,Other=false" ;; esac
        APISERVER_FLAGS="$APISERVER_FLAGS --feature-gates $gates"
        KCM_FLAGS="$KCM_FLAGS --feature-gates $gates"
        SCHEDULER_FLAGS="$SCHEDULER_FLAGS --feature-gates $gates"
        KUBELET_CONFIG="$KUBELET_CONFIG
featureGates: {$(echo "$gates" | sed 's/=/: /g; s/,/, /g')}"
        say "feature gates: $gates"
    fi
    rc=${GDP_E2E_RUNTIME_CONFIG:-}
    if [ -n "$rc" ]; then
        case $rc in *[!A-Za-z0-9=,./]*) die "GDP_E2E_RUNTIME_CONFIG '$rc': want group/version=true,..." ;; esac
        APISERVER_FLAGS="$APISERVER_FLAGS --runtime-config $rc"
        say "kube-apiserver --runtime-config $rc"
    fi
    say "Kubernetes: kube-apiserver 1.$api, kube-controller-manager 1.$kcm, kube-scheduler 1.$sch, kubelet 1.$kl"
}

# containerd and ctr: from $CONTAINERD_BIN_DIR when given (its shim too), else from PATH.
containerd_bins() {
    CONTAINERD=containerd CTR=ctr
    [ -n "${CONTAINERD_BIN_DIR:-}" ] || return 0
    for b in containerd containerd-shim-runc-v2; do
        [ -x "$CONTAINERD_BIN_DIR/$b" ] || die "CONTAINERD_BIN_DIR: no executable $CONTAINERD_BIN_DIR/$b"
    done
    CONTAINERD=$CONTAINERD_BIN_DIR/containerd
    if [ -x "$CONTAINERD_BIN_DIR/ctr" ]; then CTR=$CONTAINERD_BIN_DIR/ctr; fi
}

# containerd: CRI config version 2 for 1.6 and 1.7; CDI (enable_cdi, cdi_spec_dirs) from
# 1.7 (1.6 has none). Sets CONTAINERD_CRI_EXTRA.
choose_containerd_flags() {
    cv=$("$CONTAINERD" --version | awk '{print $3}' | sed 's/^v//')
    cmaj=${cv%%.*} cmin=$(echo "$cv" | cut -d. -f2)
    case $cmaj$cmin in *[!0-9]*|"") die "$CONTAINERD --version: no version in '$cv'" ;; esac
    CONTAINERD_CRI_EXTRA=""
    if [ "$cmaj" -gt 1 ] || [ "$cmin" -ge 7 ]; then
        CONTAINERD_CRI_EXTRA='enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]'
    fi
    say "containerd $cv ($CONTAINERD)${CONTAINERD_CRI_EXTRA:+, CDI on}"
}

# --- certificates and tokens ----------------------------------------------------------------

certs() {
    p=$STATE/pki
    mkdir -p "$p"
    (
        cd "$p"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
            -subj /CN=gdp-e2e-ca 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n' >san.ext
        openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
            -subj /CN=kube-apiserver 2>/dev/null
        openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out apiserver.crt -days 2 -extfile san.ext 2>/dev/null
        # The API server's client certificate towards the kubelet (logs, exec).
        openssl req -newkey rsa:2048 -nodes -keyout apiserver-kubelet.key -out apiserver-kubelet.csr \
            -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
        openssl x509 -req -in apiserver-kubelet.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out apiserver-kubelet.crt -days 2 2>/dev/null
        openssl genrsa -out sa.key 2048 2>/dev/null
        openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    )
    # One random bearer token per identity. The kubelet is a real node identity (Node
    # authorizer + NodeRestriction); the controller-manager and the scheduler run with
    # system:masters to keep this file short (no per-controller service accounts).
    : >"$p/tokens.csv"
    for who in admin kubelet controller-manager scheduler; do
        tok=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
        case $who in
        admin) echo "$tok,e2e-admin,uid-admin,system:masters" >>"$p/tokens.csv" ;;
        kubelet) echo "$tok,system:node:$NODE,uid-node,system:nodes" >>"$p/tokens.csv" ;;
        controller-manager) echo "$tok,system:kube-controller-manager,uid-kcm,system:masters" >>"$p/tokens.csv" ;;
        scheduler) echo "$tok,system:kube-scheduler,uid-sched,system:masters" >>"$p/tokens.csv" ;;
        esac
        cat >"$STATE/$who.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$p/ca.crt"}
users:
- name: $who
  user: {token: "$tok"}
contexts:
- name: e2e
  context: {cluster: e2e, user: $who}
current-context: e2e
EOF
    done
    chmod 600 "$p"/*.key "$p/tokens.csv" "$STATE"/*.kubeconfig
}

# --- the node: containerd, CNI, the simulated driver, the kubelet ---------------------------

node_files() {
    nvml=$1 profile=$2
    # The simulated driver: the library, and its run directory (profile, control FIFO, acks).
    mkdir -p "$STATE/driver/run" "$STATE/bin" "$STATE/cni" "$STATE/cni-ipam"
    cp "$nvml" "$STATE/driver/libnvidia-ml.so.1"
    cp "$profile" "$STATE/driver/run/profile.yaml"
    mkfifo -m 600 "$STATE/driver/run/ctl"
    : >"$STATE/driver/run/ack"
    cat >"$STATE/bin/nvidia-sim-runtime" <<EOF
#!/bin/sh
exec /usr/bin/python3 "$HERE/sim-runtime.py" --driver "$STATE/driver" --runc "$(command -v runc)" -- "\$@"
EOF
    chmod 755 "$STATE/bin/nvidia-sim-runtime"

    cat >"$STATE/cni/10-gdp-e2e.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "gdp-e2e", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$STATE/cni-ipam",
            "ranges": [[{"subnet": "10.251.0.0/24"}]]}}]}
EOF

    # restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and runc fails every sandbox
    # lowering its oom_score_adj without it.
    cat >"$STATE/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = "$SOCK.debug"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/gdp-e2e/pause:1"
  restrict_oom_score_adj = true
  enable_selinux = false
  $CONTAINERD_CRI_EXTRA
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$STATE/bin/nvidia-sim-runtime"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni"
EOF

    cat >"$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
cgroupDriver: cgroupfs
failSwapOn: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$STATE/pki/ca.crt"}
authorization: {mode: AlwaysAllow}
# A shared build machine: only a really full disk or memory may evict the test's pods,
# and images imported without a registry must never be collected.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
# Device health reaches the node's allocatable at the kubelet's next status check: every
# 2 s instead of 10 s, so that the Xid scenario sees a short Unhealthy window.
nodeStatusUpdateFrequency: 2s
# A deleted pod's object goes only once the container GC (every minute, fixed) has removed
# its sandbox and then its pod worker runs again: at the periodic resync, every
# syncFrequency (1 min, plus up to half of it as jitter). Replacing a DaemonSet's pod (a
# new one comes only once the old object is gone) took 45-60 s of idle waiting in several
# scenarios, for a plugin that exits in 1 s; 10 s leaves the GC's share.
syncFrequency: 10s
# No KUBE-* iptables chains: they would outlive the run on a machine that is not a node.
makeIPTablesUtilChains: false
resolvConf: /etc/resolv.conf
$KUBELET_CONFIG
EOF
}

kubelet_start() {
    echo kubelet >"$STATE/pids/kubelet.bin"
    # shellcheck disable=SC2086 # KUBELET_FLAGS: words without blanks of their own
    start kubelet "$BIN/kubelet" --config "$STATE/kubelet.yaml" \
        --kubeconfig "$STATE/kubelet.kubeconfig" --root-dir "$KUBELET_ROOT" \
        $KUBELET_FLAGS --hostname-override "$NODE" --v 2
    wait_for "kubelet healthz" 60 kubelet_healthy
}

kubelet_healthy() {
    # No curl dependency: Debian's python3, which the scenarios need anyway.
    /usr/bin/python3 -c 'import urllib.request,sys; sys.exit(urllib.request.urlopen("http://127.0.0.1:10248/healthz", timeout=2).read() != b"ok")'
}

# --- up -------------------------------------------------------------------------------------

up() {
    BIN=$1 LOGS=$2
    nvml=$3 profile=$4
    # In a subshell: down reads the earlier run's env (its BIN, LOGS, CONTAINERD_BIN_DIR).
    if [ -d "$STATE" ]; then
        say "state of an earlier run in $STATE: tearing it down first"
        (down) || die "the earlier run's teardown is incomplete"
    fi
    [ -e "$KUBELET_ROOT" ] && die "$KUBELET_ROOT exists and is not this test's (another kubelet?); not touching it"
    for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
        [ -x "$BIN/$b" ] || die "no executable $BIN/$b"
    done
    choose_kube_flags
    containerd_bins
    choose_containerd_flags
    mkdir -p "$STATE/pids" "$LOGS"
    printf "BIN='%s'\nLOGS='%s'\nCONTAINERD_BIN_DIR='%s'\n" "$BIN" "$LOGS" "${CONTAINERD_BIN_DIR:-}" >"$STATE/env"
    # What existed before us, so teardown removes only what this run made: the chart's
    # hostPath directories and their parents (the kubelet creates them, DirectoryOrCreate),
    # the CDI spec directories (a containerd 1.7 watches them), the CNI
    # cache, containerd's fixed runtime directory (shim sockets, runc state), the sandboxes'
    # netns directory and the kubelet's pod logs.
    ls /var/run/netns 2>/dev/null >"$STATE/netns.before" || true
    # The CDI specs already there (the directories may exist, another test's): down
    # removes the plugin's specs this run left (a claim's whose pod was never unprepared,
    # the device plugin's), and no other file.
    find /etc/cdi /var/run/cdi -maxdepth 1 -type f 2>/dev/null >"$STATE/cdi.before" || true
    for d in /run/nvidia /run/nvidia/mps /etc/kubernetes /etc/kubernetes/node-feature-discovery \
        /etc/cdi /var/run/cdi /var/lib/cni /run/containerd /var/run/netns /var/log/pods /var/log/containers; do
        [ -e "$d" ] || echo "$d" >>"$STATE/made-dirs"
    done
    mkdir -p "$KUBELET_ROOT"
    touch "$STATE/made-kubelet-root"
    certs
    node_files "$nvml" "$profile"

    echo etcd >"$STATE/pids/etcd.bin"
    start etcd etcd --name gdp-e2e --data-dir "$STATE/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
        --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
        --initial-cluster "gdp-e2e=http://127.0.0.1:$((ETCD_PORT + 10))"

    p=$STATE/pki
    echo kube-apiserver >"$STATE/pids/kube-apiserver.bin"
    # shellcheck disable=SC2086 # the *_FLAGS: words without blanks of their own
    start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" $APISERVER_FLAGS \
        --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
        --client-ca-file "$p/ca.crt" --token-auth-file "$p/tokens.csv" \
        --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
        --allow-privileged=true \
        --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-cluster-ip-range 10.0.0.0/24 --endpoint-reconciler-type none \
        --kubelet-client-certificate "$p/apiserver-kubelet.crt" --kubelet-client-key "$p/apiserver-kubelet.key" \
        --kubelet-preferred-address-types Hostname
    wait_for "kube-apiserver" 90 kctl get --raw /readyz

    echo kube-controller-manager >"$STATE/pids/kube-controller-manager.bin"
    # shellcheck disable=SC2086
    start kube-controller-manager "$BIN/kube-controller-manager" \
        --kubeconfig "$STATE/controller-manager.kubeconfig" --bind-address 127.0.0.1 $KCM_FLAGS \
        --leader-elect=false --service-account-private-key-file "$p/sa.key" \
        --root-ca-file "$p/ca.crt" --use-service-account-credentials=false
    echo kube-scheduler >"$STATE/pids/kube-scheduler.bin"
    # shellcheck disable=SC2086
    start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$STATE/scheduler.kubeconfig" \
        --bind-address 127.0.0.1 $SCHEDULER_FLAGS --leader-elect=false

    echo containerd >"$STATE/pids/containerd.bin"
    # PATH: containerd finds its shim (containerd-shim-runc-v2) there.
    start containerd env PATH="${CONTAINERD_BIN_DIR:+$CONTAINERD_BIN_DIR:}$PATH" \
        "$CONTAINERD" --config "$STATE/containerd.toml"
    wait_for "containerd" 30 ctr_ version
    kubelet_start
    wait_for "node $NODE Ready" 120 node_ready
    say "cluster up: node $NODE Ready (state $STATE, logs $LOGS)"
}

node_ready() {
    [ "$(kctl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

import_images() {
    for tar in "$@"; do
        ctr_ -n k8s.io images import --no-unpack=false "$tar" >/dev/null
    done
}

# --- down -----------------------------------------------------------------------------------

# Mount points at or under a directory, deepest first.
mounts_under() {
    awk -v p="$1" '$5 == p || index($5, p "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

unmount_under() {
    for m in $(mounts_under "$1"); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "cannot unmount $m"
    done
}

down() {
    [ -d "$STATE" ] || return 0
    # shellcheck disable=SC1091
    [ -f "$STATE/env" ] && . "$STATE/env"
    LOGS=${LOGS:-/tmp}
    containerd_bins
    stop kubelet
    # Every container and sandbox task of this containerd: killed, deleted (which unmounts
    # their root filesystems), while containerd still runs.
    if alive containerd; then
        for t in $(timeout 20 "$CTR" --address "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
            timeout 10 "$CTR" --address "$SOCK" -n k8s.io tasks kill -a -s SIGKILL "$t" >/dev/null 2>&1 || true
        done
        for t in $(timeout 20 "$CTR" --address "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
            timeout 10 "$CTR" --address "$SOCK" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true
        done
    fi
    # Whatever still runs in the pods' cgroups (a task containerd lost track of).
    for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
        [ -d "$cg" ] || continue
        find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do
            kill -KILL "$pid" 2>/dev/null || true
        done
    done
    # The runc shims this containerd started (they outlive it otherwise): found by the
    # address they were given, which is this run's socket.
    for d in /proc/[0-9]*; do
        cmd=$( { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) || continue
        case $cmd in
        *containerd-shim*"-address $SOCK "*) kill -KILL "${d#/proc/}" 2>/dev/null || true ;;
        esac
    done
    for name in containerd kube-scheduler kube-controller-manager kube-apiserver etcd; do
        stop "$name"
    done

    # Mounts: the kubelet's (it bind-mounts its root onto itself; pod volumes), containerd's
    # (rootfs, shm), and the network namespaces of this run's sandboxes.
    unmount_under "$KUBELET_ROOT"
    unmount_under "$STATE"
    for ns in /var/run/netns/cni-*; do
        [ -e "$ns" ] || continue
        ns=${ns##*/}
        grep -qx "$ns" "$STATE/netns.before" 2>/dev/null && continue
        umount "/var/run/netns/$ns" 2>/dev/null || umount -l "/var/run/netns/$ns" 2>/dev/null || true
        rm -f "/var/run/netns/$ns"
    done
    ip link del "$BRIDGE" 2>/dev/null || true
    # CDI specs of the plugin (gpu.nvidia.com's claims, staged ones too, and the device
    # plugin's) that were not there before the run: a run stopped or failed before its
    # pods were unprepared leaves no spec behind for the next containerd to apply.
    for f in /etc/cdi/*nvidia.com* /etc/cdi/.*nvidia.com* /var/run/cdi/*nvidia.com* /var/run/cdi/.*nvidia.com*; do
        [ -f "$f" ] || continue
        case ${f##*/} in
        k8s.gpu.nvidia.com-claim_* | .k8s.gpu.nvidia.com-claim_* | k8s.device-plugin.nvidia.com-*) ;;
        *) continue ;;
        esac
        grep -qxF "$f" "$STATE/cdi.before" 2>/dev/null && continue
        rm -f "$f" && say "removed $f (left by this run)"
    done

    # cgroups: the kubelet's kubepods tree in every hierarchy, leaves first (a cgroup can
    # only be removed empty; the kill above emptied them, the kernel may take a moment).
    for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
        [ -d "$cg" ] || continue
        i=0
        while [ -d "$cg" ] && [ $i -lt 50 ]; do
            find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
            [ -d "$cg" ] && sleep 0.1
            i=$((i + 1))
        done
        [ -d "$cg" ] && say "cannot remove cgroup $cg"
    done

    if [ -f "$STATE/made-kubelet-root" ]; then
        [ -z "$(mounts_under "$KUBELET_ROOT")" ] && rm -rf "$KUBELET_ROOT"
    fi
    [ -f "$STATE/made-dirs" ] && while read -r d; do rm -rf "$d"; done <"$STATE/made-dirs"
    if [ -z "$(mounts_under "$STATE")" ]; then
        rm -rf "$STATE"
    else
        say "mounts left under $STATE: not removed"
        return 1
    fi
}

# --- entry ----------------------------------------------------------------------------------

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
up) [ $# -eq 4 ] || die "usage: cluster.sh up <kube bin dir> <log dir> <nvml library> <profile>"
    up "$@" ;;
down) down ;;
kubelet-restart)
    # shellcheck disable=SC1091
    . "$STATE/env"
    choose_kube_flags
    stop kubelet
    kubelet_start ;;
import)
    # shellcheck disable=SC1091
    . "$STATE/env"
    containerd_bins
    import_images "$@" ;;
*) die "usage: cluster.sh up|down|kubelet-restart|import" ;;
esac
