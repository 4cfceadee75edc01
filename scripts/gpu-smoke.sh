#!/bin/sh
# gpu-smoke.sh: the plugin's own checks on a real GPU host that has an NVIDIA driver and
# nothing else (no compiler, no package manager, no Python, no network, any glibc).
#
#   scripts/gpu-smoke.sh bundle [--build-dir DIR] [--no-build] [OUT.tar.gz]
#       HERE, in the source tree: build (default: a release build in build-gpu-smoke/),
#       collect the plugin, the static go-client, bench-topo, bench-metrics, the fake API
#       server of tests/kube and cdi-apply with every shared library they need (glibc
#       included, libnvidia-ml excluded) and the ELF loader into DIR/gpu-smoke/, with
#       rootfs/ (Debian's glibc and cuda-probe: section 8's container),
#       tests/cdi/gpu-smoke-container.sh (section 8) and tests/dra/gpu-smoke-shares.sh
#       (section 9), and write OUT (default DIR/gpu-smoke.tar.gz) with this script
#       inside. Build it right before use: a bundle is never committed.
#   ./gpu-smoke.sh run [--driver-root DIR] [--quick] [--shares]
#       ON THE GPU HOST, from the unpacked bundle: GPU model and driver version, `list`,
#       `labels`, one registration with a kubelet stand-in (go-client smoke) and one
#       Allocate, the registered Xid event set, the figures of bench/ that need no
#       cluster, and DRA (serve --dra against the fake API server: the ResourceSlice as
#       written, registration, health, one claim prepared and unprepared with its CDI
#       spec shown, Prepare timed over 40 claims), the driver in a container (one more
#       claim's spec applied to rootfs/ by cdi-apply, no container runtime; cuda-probe in
#       it: cuInit, the device it sees, 1 MiB allocated; nvidia-smi's settings the same
#       after). Every step has a timeout; all of it stays under 5 minutes. Works in a
#       temp dir it removes; exits non-zero when any check fails. --driver-root: where the
#       driver is installed when it is not /, e.g. /run/nvidia/driver. --quick: fewer
#       Allocate calls, a 2 s idle window and one bench-topo topology (the test's mode).
#       --shares (opt-in: MPS sets gpu-0's compute mode while it runs, restored): section 9,
#       two MPS shares of gpu-0, each one's container allocating within it and beyond it.
#   scripts/gpu-smoke.sh run-from-tree [--build-dir DIR] [run options]
#       run the bundle staged in DIR/gpu-smoke/ (for runners that copy the working tree
#       plus named ignored paths, e.g. build-gpu-smoke/gpu-smoke).
#   scripts/gpu-smoke.sh check-nvml FILE...
#       list the NVML functions the files name; fail if one is not known to be read-only.
#
# WITHOUT --shares IT CHANGES NO GPU SETTING: no MIG mode or instances, no clocks, no power limits, no
# persistence or compute mode, no ECC, no reset, nothing injected. The plugin only reads
# NVML: `bundle` refuses binaries that name any NVML function outside the read-only set
# (check-nvml below; the list travels as nvml-functions.txt), nvidia-smi is only queried
# (section 8 checks that its settings read the same after), and the plugin runs with its
# kubelet socket, plugin sockets, DRA directories and CDI directories inside the run's
# temp dirs (the DRA sockets' own one is in /tmp when TMPDIR is too long for a socket
# path), so it writes nothing outside them; section 8's container is a copy of rootfs/
# there, its mounts in a mount namespace of its own. The fake API server listens on
# 127.0.0.1 only, on a port the kernel picks.
#
# The run side is POSIX sh with coreutils or busybox only (mktemp, mkfifo, timeout, sleep
# with fractions, awk, sed, grep, sort, cut). Binaries run through the bundled loader:
#   lib/ld-linux-x86-64.so.2 --library-path lib:<dir of libnvidia-ml.so.1> bin/<program>
# so the host's glibc version does not matter and the driver's NVML is used as found.
set -u

die() { echo "gpu-smoke: $*" >&2; exit 2; }

# ---------------------------------------------------------------- check-nvml (both sides)

# Read-only: every *Get* query, plus init/shutdown, error strings and the event set the
# health monitor creates, registers with and waits on.
NVML_READONLY='^nvml(Init|Init_v2|Init_v3|InitWithFlags|Shutdown|ErrorString|EventSetCreate|EventSetFree|EventSetWait|EventSetWait_v2|DeviceRegisterEvents|DeviceIsMigDeviceHandle|[A-Za-z]*Get[A-Z0-9][A-Za-z0-9_]*)$'

