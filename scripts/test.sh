#!/bin/sh
# Build and run the whole test suite (unit, simulator, gRPC, config, topology, health,
# integration against the simulated node and the test kubelet, Python grpcio client), then
# the e2e suite: a real single-node Kubernetes running the product image (tests/e2e/).
#   scripts/test.sh            normal build in build-test/, every suite, e2e last
#   scripts/test.sh --quick    the same without the e2e suite (local iteration)
#   scripts/test.sh --asan     AddressSanitizer + UBSan build in build-asan/ (no e2e: it
#                              tests the image and the manifests, not memory safety)
#   a second argument --build-only: build, run nothing (.ci/run makes the sanitizer build
#   early, at a low priority, while the first run's suites wait on timers)
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
dir=build-test
opts=""
e2e=1
[ "${1:-}" = "--quick" ] && e2e=""
if [ "${1:-}" = "--asan" ]; then
    e2e=""
    dir=build-asan
    opts="-Db_sanitize=address,undefined -Db_lundef=false"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
fi
[ -d "$dir" ] || meson setup "$dir" --buildtype=debugoptimized -Dwerror=true $opts
ninja -C "$dir"
[ "${2:-}" != "--build-only" ] || exit 0
# Tests leave nothing in $TMPDIR (docs/testing.md): the suites run with a private one,
# and whatever is left in it at the end fails the run, listed, before it is removed.
tmp=$(mktemp -d)
finish() {
    rc=$?
    if [ -n "$(ls -A "$tmp")" ]; then
        echo "scripts/test.sh: the tests left this behind in \$TMPDIR ($tmp):" >&2
        ls -lA "$tmp" >&2
        [ "$rc" -ne 0 ] || rc=1
    fi
    chmod -R u+rwx "$tmp" 2>/dev/null || true
    rm -rf "$tmp"
    exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export TMPDIR="$tmp"
if [ -n "${MESON_TEST_ARGS:-}" ]; then
    meson test -C "$dir" --print-errorlogs --num-processes 2 $MESON_TEST_ARGS
else
    # Suite attack-wait (two tests that spend ~2 min each waiting out the plugin's real
    # default retry and heal periods) runs in a meson run of its own, beside the rest
    # instead of in two of its slots; its output follows the main run's. --no-rebuild:
    # ninja ran above, and two meson runs must not both start it in one build directory.
    waitlog="$dir/meson-logs/attack-wait.out"
    meson test -C "$dir" --no-rebuild --suite attack-wait --logbase testlog-attack-wait \
        --print-errorlogs --num-processes 2 >"$waitlog" 2>&1 &
    waitpid=$!
    trap 'kill "$waitpid" 2>/dev/null; exit 130' INT
    trap 'kill "$waitpid" 2>/dev/null; exit 143' TERM
    main_rc=0
    meson test -C "$dir" --no-rebuild --no-suite attack-wait --print-errorlogs \
        --num-processes 2 || main_rc=$?
    wait_rc=0
    wait "$waitpid" || wait_rc=$?
    trap 'exit 130' INT
    trap 'exit 143' TERM
    echo "--- suite attack-wait (run beside the above; $waitlog):"
    cat "$waitlog"
    [ "$main_rc" -eq 0 ] || exit "$main_rc"
    [ "$wait_rc" -eq 0 ] || exit "$wait_rc"
fi
# The e2e suite streams its progress and the kubectl output it asserts on (--verbose).
[ -z "$e2e" ] || meson test -C "$dir" --setup e2e --suite e2e --print-errorlogs --verbose
