#!/bin/sh
# Build and run the whole test suite (unit, simulator, gRPC, config, topology, health,
# integration against the simulated node and the test kubelet, Python grpcio client).
#   scripts/test.sh            normal build in build-test/
#   scripts/test.sh --asan     AddressSanitizer + UBSan build in build-asan/
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
dir=build-test
opts=""
if [ "${1:-}" = "--asan" ]; then
    dir=build-asan
    opts="-Db_sanitize=address,undefined -Db_lundef=false"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
fi
[ -d "$dir" ] || meson setup "$dir" --buildtype=debugoptimized -Dwerror=true $opts
ninja -C "$dir"
meson test -C "$dir" --print-errorlogs --num-processes 2 ${MESON_TEST_ARGS:-}