check_nvml() {
    # Function names only: debug info also carries type names (_t, _st, _enum).
    names=$(cat "$@" | LC_ALL=C grep -a -o 'nvml[A-Z][A-Za-z0-9_]*' |
        grep -v -E '_(t|st|enum)$' | LC_ALL=C sort -u)
    [ -n "$names" ] || { echo "check-nvml: no NVML function named in $*" >&2; return 1; }
    bad=$(printf '%s\n' "$names" | grep -v -E "$NVML_READONLY" | tr '\n' ' ' || true)
    if [ -n "$bad" ]; then
        echo "check-nvml: NVML functions not known to be read-only: $bad" >&2
        return 1
    fi
    printf '%s\n' "$names"
}

# ---------------------------------------------------------------- bundle (here)

bundle() {
    src=$(cd "$(dirname "$0")/.." && pwd)
    build="$src/build-gpu-smoke"
    do_build=1
    out=
    while [ $# -gt 0 ]; do
        case $1 in
        --build-dir) build=$(realpath -m "$2"); shift 2 ;;
        --no-build) do_build=0; shift ;;
        -*) die "bundle: unknown option $1" ;;
        *) out=$(realpath -m "$1"); shift ;;
        esac
    done
    [ -n "$out" ] || out="$build/gpu-smoke.tar.gz"
    if [ $do_build = 1 ]; then
        [ -f "$build/build.ninja" ] ||
            meson setup "$build" "$src" --buildtype=release -Dwerror=true >/dev/null ||
            die "meson setup $build failed"
        ninja -C "$build" src/gpu-device-plugin-readonly tools/go-client/go-client bench/bench-topo \
            bench/bench-metrics tests/kube/fake-apiserver tests/cdi/cdi-apply tests/cdi/cuda-probe \
            >/dev/null || die "building in $build failed"
    fi
    set -e
    # The plugin without the NVML calls that change a GPU setting (src/meson.build).
    plugin="$build/src/gpu-device-plugin-readonly"
    gc="$build/tools/go-client/go-client"
    api="$build/tests/kube/fake-apiserver"
    for f in "$plugin" "$build/bench/bench-topo" "$build/bench/bench-metrics" "$api"; do
        [ -x "$f" ] || die "missing $f (build it, or drop --no-build)"
    done
    [ -x "$gc" ] || die "missing $gc: go-client needs Debian's Go and grpc-go (scripts/deps.sh)"
    ! ldd "$gc" >/dev/null 2>&1 || die "$gc is dynamically linked; it must be built with CGO_ENABLED=0"

    stage="$build/gpu-smoke"
    rm -rf "$stage"
    mkdir -p "$stage/bin" "$stage/lib"
    for f in "$plugin" "$build/bench/bench-topo" "$build/bench/bench-metrics" "$gc" "$api"; do
        strip -o "$stage/bin/${f##*/}" "$f" 2>/dev/null || cp "$f" "$stage/bin/"
    done
    # Run as gpu-device-plugin (its name picks its mode: src/main.c).
    mv "$stage/bin/gpu-device-plugin-readonly" "$stage/bin/gpu-device-plugin"
    . "$src/tests/cdi/gpu-smoke-container.sh" # section 8: cdi-apply in bin/, rootfs/
    bundle_apply "$src" "$build" "$stage"
    # ldd's answer for the dynamic binaries, then the rest of glibc that libnvidia-ml.so.1
    # links (libm, libdl, libpthread, librt): it must find ours, not the host's, because
    # it is loaded into a process running our glibc.
    libs=$(for f in "$stage"/bin/*; do ldd "$f" 2>/dev/null || true; done |
        awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' |
        grep -v libnvidia-ml | sort -u)
    libc=$(printf '%s\n' "$libs" | grep '/libc\.so\.6$')
    loader=$(printf '%s\n' "$libs" | grep '/ld-linux-x86-64\.so\.2$')
    [ -n "$libc" ] && [ -n "$loader" ] ||
        die "no libc.so.6 / ld-linux-x86-64.so.2 in ldd's answer"
    for l in libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
        [ -e "${libc%/*}/$l" ] && libs="$libs
${libc%/*}/$l"
    done
    for l in $(printf '%s\n' "$libs" | sort -u); do
        cp -L "$l" "$stage/lib/${l##*/}"
    done
    bundle_rootfs "$src" "$build" "$stage"
    check_nvml "$stage"/bin/* >"$stage/nvml-functions.txt"
    cp "$src/scripts/gpu-smoke.sh" "$stage/gpu-smoke.sh"
    chmod 755 "$stage/gpu-smoke.sh"
    version=$("$stage/lib/ld-linux-x86-64.so.2" --library-path "$stage/lib" "$stage/bin/gpu-device-plugin" --version | tr '\n' ' ')
    buildtype=$(meson introspect "$build" --buildoptions 2>/dev/null |
        grep -o '"name": "buildtype", "value": "[a-z]*"' | sed 's/.*"\([a-z]*\)"$/\1/' || true)
    {
        echo "plugin: $version"
        echo "build: ${buildtype:-unknown} ($build)"
        echo "bundled on: $(uname -srm), glibc $(ldd --version | awk 'NR == 1 { print $NF }'), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "libraries: $(cd "$stage/lib" && echo *)"
        echo "container rootfs (section 8): $rootfs_from, $(du -sk "$stage/rootfs" | cut -f1) KiB unpacked"
        echo "NVML functions named (all read-only): $(wc -l <"$stage/nvml-functions.txt")"
    } >"$stage/MANIFEST"
    tar -C "$build" -czf "$out" gpu-smoke
    set +e
    echo "bundle: $out ($(du -k "$out" | cut -f1) KiB), staged in $stage"
    echo "on the GPU host: tar -xzf ${out##*/} && ./gpu-smoke/gpu-smoke.sh run"
}

