#!/bin/sh
# gpu-smoke: scripts/gpu-smoke.sh bundle, then `run` from the unpacked bundle with
# `env -i PATH=<a query-only nvidia-smi>:/usr/bin:/bin`, the a100 mock profile, and a
# driver root that nvml-sim-render --driver-root lays out (the simulated
# libnvidia-ml.so.<ver>, the libcuda and nvidia-smi stand-ins; --driver-root, found the
# way a real host's driver is) with, as root, its dev/ holding NVIDIA's character devices
# (195:<minor>, nvidiactl; no driver behind them). Asserts every section and check (DRA's
# against the bundled fake API server; section 8: a claim of gpu-7 applied by cdi-apply
# to the bundled rootfs, cuda-probe in it seeing exactly that GPU as GPU 0 and allocating,
# no hook binary here so the spec's SONAME mounts; the settings nvidia-smi reports the
# same after; run --shares, section 9: two 10Gi shares of gpu-0 under the MPS runner with
# the simulator's MPS stand-in, in each one's container 9984 MiB allocated and 10496 MiB
# refused by the MPS client limit, gpu-0's compute mode EXCLUSIVE_PROCESS meanwhile and
# Default after), exit 0, and that the run removed its temp dir; then that a host without
# NVML fails with the line that says so, and that check-nvml refuses a binary naming an
# NVML setter. Not root: sections 8 and 9 must be SKIPPED with the reason (under
# CI=true that fails the test: the section must run in CI).
set -u
: "${GDP_BUILD_DIR:?}" "${GDP_SOURCE_DIR:?}" "${GDP_TEST_DATA:?}"
profile="$GDP_TEST_DATA/nvml-mock-profiles/a100.yaml"
[ -f "$profile" ] || { echo "gpu-smoke: missing fixture $profile"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/gdp-gpu-smoke.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$GDP_SOURCE_DIR/scripts/gpu-smoke.sh" bundle --build-dir "$GDP_BUILD_DIR" --no-build \
    "$T/gpu-smoke.tar.gz" || { echo "FAIL: bundle"; exit 1; }
mkdir -p "$T/host" "$T/empty-driver" "$T/tmp" "$T/bin"
tar -xzf "$T/gpu-smoke.tar.gz" -C "$T/host" || { echo "FAIL: unpack"; exit 1; }
"$GDP_BUILD_DIR/sim/nvml/nvml-sim-render" --profile "$profile" --driver-root "$T/driver" ||
    { echo "FAIL: nvml-sim-render --driver-root"; exit 1; }
root=0
if [ "$(id -u)" = 0 ]; then
    root=1
    mkdir -p "$T/driver/dev"
    for i in 0 1 2 3 4 5 6 7; do mknod "$T/driver/dev/nvidia$i" c 195 $i; done
    mknod "$T/driver/dev/nvidiactl" c 195 255 && mknod "$T/driver/dev/nvidia-uvm" c 510 0 &&
        chmod 666 "$T"/driver/dev/* || { echo "FAIL: mknod in $T/driver/dev"; exit 1; }
elif [ "${CI:-}" = true ]; then
    fail "not root: section 8 (the driver in a container) cannot run, and CI=true wants it"
fi
# nvidia-smi as a host has it: section 1's and section 8's settings (the profile's 8
# GPUs; the same answer every time: a setting that changed would show), section 9's
# compute mode of GPU 0 (Default, or what `-c` last set: the MPS runner's), and `-c`, which
# the simulator's stand-in (moved to nvidia-smi.sim in the driver root) carries out through
# the simulated NVML. The driver root's nvidia-smi (first on the runner's PATH) is this one.
mode="$T/compute-mode"
echo Default >"$mode"
mv "$T/driver/usr/bin/nvidia-smi" "$T/driver/usr/bin/nvidia-smi.sim" || { echo "FAIL: no nvidia-smi stand-in"; exit 1; }
cat >"$T/bin/nvidia-smi" <<SMI
#!/bin/sh
case "\$*" in
"-i GPU-12345678-1234-1234-1234-123456780000 -c EXCLUSIVE_PROCESS") echo Exclusive_Process >"$mode" ;;
"-i GPU-12345678-1234-1234-1234-123456780000 -c DEFAULT") echo Default >"$mode" ;;
esac
case "\$*" in
*--query-gpu=index,uuid,compute_mode,*)
    for i in 0 1 2 3 4 5 6 7; do
        m=Default; [ \$i != 0 ] || m=\$(cat "$mode")
        echo "\$i, GPU-12345678-1234-1234-1234-12345678000\$i, \$m, Enabled, Disabled, Disabled, Enabled, Enabled, 400.00 W, 1410 MHz, 1215 MHz"
    done ;;
"--query-gpu=compute_mode --format=csv,noheader -i GPU-12345678-1234-1234-1234-123456780000") cat "$mode" ;;
*--query-gpu=*) echo "index, name"; echo "0, NVIDIA A100-SXM4-40GB" ;;
*-c\ *) LD_LIBRARY_PATH="$T/driver/usr/lib/x86_64-linux-gnu" MOCK_NVML_CONFIG="$profile" \\
    exec "$T/driver/usr/bin/nvidia-smi.sim" "\$@" ;;
*) echo "nvidia-smi (gpu-smoke test): only --query-gpu and -c are answered" >&2; exit 2 ;;
esac
SMI
chmod 755 "$T/bin/nvidia-smi"
cp "$T/bin/nvidia-smi" "$T/driver/usr/bin/nvidia-smi"
for f in gpu-smoke.sh gpu-smoke-container.sh MANIFEST nvml-functions.txt bin/gpu-device-plugin \
    bin/go-client bin/bench-topo bin/bench-metrics bin/fake-apiserver bin/cdi-apply \
    lib/ld-linux-x86-64.so.2 lib/libc.so.6 rootfs/usr/local/bin/cuda-probe \
    rootfs/usr/lib/x86_64-linux-gnu/libc.so.6 rootfs/lib64/ld-linux-x86-64.so.2; do
    [ -e "$T/host/gpu-smoke/$f" ] || fail "the bundle lacks $f"
done

# Under a TMPDIR longer than 32 bytes the sockets' directory is made in /tmp.
dra_dirs() { ls -d /tmp/gdp-smoke.* 2>/dev/null | sort; }
dra_dirs >"$T/dra-dirs-before"
env -i PATH="$T/bin:/usr/bin:/bin" TMPDIR="$T/tmp" MOCK_NVML_CONFIG="$profile" \
    "$T/host/gpu-smoke/gpu-smoke.sh" run --quick --shares --driver-root "$T/driver" >"$T/out" 2>&1
rc=$?
dra_dirs | comm -13 "$T/dra-dirs-before" - | grep . && fail "the run left the above in /tmp"
cat "$T/out"
[ $rc = 0 ] || fail "run exited $rc"
for want in '^== 1\. Host, GPU and driver ==$' '^GPU models: 8 x NVIDIA A100-SXM4-40GB$' \
    '^driver version: 550\.163\.01' '^== 2\. list ==$' '^nvidia\.com/gpu  *GPU-' \
    '^== 3\. labels ==$' '^nvidia\.com/gpu\.product=NVIDIA-A100-SXM4-40GB$' \
    '^== 4\. Registration and Allocate' '^register: version=v1beta1 endpoint=nvidia-gpu\.sock resource=nvidia\.com/gpu' \
    '^allocate: GPU-.* -> envs \[NVIDIA_VISIBLE_DEVICES=GPU-' '^smoke ok$' \
    "^plugin (pid [0-9]*) loaded NVML from: .*/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml\.so\.550\.163\.01\$" \
    '^== 5\. Xid event set' 'PASS  Xid event set: 8 GPU(s) watched, 8 registered' \
    '^== 6\. Figures' '^| start → Registered .* | [0-9.]* ms |$' '^| RSS after registration (VmRSS / VmHWM) | [0-9]* / [0-9]* KiB |$' \
    '^| threads | [0-9]* |$' '^| Allocate, grpc-go, unpinned (p50 / p99 / max) | [0-9.]* / [0-9.]* / [0-9.]* µs |$' \
    '^| plugin CPU per Allocate (all threads) | [0-9.]* µs |$' '^| go-client CPU per Allocate .* | [0-9.]* µs |$' \
    '^| bench-topo dgx-a100: ' '^| bench-metrics: per RPC' \
    '^== 7\. DRA ' 'PASS  DRA ResourceSlice: 8 devices, pool generation 1; gpu-0,gpu-1,' \
    '^getinfo: type=DRAPlugin name=gpu\.nvidia\.com endpoint=.*/plugins/gpu\.nvidia\.com/dra\.sock versions=v1\.DRAPlugin,' \
    '^health: gpu-smoke-node/gpu-0=Healthy ' \
    '^prepare: [0-9]* µs, gpu-smoke-node/gpu-0 cdi=k8s\.gpu\.nvidia\.com/claim=5a0e0000-0000-4000-8000-000000000000-gpu-0$' \
    '^  spec|             "path": "/dev/nvidia0",$' '^unprepare: [0-9]* µs, the spec file removed$' '^dra-smoke ok$' \
    'PASS  DRA Prepare benchmark: 8 of 8 claims' 'PASS  DRA SIGTERM: exit status 0, 0 claim spec(s) left' \
    '^| DRA: first Prepare of a 1-GPU claim, grpc-go, 250 ms apart (p50 / p99) | [0-9.]* / [0-9.]* ms |$' \
    '^== 8\. The driver in a container ' 'PASS  GPU settings unchanged: 8 GPU(s): compute mode, ' \
    '^claim default/ctr of gpu-7 (GPU-12345678-1234-1234-1234-123456780007); ' \
    '^  spec| *"containerPath": "/usr/lib/x86_64-linux-gnu/libcuda\.so\.1",$' \
    '^unprepare: [0-9]* µs, the spec file removed$' 'PASS  DRA SIGTERM: exit status 0, 0 claim spec(s) left' \
    '^== 10\. Summary ==$'; do
    grep -q -- "$want" "$T/out" || fail "no line matching: $want"
done
if [ $root = 1 ]; then # the container: exactly the claimed GPU, renumbered 0, and 1 MiB on it
    for want in '^cdi-apply| device /dev/nvidia7: mknod c 195:7 0666$' '^count 1$' \
        '^gpu 0 NVIDIA A100-SXM4-40GB GPU-12345678-1234-1234-1234-123456780007$' '^memalloc ok$' \
        '^exec: exit status 0, [0-9]* ms$' \
        '^PASS  driver in a container: driver 550\.163\.01, 1 device(s) seen: NVIDIA A100-SXM4-40GB GPU-12345678-1234-1234-1234-123456780007 (claimed GPU-12345678-1234-1234-1234-123456780007), memalloc ok, [0-9]* ms from .*; no hooks (no nvidia-cdi-hook or nvidia-ctk here): the libraries also at their SONAMEs; device nodes by mknod$' \
        '^| driver in a container: cdi-apply + cuda-probe .* | [0-9]* ms |$' \
        '^== 9\. Two shares of one GPU ' \
        '^gpu-0 (GPU-12345678-1234-1234-1234-123456780000): memory 40Gi published, two shares of 10Gi; compute mode before: Default; driver 550\.163\.01: MPS client limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)$' \
        '^PASS  share-a: 9984 MiB within its 10Gi allocated: MPS client limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT); the spec: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=' \
        '^PASS  share-a: 10496 MiB beyond its 10Gi refused: failed: CUDA_ERROR_OUT_OF_MEMORY (2); MPS client limit' \
        '^PASS  share-b: 9984 MiB within its 10Gi allocated: MPS client limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT); the spec: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=' \
        '^PASS  share-b: 10496 MiB beyond its 10Gi refused: failed: CUDA_ERROR_OUT_OF_MEMORY (2); MPS client limit' \
        '^PASS  two shares of one GPU prepared together and unprepared: go-client exit status 0, 2 of 2 containers exited 0, compute mode while prepared: Exclusive_Process$' \
        '^PASS  MPS runner SIGTERM: exit status 0$' \
        '^PASS  compute mode restored: GPU-12345678-1234-1234-1234-123456780000: before Default, while the shares ran Exclusive_Process, after Default$' \
        '^GPU settings changed: compute mode EXCLUSIVE_PROCESS during section 9 (read then: Exclusive_Process), restored$' \
        '^checks: 23 passed, 0 failed, 0 skipped'; do
        grep -q -- "$want" "$T/out" || fail "no line matching: $want"
    done
else
    for want in '^SKIP  driver in a container: cdi-apply: building a container needs root' \
        '^SKIP  two shares of one GPU: needs root' '^GPU settings changed: none' \
        '^checks: 15 passed, 0 failed, 2 skipped'; do
        grep -q -- "$want" "$T/out" || fail "no line matching: $want"
    done
fi
grep -q '^FAIL' "$T/out" && fail "a check failed"
[ -z "$(ls -A "$T/tmp")" ] || fail "run left $(ls -A "$T/tmp") in its TMPDIR"

# No NVML where the driver should be: one check says so, the run fails, nothing is left.
env -i PATH=/usr/bin:/bin TMPDIR="$T/tmp" \
    "$T/host/gpu-smoke/gpu-smoke.sh" run --driver-root "$T/empty-driver" >"$T/out2" 2>&1
rc=$?
[ $rc = 1 ] || { cat "$T/out2"; fail "run without NVML exited $rc, not 1"; }
grep -q '^FAIL  NVML library: libnvidia-ml.so.1 not found under' "$T/out2" ||
    { cat "$T/out2"; fail "run without NVML does not say that libnvidia-ml.so.1 is missing"; }
[ -z "$(ls -A "$T/tmp")" ] || fail "the failed run left $(ls -A "$T/tmp") in its TMPDIR"

# The read-only gate refuses a setter, and passes the bundled plugin.
printf 'nvmlInit_v2\0nvmlDeviceSetMigMode\0' >"$T/setter"
"$GDP_SOURCE_DIR/scripts/gpu-smoke.sh" check-nvml "$T/setter" >/dev/null 2>"$T/err" &&
    fail "check-nvml accepted nvmlDeviceSetMigMode"
grep -q 'nvmlDeviceSetMigMode' "$T/err" || fail "check-nvml did not name nvmlDeviceSetMigMode"
grep -qx 'nvmlDeviceGetMigMode' "$T/host/gpu-smoke/nvml-functions.txt" ||
    fail "nvml-functions.txt lacks nvmlDeviceGetMigMode"

[ $failures = 0 ] || { echo "gpu-smoke: $failures failure(s)"; exit 1; }
echo "gpu-smoke: ok"
