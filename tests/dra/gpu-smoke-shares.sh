# gpu-smoke-shares.sh: section 9 of scripts/gpu-smoke.sh, "two shares of one GPU" (run
# --shares only), sourced by it (POSIX sh; the bundle carries it beside the script).
# Bundle side: bundle_apply (gpu-smoke-container.sh) copies it. GPU host side: section9 records gpu-0's
# compute mode, starts the MPS runner (the plugin as mps-control-daemon --dra, the driver
# root's bin/ first on its PATH for nvidia-cuda-mps-control and nvidia-smi) and serve --dra
# --dra-consumable-capacity against a fresh fake API server, makes two claims of gpu-0,
# each a share of a quarter of its memory, holds both prepared (go-client dra-smoke inside
# go-client dra-smoke) and runs cuda-probe in a container built from each one's CDI spec
# (cdi-apply, as section 8): S GiB - 256 MiB must be allocated, S GiB + 256 MiB refused.
# Then both unprepared, the runner stopped with SIGTERM and the compute mode compared with
# the one recorded. THIS CHANGES A GPU SETTING WHILE IT RUNS: MPS needs the GPU in
# EXCLUSIVE_PROCESS compute mode, which the runner sets and restores; the summary says so;
# after a run cut short, shares_cleanup (from the script's cleanup) restores it.
# The plugin's share hook (a hard memory limit on the container's cgroup, through NVML)
# is not in the bundle, so the shares are held by MPS only. Uses the script's variables
# (B, T, S, driver, driver_root, libpath, shares) and functions (check, skip, api, api_start, claim,
# uuid_of, wait_for, wait_count, ldso, plugin, budget_ok, elapsed_s).

# compute_mode UUID: gpu UUID's compute mode as nvidia-smi (the runner's) reports it.
compute_mode() {
    PATH="$smi_path" timeout 20 nvidia-smi --query-gpu=compute_mode --format=csv,noheader -i "$1" 2>&1 |
        head -n 1
}

# bytes QUANTITY: a Kubernetes binary quantity (Ki, Mi, Gi, Ti or none) in bytes.
bytes() {
    awk -v q="$1" 'BEGIN { n = q + 0; u = q; sub(/^[0-9.]*/, "", u)
        m = u == "Ki" ? 2^10 : u == "Mi" ? 2^20 : u == "Gi" ? 2^30 : u == "Ti" ? 2^40 : 1
        printf "%.0f", n * m }'
}

# share_claim NAME UID DEVICE SHAREID MEMORY: claim's allocation as a share of DEVICE.
share_claim() {
    claim "$1" "$2" "$3" | sed "s|\"device\":\"$3\"}|\"device\":\"$3\",\"shareID\":\"$4\",\"consumedCapacity\":{\"memory\":\"$5\",\"compute\":\"10\"}}|"
}

# share_field DEVICE REGEX SKIP: the first match of REGEX in DEVICE's entry of the slices
# (a device's fields first, its name last), less SKIP bytes in front and its last quote.
share_field() {
    awk -v want="\"name\":\"$1\"}" -v re="$2" -v skip="$3" '{
        n = split($0, d, /\{"(allowMultipleAllocations|attributes)":/)
        for (i = 2; i <= n; i++) {
            if (!index(d[i], want)) continue
            e = substr(d[i], 1, index(d[i], want))
            if (match(e, re)) { print substr(e, RSTART + skip, RLENGTH - skip - 1); exit }
        }
    }' "$T/slices"
}

section9() {
    if [ "$shares" = 0 ]; then
        echo "not run: give run --shares (MPS sets the GPU's compute mode to EXCLUSIVE_PROCESS while shares run)"
        return
    fi
    if [ "$(id -u)" != 0 ]; then
        skip "two shares of one GPU" "needs root (the MPS daemon's shm mount, cdi-apply's container)"
        return
    fi
    if ! budget_ok 180; then
        check "two shares of one GPU" 1 "skipped: the run is already $(elapsed_s) s old"
        return
    fi
    smi_path="${driver_root%/}/usr/bin:$PATH"
    shares_run
    shares_stop
}