# ---------------------------------------------------------------- run (on the GPU host)

n_pass=0 n_fail=0 n_skip=0
check() { # name, ok(0/1), detail
    if [ "$2" = 0 ]; then
        n_pass=$((n_pass + 1))
        echo "PASS  $1: $3" >>"$T/checks"
        echo "check: PASS $1: $3"
    else
        n_fail=$((n_fail + 1))
        echo "FAIL  $1: $3" >>"$T/checks"
        echo "check: FAIL $1: $3"
    fi
}
figure() { printf '| %s | %s |\n' "$1" "$2" >>"$T/figures"; }
section() { printf '\n== %s ==\n' "$1"; }
uptime_cs() { awk '{ printf "%d", $1 * 100 }' /proc/uptime; }
elapsed_s() { echo $((($(uptime_cs) - t_start) / 100)); }
# budget_ok N: a step of up to 300 - N s starts only in the run's first N s (5 minutes in all).
budget_ok() { [ "$(elapsed_s)" -lt "$1" ]; }

# ldso SECONDS PROGRAM ARGS: a bundled program through the bundled loader, with a timeout.
ldso() {
    secs=$1
    shift
    timeout "$secs" "$B/lib/ld-linux-x86-64.so.2" --library-path "$libpath" "$@"
}
# plugin SECONDS ARGS: the plugin through the bundled loader; everything it writes stays
# inside $T. Outside a container the driver root is also where this process sees it
# (--driver-root-ctr-path: where the plugin looks for libnvidia-ml.so.1 when it is not /).
# SECONDS 0: no timeout, and the plugin replaces the shell that runs the function: start
# it as `plugin 0 ... &`, so that $! is the plugin itself (for /proc).
plugin() {
    secs=$1
    shift
    set -- "$B/bin/gpu-device-plugin" --driver-root="$driver_root" \
        --driver-root-ctr-path="$driver_root" --kubelet-socket="$S/dp/kubelet.sock" \
        --cdi-spec-dir="$T/cdi" "$@"
    [ "$secs" != 0 ] || exec "$B/lib/ld-linux-x86-64.so.2" --library-path "$libpath" "$@"
    ldso "$secs" "$@"
}

find_nvml() {
    for d in usr/lib64 usr/lib/x86_64-linux-gnu lib64 lib/x86_64-linux-gnu usr/lib lib; do
        if [ -e "${driver_root%/}/$d/libnvidia-ml.so.1" ]; then
            echo "${driver_root%/}/$d/libnvidia-ml.so.1"
            return 0
        fi
    done
    if [ "$driver_root" = / ]; then
        for lc in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
            command -v "$lc" >/dev/null 2>&1 || continue
            "$lc" -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 .*x86-64/ { print $NF; exit }'
            return 0
        done
    fi
}

# wait_for FILE PATTERN SECONDS: until a line of FILE matches (0) or time runs out (1).
wait_for() {
    i=0
    while [ $i -lt $(($3 * 10)) ]; do
        grep -q -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

cpu_ns() { # the plugin's threads' time on CPU (schedstat), or ticks * 10 ms from stat
    if [ -r "/proc/$pid/schedstat" ]; then
        cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'
    else
        cat /proc/"$pid"/task/*/stat 2>/dev/null |
            awk '{ sub(/.*\) /, ""); s += $12 + $13 } END { printf "%.0f", s * 1e7 }'
    fi
}
ctx_switches() {
    cat /proc/"$pid"/task/*/status 2>/dev/null |
        awk '/^(non)?voluntary_ctxt_switches:/ { s += $2 } END { print s + 0 }'
}
status_kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
children_cpu_s() { # user + system seconds of the waited-for children, from `times`
    times >"$T/times" # not in a pipe or $(...): a subshell would report its own children
    awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } } END { printf "%.3f", s }' "$T/times"
}

