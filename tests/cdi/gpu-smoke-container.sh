# gpu-smoke-container.sh: section 8 of scripts/gpu-smoke.sh, "the driver in a container",
# sourced by it (POSIX sh; the bundle carries it beside the script). Bundle side:
# bundle_apply puts cdi-apply (tests/cdi/cdi-apply.c) in bin/, bundle_rootfs the
# container's rootfs in rootfs/. GPU host side: section8 applies a prepared claim's CDI spec to a copy
# of that rootfs with cdi-apply and runs cuda-probe in it, compares nvidia-smi's settings
# before and after, then stops serve --dra (dra_stop). Uses the script's variables (B, T,
# S, driver, driver_root, dra_dev, dra_pid, api_pid, dra_ready) and functions (check,
# figure, api, claim, budget_ok, elapsed_s).

skip() { # name, why: a check this host cannot make, neither passed nor failed
    n_skip=$((n_skip + 1))
    echo "SKIP  $1: $2" >>"$T/checks"
    echo "check: SKIPPED $1: $2"
}

# cdi_hook: NVIDIA's hook binary for serve --dra's --nvidia-cdi-hook-path when the toolkit
# put nvidia-cdi-hook on this host (the plugin's default, /usr/bin/nvidia-ctk, is found by
# the plugin itself); nothing when neither is here: the specs then carry no hooks and mount
# the libraries at their SONAMEs too, the path section 8 proves on a bare driver host.
cdi_hook() {
    command -v nvidia-cdi-hook 2>/dev/null && return
    [ ! -x "${driver_root%/}/usr/bin/nvidia-cdi-hook" ] || echo /usr/bin/nvidia-cdi-hook
}

# bundle_apply SRC BUILD STAGE (set -e is on): cdi-apply in STAGE/bin (before the
# libraries are collected: a build with shared dependencies needs libjansson), this file
# beside the script.
bundle_apply() {
    for f in "$2/tests/cdi/cdi-apply" "$2/tests/cdi/cuda-probe"; do
        [ -x "$f" ] || die "missing $f (build it, or drop --no-build)"
    done
    strip -o "$3/bin/cdi-apply" "$2/tests/cdi/cdi-apply" 2>/dev/null || cp "$2/tests/cdi/cdi-apply" "$3/bin/"
    cp "$1/tests/cdi/gpu-smoke-container.sh" "$1/tests/dra/gpu-smoke-shares.sh" "$3/"
}

# bundle_rootfs SRC BUILD STAGE (set -e is on; after STAGE/lib is filled): STAGE/rootfs, a
# plain Debian 12 rootfs (tests/cdi/debian-rootfs.sh's cache) cut to what cuda-probe and
# the driver's libcuda load (the loader, libc, libm, libdl, libpthread, librt) and what
# NVIDIA's hooks read (/etc/debian_version, ld.so.conf); no shell; cuda-probe in
# /usr/local/bin. Without Debian's archive, the build host's glibc in Debian's layout. A
# library equal to the bundle's own lib/ copy becomes a hard link to it: tar stores it
# once, so the container costs the bundle little more than cuda-probe.
bundle_rootfs() {
    r="$3/rootfs"
    mkdir -p "$r/usr/lib/x86_64-linux-gnu"
    glibc="ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1"
    if deb=$(timeout 300 sh "$1/tests/cdi/debian-rootfs.sh" 2>"$3/rootfs.err") && [ -d "$deb" ]; then
        # shellcheck disable=SC2046 # one word per file
        (cd "$deb" && tar -cf - bin sbin lib lib64 usr/lib64 etc/debian_version etc/os-release \
            usr/lib/os-release etc/ld.so.conf etc/ld.so.conf.d \
            $(for l in $glibc; do echo "usr/lib/x86_64-linux-gnu/$l"; done)) | tar -C "$r" -xf -
        rootfs_from="Debian 12, $(grep '^libc6_' "$deb/.packages" | sed 's/\.deb$//')"
    else
        rootfs_from="the build host's glibc (debian-rootfs.sh: $(head -n 1 "$3/rootfs.err"))"
        mkdir -p "$r/usr/lib64" "$r/etc"
        for l in $glibc; do cp "$3/lib/$l" "$r/usr/lib/x86_64-linux-gnu/"; done
        for d in bin sbin lib lib64; do ln -s "usr/$d" "$r/$d"; done
        ln -s /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$r/usr/lib64/"
        echo 12 >"$r/etc/debian_version"
    fi
    rm -f "$3/rootfs.err"
    mkdir -p "$r/dev" "$r/proc" "$r/sys" "$r/tmp" "$r/run" "$r/usr/bin" "$r/usr/sbin" \
        "$r/usr/local/bin"
    strip -o "$r/usr/local/bin/cuda-probe" "$2/tests/cdi/cuda-probe" 2>/dev/null ||
        cp "$2/tests/cdi/cuda-probe" "$r/usr/local/bin/"
    for f in "$r"/usr/lib/x86_64-linux-gnu/*; do
        ! cmp -s "$f" "$3/lib/${f##*/}" || ln -f "$3/lib/${f##*/}" "$f"
    done
}