shares_run() {
    node=${dra_node:-gpu-smoke-node}
    mkdir -p "$T/api9" "$T/cdi-shares" "$S/r9" "$S/p9" "$T/mpsroot"
    rm -f "$T/api.in"
    mv -f "$T/api.out" "$T/api7.out" 2>/dev/null
    api_start "$T/api9" "$node" "two shares of one GPU" || return
    # the runner: its own name through the loader, its root in $T (not /mps)
    (PATH="$smi_path" GDP_MPS_CONTAINER_ROOT="$T/mpsroot" exec "$B/lib/ld-linux-x86-64.so.2" \
        --library-path "$libpath" --argv0 mps-control-daemon "$B/bin/gpu-device-plugin" \
        --driver-root="$driver_root" --driver-root-ctr-path="$driver_root" \
        --dra --kubelet-plugins-directory-path="$S/p9") >"$T/runner.log" 2>&1 &
    runner_pid=$!
    if ! wait_for "$T/runner.log" 'running the MPS control daemons of claims' 20; then
        check "MPS runner" 1 "not running in 20 s: $(tail -n 3 "$T/runner.log" | tr '\n' ' ')"
        return
    fi
    plugin 0 --dra --dra-consumable-capacity --kubeconfig="$T/api9/kubeconfig" --node-name="$node" \
        --kubelet-registrar-directory-path="$S/r9" --kubelet-plugins-directory-path="$S/p9" \
        --cdi-root="$T/cdi-shares" >"$T/dra9.log" 2>&1 &
    dra_pid=$!
    if ! wait_for "$T/dra9.log" "ResourceSlices of node $node are up to date" 20; then
        check "two shares of one GPU" 1 "serve --dra --dra-consumable-capacity: no slice in 20 s: $(tail -n 2 "$T/dra9.log" | tr '\n' ' ')"
        return
    fi
    api rs-dump
    grep '^rs ' "$T/api.out" | cut -d' ' -f3- >"$T/slices"
    echo "ResourceSlices as written (shares: consumable capacity):"
    sed 's/^/  /' "$T/slices"
    dev=gpu-0
    # (uuid_of's split misses devices that start with allowMultipleAllocations)
    gpu_uuid=$(share_field "$dev" '"uuid":[{]"string":"[^"]*"' 18)
    cap=$(share_field "$dev" '"memory":[{]"requestPolicy":.*"value":"[^"]*"' 0 | sed 's/.*"value":"//')
    if [ -z "$cap" ] || [ -z "$gpu_uuid" ]; then
        check "two shares of one GPU" 1 "no memory capacity or uuid of $dev in the slice: $(head -c 300 "$T/slices")"
        return
    fi
    gib=$(($(bytes "$cap") / 1073741824 / 4))
    [ "$gib" -ge 1 ] || gib=1
    within=$((gib * 1024 - 256))
    beyond=$((gib * 1024 + 256))
    mode_before=$(compute_mode "$gpu_uuid")
    major=${driver%%.*}
    if [ "${major:-0}" -ge 615 ] 2>/dev/null; then
        mech="MPS v3 namespace limit"
    else
        mech="MPS client limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)"
    fi
    echo "$dev ($gpu_uuid): memory $cap published, two shares of ${gib}Gi; compute mode before: $mode_before; driver ${driver:-?}: $mech"
    ua=5a0e0000-0000-4000-8000-0000000005a1
    ub=5a0e0000-0000-4000-8000-0000000005b2
    api rc-json "$(share_claim share-a "$ua" $dev 5a0e5a1e-0000-4000-8000-00000000000a "${gib}Gi")"
    api rc-json "$(share_claim share-b "$ub" $dev 5a0e5a1e-0000-4000-8000-00000000000b "${gib}Gi")"
    set --
    for c in a b; do
        rm -rf "$T/ctr-$c"
        mkdir -p "$T/ctr-$c"
        cp -a "$B/rootfs" "$T/ctr-$c/rootfs" || { check "two shares of one GPU" 1 "copying the rootfs failed"; return; }
        if [ -n "${MOCK_NVML_CONFIG:-}" ] && [ -f "$MOCK_NVML_CONFIG" ]; then
            mkdir -p "$T/ctr-$c/rootfs/etc/nvml-sim"
            cp "$MOCK_NVML_CONFIG" "$T/ctr-$c/rootfs/etc/nvml-sim/profile.yaml"
            set -- --env MOCK_NVML_CONFIG=/etc/nvml-sim/profile.yaml
        fi
    done
    # Inside share-b's dra-smoke (both prepared): share-a's container, share-b's container,
    # the compute mode meanwhile. $1..: cdi-apply's extra options.
    cat >"$T/shares-inner.sh" <<EOF
for c in a b; do
    if [ \$c = a ]; then spec=\$SHARE_A_SPEC devs=\$SHARE_A_DEVICES; else spec=\$GDP_CDI_SPEC devs=\$GDP_CDI_DEVICES; fi
    timeout 35 "$B/lib/ld-linux-x86-64.so.2" --library-path "$B/lib" "$B/bin/cdi-apply" -v \\
        --rootfs "$T/ctr-\$c/rootfs" "\$@" --spec "\$spec" --device "\$devs" -- \\
        /usr/local/bin/cuda-probe $within $beyond >"$T/share-\$c.out" 2>&1
    echo "exit \$?" >>"$T/share-\$c.out"
done
PATH="$smi_path" timeout 15 nvidia-smi --query-gpu=compute_mode --format=csv,noheader -i $gpu_uuid >"$T/mode.during" 2>&1
EOF
    # shellcheck disable=SC2016 # expanded by those shells
    timeout 120 "$B/bin/go-client" dra-smoke "$S/r9" "$T/cdi-shares" default share-a "$ua" -- \
        sh -c 'export SHARE_A_SPEC="$GDP_CDI_SPEC" SHARE_A_DEVICES="$GDP_CDI_DEVICES"; exec "$@"' sh \
        "$B/bin/go-client" dra-smoke "$S/r9" "$T/cdi-shares" default share-b "$ub" -- \
        sh "$T/shares-inner.sh" "$@" >"$T/shares.out" 2>&1
    rc=$?
    grep -v '^  spec|' "$T/shares.out"
    n_ok=0
    for c in a b; do
        echo "share-$c's container (cdi-apply + cuda-probe $within $beyond):"
        grep -E '^(count|gpu|memalloc|alloc|exit|cuda-probe|cdi-apply: )' "$T/share-$c.out" | sed 's/^/  /'
        u=$ua
        [ $c = a ] || u=$ub
        # its spec as dra-smoke showed it: the env the share's container gets
        awk -v f="claim_$u.yaml" 'index($0, "cdi spec: ") == 1 { on = index($0, f) > 0; next }
            on && /^  spec\|/ { print; next } { on = 0 }' "$T/shares.out" >"$T/spec-$c"
        lim=$(grep -o 'CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=[^",]*' "$T/spec-$c" | head -n 1)
        pipe=$(grep -o 'CUDA_MPS_PIPE_DIRECTORY=[^",]*' "$T/spec-$c" | head -n 1)
        grep -qx "alloc $within MiB ok" "$T/share-$c.out"
        check "share-$c: ${within} MiB within its ${gib}Gi allocated" $? "$mech; the spec: ${lim:-no CUDA_MPS_PINNED_DEVICE_MEM_LIMIT}, ${pipe:-no CUDA_MPS_PIPE_DIRECTORY}"
        got=$(sed -n "s/^alloc $beyond MiB //p" "$T/share-$c.out")
        case $got in failed:*) ok=0 ;; *) ok=1 ;; esac
        check "share-$c: ${beyond} MiB beyond its ${gib}Gi refused" $ok "${got:-no answer}; $mech"
        grep -qx 'exit 0' "$T/share-$c.out" && n_ok=$((n_ok + 1))
    done
    mode_during=$(head -n 1 "$T/mode.during" 2>/dev/null)
    [ $rc = 0 ] && [ $n_ok = 2 ] && [ "$(grep -c '^unprepare: .* the spec file removed$' "$T/shares.out")" = 2 ]
    check "two shares of one GPU prepared together and unprepared" $? "go-client exit status $rc, $n_ok of 2 containers exited 0, compute mode while prepared: ${mode_during:-?}"
}