cleanup() {
    ! command -v shares_cleanup >/dev/null || shares_cleanup # gpu-smoke-shares.sh
    for p in ${pid:-} ${gc_pid:-} ${dra_pid:-} ${api_pid:-} ${runner_pid:-}; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$T" ${S:+"$S"}
}

run() {
    driver_root=/
    quick=0 shares=0
    while [ $# -gt 0 ]; do
        case $1 in
        --driver-root)
            driver_root=$(cd "${2:?--driver-root needs a directory}" && pwd) ||
                die "run: --driver-root $2 is not a directory"
            shift 2
            ;;
        --quick) quick=1; shift ;;
        --shares) shares=1; shift ;;
        *) die "run: unknown option $1" ;;
        esac
    done
    B=$(cd "$(dirname "$0")" && pwd)
    [ -x "$B/lib/ld-linux-x86-64.so.2" ] && [ -x "$B/bin/gpu-device-plugin" ] && [ -f "$B/gpu-smoke-shares.sh" ] ||
        die "run: $B is not an unpacked bundle (scripts/gpu-smoke.sh bundle makes one)"
    . "$B/gpu-smoke-container.sh"; . "$B/gpu-smoke-shares.sh"
    command -v timeout >/dev/null 2>&1 || die "run: needs timeout (coreutils or busybox)"
    T=$(mktemp -d "${TMPDIR:-/tmp}/gpu-smoke.XXXXXX") || die "run: mktemp failed"
    # The sockets' directories (the kubelet's, the device plugin's, DRA's registration and
    # plugin sockets): a socket path has 108 bytes and the plugin takes at most 78 for a
    # DRA directory, so under a long TMPDIR they go to a short one of /tmp.
    d=${TMPDIR:-/tmp}
    [ ${#d} -le 32 ] || d=/tmp
    S=$(mktemp -d "$d/gdp-smoke.XXXXXX") || { rm -rf "$T"; die "run: mktemp in $d failed"; }
    pid='' gc_pid='' dra_pid='' api_pid='' runner_pid=''
    trap cleanup EXIT
    trap 'exit 130' INT TERM HUP
    : >"$T/checks"
    : >"$T/figures"
    t_start=$(uptime_cs)

    section "1. Host, GPU and driver"
    echo "host: $(uname -srm); $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null)"
    sed 's/^/bundle: /' "$B/MANIFEST"
    [ "$(uname -m)" = x86_64 ] || check "architecture" 1 "$(uname -m): the bundle is x86_64"
    nvml=$(find_nvml)
    if [ -z "$nvml" ]; then
        check "NVML library" 1 "libnvidia-ml.so.1 not found under $driver_root (usr/lib64, usr/lib/x86_64-linux-gnu, lib64, lib/x86_64-linux-gnu, usr/lib, lib, ldconfig -p); is the driver installed? give --driver-root DIR when it lives elsewhere (e.g. /run/nvidia/driver)"
        summary
        return
    fi
    check "NVML library" 0 "$nvml"
    libpath="$B/lib:${nvml%/*}"
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "nvidia-smi (queries only):"
        timeout 20 nvidia-smi --query-gpu=index,name,uuid,driver_version,pci.bus_id,memory.total,mig.mode.current,persistence_mode --format=csv 2>&1
    else
        echo "nvidia-smi: not installed on this host, skipped"
    fi
    plugin 45 list --output json >"$T/list.json" 2>"$T/list.err"
    rc=$?
    driver=$(sed -n 's/^ *"driverVersion": "\(.*\)",$/\1/p' "$T/list.json")
    cuda=$(sed -n 's/^ *"cudaDriverVersion": "\(.*\)",$/\1/p' "$T/list.json")
    models=$(sed -n 's/^ *"name": "\(.*\)",$/\1/p' "$T/list.json" | sort | uniq -c |
        awk '{ n = $1; $1 = ""; printf "%s%d x%s", sep, n, $0; sep = ", " }')
    echo "GPU models: ${models:-none}"
    echo "driver version: ${driver:-unknown}, CUDA driver API ${cuda:-unknown}"
    [ $rc = 0 ] && [ -n "$driver" ] && [ -n "$models" ]
    check "GPU and driver (NVML via list --output json)" $? "${models:-no GPU}; driver ${driver:-unknown} (rc $rc$(head -c 300 "$T/list.err" | tr '\n' ' ' | sed 's/^./: &/'))"

    section "2. list"
    plugin 45 list
    rc=$?
    check "list" $rc "exit status $rc"

    section "3. labels"
    plugin 45 labels >"$T/labels" 2>"$T/labels.err"
    rc=$?
    cat "$T/labels" "$T/labels.err"
    grep -q '^nvidia.com/gpu.product=' "$T/labels"
    check "labels" $((rc | $?)) "exit status $rc, $(wc -l <"$T/labels") labels"

    section "4. Registration and Allocate (go-client smoke as the kubelet)"
    mkdir -p "$S/dp"
    "$B/bin/go-client" smoke "$S/dp" >"$T/kubelet.out" 2>&1 &
    gc_pid=$!
    wait_for "$T/kubelet.out" '^kubelet: serving' 10
    plugin 0 >"$T/plugin.log" 2>&1 &
    pid=$!
    i=0 # until the kubelet stand-in is done, exits, or 45 s pass
    while [ $i -lt 450 ] && kill -0 "$gc_pid" 2>/dev/null && ! grep -q '^smoke ok' "$T/kubelet.out"; do
        sleep 0.1
        i=$((i + 1))
    done
    cat "$T/kubelet.out"
    grep -q '^smoke ok' "$T/kubelet.out"
    rc=$?
    reg=$(sed -n 's/^register: .* endpoint=\([^ ]*\) resource=\([^ ]*\) .*/\2 on \1/p' "$T/kubelet.out")
    check "registration and Allocate" $rc "${reg:-no Register arrived}$(sed -n 's/^allocate: \([^ ]*\) .*/, Allocate of \1 answered/p' "$T/kubelet.out")"
    loaded=$(awk '/libnvidia-ml/ { print $6; exit }' "/proc/$pid/maps" 2>/dev/null)
    echo "plugin (pid $pid) loaded NVML from: ${loaded:-?}"
    echo "plugin log:"
    sed 's/^/  /' "$T/plugin.log"

    section "5. Xid event set (health monitor)"
    watching=$(sed -n 's/.*Health monitor watching \([0-9]*\) GPU(s).*/\1/p' "$T/plugin.log" | tail -n 1)
    unsupported=$(grep -c 'NVML events not supported' "$T/plugin.log")
    failed=$(grep -c 'event registration failed' "$T/plugin.log")
    grep -E 'Health monitor|events not supported|event registration failed|Health checks' "$T/plugin.log"
    registered=$((${watching:-0} - unsupported - failed))
    [ "${watching:-0}" -gt 0 ] && [ "$registered" = "$watching" ]
    check "Xid event set" $? "${watching:-0} GPU(s) watched, $registered registered for Xid events, $unsupported not supported, $failed failed"

    section "6. Figures (bench/ without a cluster)"
    figures
    section "7. DRA (serve --dra; the bundled fake API server as the cluster)"
    dra_ready=0
    if budget_ok 240; then
        dra
    else
        check "DRA" 1 "skipped: the run is already $(elapsed_s) s old"
    fi
    section "8. The driver in a container (a claim's CDI spec applied by cdi-apply)"
    section8 # gpu-smoke-container.sh; then dra_stop
    section "9. Two shares of one GPU (run --shares: MPS, compute mode EXCLUSIVE_PROCESS meanwhile)"; section9
    section "10. Summary"
    summary
}

figures() {
    if ! kill -0 "$pid" 2>/dev/null; then
        check "plugin running" 1 "the plugin exited; no figures"
        return
    fi
    # klog: "I1126 18:23:29.475898 ..."; the first line to the Registered line
    awk '{ split($2, t, ":"); s = t[1] * 3600 + t[2] * 60 + t[3] }
         NR == 1 { first = s }
         /Registered device plugin/ && !done { printf "%.2f ms\n", (s - first) * 1000; done = 1 }' \
        "$T/plugin.log" >"$T/startreg"
    figure "start → Registered (plugin log clock: first log line → Registered)" "$(cat "$T/startreg")"
    figure "Register round trip as the plugin logs it" \
        "$(sed -n 's/.*Registered device plugin.*(\([0-9]*\) us).*/\1 µs/p' "$T/plugin.log" | head -n 1)"
    figure "RSS after registration (VmRSS / VmHWM)" "$(status_kib VmRSS) / $(status_kib VmHWM) KiB"
    figure "RssAnon / RssFile after registration" "$(status_kib RssAnon) / $(status_kib RssFile) KiB"
    figure "threads" "$(status_kib Threads)"

    endpoint=$(sed -n 's/^register: .* endpoint=\([^ ]*\) .*/\1/p' "$T/kubelet.out")
    first=$(sed -n 's/^listandwatch: .* first \(.*\)$/\1/p' "$T/kubelet.out")
    if [ -n "$endpoint" ] && [ -n "$first" ]; then
        calls=10000
        [ $quick = 0 ] || calls=2000
        cpu0=$(cpu_ns)
        children_cpu_s >"$T/cc0"
        timeout 60 "$B/bin/go-client" bench-allocate "$S/dp/$endpoint" $calls "$first" >"$T/alloc.json"
        rc=$?
        cpu1=$(cpu_ns)
        children_cpu_s >"$T/cc1"
        check "Allocate benchmark" $rc "$calls calls of go-client bench-allocate, exit status $rc"
        # bench-allocate warms up with 200 calls before the measured ones
        figure "Allocate, grpc-go, unpinned (p50 / p99 / max)" \
            "$(sed 's/.*"p50_us":\([0-9.]*\),"p99_us":\([0-9.]*\),"max_us":\([0-9.]*\).*/\1 \/ \2 \/ \3 µs/' "$T/alloc.json")"
        figure "plugin CPU per Allocate (all threads)" \
            "$(awk -v a="$cpu0" -v b="$cpu1" -v n=$((calls + 200)) 'BEGIN { printf "%.1f µs", (b - a) / n / 1000 }')"
        figure "go-client CPU per Allocate (dial and warm-up included)" \
            "$(awk -v a="$(cat "$T/cc0")" -v b="$(cat "$T/cc1")" -v n=$((calls + 200)) 'BEGIN { printf "%.1f µs", (b - a) / n * 1e6 }')"
        figure "RSS after the Allocate calls (VmRSS / VmHWM)" "$(status_kib VmRSS) / $(status_kib VmHWM) KiB"
    else
        check "Allocate benchmark" 1 "no endpoint or device from the registration step"
    fi

    idle=10
    [ $quick = 0 ] || idle=2
    s0=$(ctx_switches)
    sleep $idle
    s1=$(ctx_switches)
    figure "idle context switches, all threads (${idle} s, ListAndWatch open)" "$(((s1 - s0) * 60 / idle)) / min"

    # the watchdog holds none of our fds: a sleep it leaves behind must not keep a pipe open
    (sleep 10 && kill -9 "$pid") >/dev/null 2>&1 </dev/null &
    dog=$!
    t0=$(uptime_cs)
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    t1=$(uptime_cs)
    kill "$dog" 2>/dev/null
    pid=''
    check "SIGTERM" $rc "exit status $rc"
    figure "SIGTERM → exit (10 ms resolution)" "$(((t1 - t0) * 10)) ms"

    if budget_ok 180; then
        topo=
        [ $quick = 0 ] || topo=dgx-a100
        ldso 120 "$B/bin/bench-topo" ${topo:+"$topo"} >"$T/topo" 2>&1
        rc=$?
        check "bench-topo" $rc "exit status $rc, $(grep -c '(optimal)' "$T/topo") of $(grep -c 'set ' "$T/topo") comparable answers optimal"
        awk '{ for (i = 1; i < NF; i++) { if ($i == "p50") p50 = $(i + 1); if ($i == "p99") p99 = $(i + 1) }
               n = $1; if (!(n in lo)) { order[++k] = n; lo[n] = p50; hi[n] = p50; w[n] = p99 }
               if (p50 < lo[n]) lo[n] = p50; if (p50 > hi[n]) hi[n] = p50; if (p99 > w[n]) w[n] = p99 }
             END { for (j = 1; j <= k; j++) { n = order[j]
                   printf "| bench-topo %s: GetPreferredAllocation p50 range, worst p99 | %s–%s µs, %s µs |\n", n, lo[n], hi[n], w[n] } }' \
            "$T/topo" >>"$T/figures"
    else
        check "bench-topo" 1 "skipped: the run is already $(elapsed_s) s old"
    fi
    if budget_ok 240; then
        ldso 60 "$B/bin/bench-metrics" >"$T/metrics" 2>&1
        rc=$?
        check "bench-metrics" $rc "exit status $rc"
        grep -E '^(per RPC|render)' "$T/metrics" | sed 's/^\(.*\): \(.*\)$/| bench-metrics: \1 | \2 |/' >>"$T/figures"
    else
        check "bench-metrics" 1 "skipped: the run is already $(elapsed_s) s old"
    fi
    echo "| Figure | Value |"
    echo "|---|---|"
    cat "$T/figures"
}