# The settings no step may change, as nvidia-smi reports them: gpu_settings FILE, or 1
# with the reason in FILE when they cannot be read.
SETTINGS=index,uuid,compute_mode,persistence_mode,mig.mode.current,mig.mode.pending
SETTINGS=$SETTINGS,ecc.mode.current,ecc.mode.pending,power.limit
SETTINGS=$SETTINGS,clocks.applications.graphics,clocks.applications.memory
gpu_settings() {
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        echo "nvidia-smi is not installed" >"$1"
        return 1
    fi
    timeout 20 nvidia-smi --query-gpu=$SETTINGS --format=csv,noheader >"$1" 2>&1 && [ -s "$1" ]
}

# uuid_of DEVICE: its uuid attribute in the ResourceSlices as written (one line of JSON
# each; a device's attributes come first and its name last).
uuid_of() {
    awk -v want="\"name\":\"$1\"}" '{
        n = split($0, d, /\{"attributes":/)
        for (i = 2; i <= n; i++)
            if (index(d[i], want) && match(d[i], /"uuid":\{"string":"[^"]*"/)) {
                print substr(d[i], RSTART + 18, RLENGTH - 19)
                exit
            }
    }' "$T/slices"
}

section8() {
    if [ "$dra_ready" = 0 ]; then
        skip "driver in a container" "no claim can be prepared: section 7 did not get that far"
        return
    fi
    if budget_ok 200; then
        container
    else
        check "driver in a container" 1 "skipped: the run is already $(elapsed_s) s old"
    fi
    dra_stop
}

# One more claim, of the last GPU published (on a host with several, not the container's
# GPU 0: the renumbering shows), prepared by go-client dra-smoke as the kubelet would and
# kept prepared while cdi-apply builds a container from its CDI spec (a copy of the
# bundle's rootfs: glibc and cuda-probe, nothing of NVIDIA's) and runs cuda-probe in it:
# cuInit, the devices it sees, 1 MiB allocated on each. Then unprepared. cdi-apply's exit
# status 3 (not root, no mount namespace, mknod and the bind-mount of the host's node
# both refused) makes the check SKIPPED with cdi-apply's line as the reason.
container() {
    ctr="$T/ctr/rootfs"
    mkdir -p "$T/ctr"
    if ! cp -a "$B/rootfs" "$ctr"; then
        check "driver in a container" 1 "copying the bundle's rootfs to $ctr failed"
        return
    fi
    set --
    if [ -n "${MOCK_NVML_CONFIG:-}" ] && [ -f "$MOCK_NVML_CONFIG" ]; then
        # the simulated NVML (tests/smoke): its profile goes in, as a pod's volume would
        mkdir -p "$ctr/etc/nvml-sim"
        cp "$MOCK_NVML_CONFIG" "$ctr/etc/nvml-sim/profile.yaml"
        set -- --env MOCK_NVML_CONFIG=/etc/nvml-sim/profile.yaml
    fi
    gpu_settings "$T/settings.before"
    settings_rc=$?
    want=$(uuid_of "$dra_dev")
    uid=5a0e0000-0000-4000-8000-00000000c7d0
    api rc-json "$(claim ctr "$uid" "$dra_dev")"
    echo "claim default/ctr of $dra_dev (${want:-no uuid in the slice}); cdi-apply runs cuda-probe while it is prepared:"
    # shellcheck disable=SC2016 # expanded by that sh, from go-client's environment
    timeout 120 "$B/bin/go-client" dra-smoke "$S/reg" "$T/cdi-dra" default ctr "$uid" -- \
        sh -c 'exec "$@" --spec "$GDP_CDI_SPEC" --device "$GDP_CDI_DEVICES" -- /usr/local/bin/cuda-probe' \
        sh "$B/lib/ld-linux-x86-64.so.2" --library-path "$B/lib" "$B/bin/cdi-apply" -v \
        --rootfs "$ctr" "$@" >"$T/ctr.out" 2>&1
    cat "$T/ctr.out" # the spec in full: the record of what was applied
    rc=$(sed -n 's/^exec: exit status \(-\{0,1\}[0-9]*\), [0-9]* ms$/\1/p' "$T/ctr.out")
    ms=$(sed -n 's/^exec: exit status .*, \([0-9]*\) ms$/\1/p' "$T/ctr.out")
    gpu=$(sed -n 's/^gpu 0 //p' "$T/ctr.out" | head -n 1)
    uuid=${gpu##* }
    name=${gpu% *}
    hooks=$(grep -c '^  spec| *"hookName": "createContainer"' "$T/ctr.out")
    if [ "$hooks" -gt 0 ]; then
        how="$hooks hook(s) run: $(grep -o '"path": "[^"]*nvidia-c[^"]*"' "$T/ctr.out" | head -n 1 | cut -d'"' -f4)"
    else
        how="no hooks (no nvidia-cdi-hook or nvidia-ctk here): the libraries also at their SONAMEs"
    fi
    ! grep -q '^cdi-apply| device .*: mknod' "$T/ctr.out" || how="$how; device nodes by mknod"
    ! grep -q '^cdi-apply| device .* bound' "$T/ctr.out" || how="$how; the host's device nodes bound"
    err=$(grep -E '^(cdi-apply|cuda-probe|go-client): ' "$T/ctr.out" | head -n 1)
    if [ "$rc" = 3 ] && [ -n "$err" ]; then
        skip "driver in a container" "$err"
    else
        alloc=$(grep -x 'memalloc ok' "$T/ctr.out" || echo 'no memalloc')
        [ "$rc" = 0 ] && grep -qx 'count 1' "$T/ctr.out" && [ "$alloc" = "memalloc ok" ] &&
            [ -n "$want" ] && [ "$uuid" = "$want" ] &&
            grep -q '^unprepare: .* the spec file removed$' "$T/ctr.out"
        ok=$?
        # (no apostrophe inside ${...:-...}: shells disagree on quotes there)
        detail="driver ${driver:-?}, $(sed -n 's/^count //p' "$T/ctr.out") device(s) seen: ${name:-none} ${uuid:-} (claimed ${want:-?}), $alloc, ${ms:-?} ms from the start of cdi-apply to the exit of cuda-probe; $how"
        check "driver in a container" $ok "${err:-$detail}"
        [ -z "$ms" ] || figure "driver in a container: cdi-apply + cuda-probe (namespace, mounts, cuInit, 1 MiB)" "$ms ms"
        [ -z "$ms" ] || grep '^| driver in a container' "$T/figures"
    fi
    if [ $settings_rc != 0 ]; then
        skip "GPU settings unchanged" "not read: $(head -n 1 "$T/settings.before")"
    elif ! gpu_settings "$T/settings.after"; then
        check "GPU settings unchanged" 1 "nvidia-smi answered before the container, not after: $(head -n 1 "$T/settings.after")"
    elif cmp -s "$T/settings.before" "$T/settings.after"; then
        check "GPU settings unchanged" 0 "$(wc -l <"$T/settings.before") GPU(s): compute mode, persistence, MIG (current, pending), ECC, power limit, application clocks as before"
    else
        echo "nvidia-smi --query-gpu=$SETTINGS, before and after:"
        cat "$T/settings.before" "$T/settings.after"
        settings_changed="SEE THE FAILED CHECK: nvidia-smi answered differently after section 8"
        check "GPU settings unchanged" 1 "now: $(grep -vxF -f "$T/settings.before" "$T/settings.after" | head -n 2 | tr '\n' ' ')"
    fi
}

# After section 8: serve --dra stopped, no claim's spec left behind (section 8's too).
dra_stop() {
    echo "serve --dra (sections 7 and 8), SIGTERM:"
    kill -TERM "$dra_pid"
    wait "$dra_pid"
    rc=$?
    dra_pid=''
    left=$(ls "$T/cdi-dra" | grep -c 'claim_')
    [ $rc = 0 ] && [ "$left" = 0 ]
    check "DRA SIGTERM" $? "exit status $rc, $left claim spec(s) left in the CDI root"
    echo "serve --dra log:"
    sed 's/^/  /' "$T/dra.log"
    exec 7>&-
    wait "$api_pid" 2>/dev/null
    api_pid=''
    echo "| Figure | Value |"
    echo "|---|---|"
    grep '^| DRA' "$T/figures"
}