# From the script's cleanup, on every exit once section 9 began: the runner gets SIGTERM
# (30 s, then SIGKILL). A run cut short (Ctrl-C reaches the whole process group) leaves
# the claims prepared, and the runner leaves their MPS daemons running, as it does for a
# plugin's restart: here each daemon in the plugins directory is told to quit, its mounts
# are taken off, and gpu-0's compute mode is set back to the one recorded if it differs.
shares_cleanup() {
    if [ -n "${runner_pid:-}" ]; then
        (sleep 30 && kill -9 "$runner_pid") >/dev/null 2>&1 </dev/null &
        kill -TERM "$runner_pid" 2>/dev/null
        wait "$runner_pid" 2>/dev/null
        kill "$!" 2>/dev/null
        runner_pid=''
    fi
    [ -n "${gpu_uuid:-}" ] || return 0
    for d in "$S"/p9/gpu.nvidia.com/mps/*/pipe; do
        [ -S "$d/control" ] || continue
        echo quit | PATH="$smi_path" CUDA_MPS_PIPE_DIRECTORY="$d" CUDA_MPS_LOG_DIRECTORY="${d%/pipe}/log" \
            timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
        echo "gpu-smoke: cleanup: told the MPS daemon in $d to quit" >&2
    done
    awk -v p="$S/p9/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r |
        while read -r m; do umount -l "$m" && echo "gpu-smoke: cleanup: unmounted $m" >&2; done
    now=$(compute_mode "$gpu_uuid")
    [ -n "${mode_before:-}" ] && [ "$now" != "$mode_before" ] || return 0
    want=$(echo "$mode_before" | tr '[:lower:]' '[:upper:]')
    PATH="$smi_path" timeout 20 nvidia-smi -i "$gpu_uuid" -c "$want" >/dev/null 2>&1
    echo "gpu-smoke: cleanup: compute mode of $gpu_uuid was $now, set back to $want: now $(compute_mode "$gpu_uuid")" >&2
}

shares_stop() {
    if [ -n "${dra_pid:-}" ]; then
        kill -TERM "$dra_pid"
        wait "$dra_pid"
        echo "serve --dra --dra-consumable-capacity: exit status $?, log:"
        sed 's/^/  /' "$T/dra9.log"
        dra_pid=''
    fi
    if [ -n "${runner_pid:-}" ]; then
        # the share's daemon goes with the last claim; the runner then holds none
        (sleep 30 && kill -9 "$runner_pid") >/dev/null 2>&1 </dev/null &
        dog=$!
        kill -TERM "$runner_pid"
        wait "$runner_pid"
        rc=$?
        kill "$dog" 2>/dev/null
        runner_pid=''
        echo "MPS runner log:"
        sed 's/^/  /' "$T/runner.log"
        check "MPS runner SIGTERM" $rc "exit status $rc"
    fi
    exec 7>&-
    wait "$api_pid" 2>/dev/null
    api_pid=''
    [ -n "${gpu_uuid:-}" ] || return
    mode_after=$(compute_mode "$gpu_uuid")
    [ -n "$mode_before" ] && [ "$mode_after" = "$mode_before" ]
    ok=$?
    check "compute mode restored" $ok "$gpu_uuid: before $mode_before, while the shares ran ${mode_during:-?}, after $mode_after"
    if [ $ok = 0 ]; then
        now="compute mode EXCLUSIVE_PROCESS during section 9 (read then: ${mode_during:-?}), restored"
    else
        now="SEE THE FAILED CHECK: compute mode of $gpu_uuid $mode_before before section 9, $mode_after after"
    fi
    settings_changed="${settings_changed:+$settings_changed; }$now"
}