# claim NAME UID DEVICE: a ResourceClaim allocated to DEVICE of this node's pool, as the
# scheduler leaves it (one line of JSON).
claim() {
    printf '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"%s","namespace":"default","uid":"%s","resourceVersion":"1"},' "$1" "$2"
    printf '"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com","allocationMode":"ExactCount","count":1}}]}},'
    printf '"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"%s","device":"%s"}]},' "$dra_node" "$3"
    printf '"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["%s"]}]}]}},' "$dra_node"
    printf '"reservedFor":[{"resource":"pods","name":"%s","uid":"%s"}]}}\n' "$1" "$2"
}
# wait_count FILE PATTERN N: until more than N lines of FILE match, 10 s at most.
wait_count() {
    i=0
    while [ "$(grep -c -- "$2" "$1")" -le "$3" ] && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}
# api COMMAND...: one command to the fake API server, waited for ("ok COMMAND").
api() {
    n=$(grep -c "^ok $1\$" "$T/api.out")
    echo "$*" >&7
    wait_count "$T/api.out" "^ok $1\$" "$n"
}
quantile() { sort -n | awk -v q="$1" '{ v[NR] = $1 } END { i = int(NR * q + 0.999); if (i < 1) i = 1; printf "%.3f", v[i] / 1000 }'; }

# api_start DIR NODE CHECK: the fake API server on DIR (fd 7 its input, $T/api.out its output)
# knowing NODE, DIR/kubeconfig for it; 1 (CHECK failed) when it did not start.
api_start() {
    mkfifo "$T/api.in" || { check "$3" 1 "mkfifo failed"; return 1; }
    ldso 200 "$B/bin/fake-apiserver" "$1" <"$T/api.in" >"$T/api.out" 2>&1 &
    api_pid=$!
    exec 7>"$T/api.in"
    wait_for "$T/api.out" '^listening ' 10
    port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$T/api.out")
    [ -n "$port" ] || { check "$3" 1 "the fake API server did not start: $(head -c 300 "$T/api.out" | tr '\n' ' ')"; return 1; }
    api add "$2"
    printf '{"apiVersion":"v1","kind":"Config","current-context":"t","contexts":[{"name":"t","context":{"cluster":"t","user":"t"}}],"clusters":[{"name":"t","cluster":{"server":"https://127.0.0.1:%s","certificate-authority":"%s"}}],"users":[{"name":"t","user":{"token":"tok1"}}]}\n' \
        "$port" "$1/ca.crt" >"$1/kubeconfig"
}

# Section 7: the GPUs served through DRA. The fake API server (tests/kube/fake-apiserver:
# TLS, HTTP/2, every ResourceSlice write checked against the rules of Kubernetes 1.34)
# stands in for the cluster, go-client dra-smoke for the kubelet.
dra() {
    dra_node=gpu-smoke-node
    mkdir -p "$T/api" "$T/cdi-dra" "$S/reg" "$S/plugins"
    hook=$(cdi_hook) # NVIDIA's hook binary when this host has one (gpu-smoke-container.sh)
    api_start "$T/api" "$dra_node" DRA || return
    plugin 0 --dra --kubeconfig="$T/api/kubeconfig" --node-name="$dra_node" \
        --kubelet-registrar-directory-path="$S/reg" --kubelet-plugins-directory-path="$S/plugins" \
        --cdi-root="$T/cdi-dra" ${hook:+--nvidia-cdi-hook-path="$hook"} >"$T/dra.log" 2>&1 &
    dra_pid=$!
    wait_for "$T/dra.log" "ResourceSlices of node $dra_node are up to date" 20
    rc=$?
    api rs-dump
    grep '^rs ' "$T/api.out" | cut -d' ' -f3- >"$T/slices"
    devices=$(grep -o '"name":"gpu-[0-9][0-9a-z-]*"' "$T/slices" | sed 's/.*:"\(.*\)"/\1/')
    echo "ResourceSlices as written (every write checked against the 1.34 rules):"
    sed 's/^/  /' "$T/slices"
    if kill -0 "$dra_pid" 2>/dev/null; then
        detail="$(sed -n 's/.*ResourceSlices of node [^ ]* are up to date (\(.*\))$/\1/p' "$T/dra.log" | head -n 1)${devices:+; }$(echo $devices | tr ' ' ',')"
    else
        detail="serve --dra exited: $(tail -n 1 "$T/dra.log")"
    fi
    check "DRA ResourceSlice" $rc "${detail:-no slice written in 20 s}"
    dev=$(echo "$devices" | head -n 1)
    if [ $rc != 0 ] || [ -z "$dev" ]; then
        check "DRA Prepare" 1 "no published GPU to claim"
        sed 's/^/  /' "$T/dra.log"
        return
    fi

    uid=5a0e0000-0000-4000-8000-000000000000
    api rc-json "$(claim smoke "$uid" "$dev")"
    timeout 30 "$B/bin/go-client" dra-smoke "$S/reg" "$T/cdi-dra" default smoke "$uid" >"$T/dra-kubelet.out" 2>&1
    rc=$?
    cat "$T/dra-kubelet.out"
    check "DRA registration, health, Prepare and Unprepare" $rc "$(sed -n 's/^prepare: [0-9]* µs, //p' "$T/dra-kubelet.out")$(sed -n 's/^health: \(.*\)/, health \1/p' "$T/dra-kubelet.out")"

    # 250 ms apart, as bench/bench-dra.py paces them: a kubelet prepares when a pod starts,
    # and each claim's GET then finds a token of the API client's rate limit (--kube-api-qps
    # 5, burst 10, client-go's defaults), which would otherwise pace the run itself.
    n=40
    [ $quick = 0 ] || n=8
    i=1
    : >"$T/claims"
    while [ $i -le $n ]; do
        u=5a0e0000-0000-4000-8000-$(printf '%012d' $i)
        echo "rc-json $(claim "bench-$i" "$u" "$dev")" >&7
        echo "default bench-$i $u" >>"$T/claims"
        i=$((i + 1))
    done
    # until every claim is stored (one "ok rc-json" each, the first claim's included)
    wait_count "$T/api.out" '^ok rc-json$' $n
    timeout 60 "$B/bin/go-client" bench-prepare "$S/plugins/gpu.nvidia.com/dra.sock" 250 \
        <"$T/claims" >"$T/prepare" 2>"$T/prepare.err"
    rc=$?
    check "DRA Prepare benchmark" $rc "$(wc -l <"$T/prepare") of $n claims prepared, prepared again and unprepared, 250 ms apart$(head -c 300 "$T/prepare.err" | tr '\n' ' ' | sed 's/^./: &/')"
    if [ -s "$T/prepare" ]; then
        figure "DRA: first Prepare of a 1-GPU claim, grpc-go, 250 ms apart (p50 / p99)" \
            "$(cut -d' ' -f1 "$T/prepare" | quantile 0.5) / $(cut -d' ' -f1 "$T/prepare" | quantile 0.99) ms"
        figure "DRA: Prepare again (checkpointed) / Unprepare, p50" \
            "$(cut -d' ' -f2 "$T/prepare" | quantile 0.5) / $(cut -d' ' -f3 "$T/prepare" | quantile 0.5) ms"
    fi
    pid=$dra_pid
    figure "DRA: serve --dra RSS after the claims (VmRSS / VmHWM), threads" \
        "$(status_kib VmRSS) / $(status_kib VmHWM) KiB, $(status_kib Threads)"
    pid=''
    dra_dev=$(echo "$devices" | tail -n 1)
    dra_ready=1
}

summary() {
    echo "GPU settings changed: ${settings_changed:-none (the bundle names only the read-only NVML functions in nvml-functions.txt; nvidia-smi is only queried)}"
    cat "$T/checks"
    echo "checks: $n_pass passed, $n_fail failed, $n_skip skipped, in $(elapsed_s) s"
    [ $n_fail = 0 ] || exit 1
}

run_from_tree() {
    build="$(cd "$(dirname "$0")/.." && pwd)/build-gpu-smoke"
    if [ "${1:-}" = --build-dir ]; then
        build=$2
        shift 2
    fi
    [ -x "$build/gpu-smoke/gpu-smoke.sh" ] ||
        die "run-from-tree: no bundle in $build/gpu-smoke (run scripts/gpu-smoke.sh bundle first)"
    exec "$build/gpu-smoke/gpu-smoke.sh" run "$@"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
bundle) bundle "$@" ;;
run) run "$@" ;;
run-from-tree) run_from_tree "$@" ;;
check-nvml) check_nvml "$@" ;;
*) die "usage: $0 bundle [--build-dir DIR] [--no-build] [OUT.tar.gz] | run [--driver-root DIR] [--quick] [--shares] | run-from-tree [--build-dir DIR] [--driver-root DIR] | check-nvml FILE..." ;;
esac
