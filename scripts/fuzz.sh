#!/bin/sh
# Fuzz the plugin's input parsers with libFuzzer (clang, -fsanitize=fuzzer,address,undefined).
#   scripts/fuzz.sh [SECONDS]   build the fuzz targets in build-fuzz/ and run each for SECONDS
#                               (default 60) from its checked-in corpus; exit 1 on any crash,
#                               leak, UB report or timeout (the input is left in
#                               build-fuzz/artifacts/; add it to the corpus once fixed)
#   scripts/fuzz.sh --deps      only install clang and llvm (idempotent)
#   scripts/fuzz.sh --build     only build the fuzz targets (.ci/run makes them early, at
#                               a low priority, while the test suites wait on timers)
#   scripts/fuzz.sh --merge     after a run: add the inputs libFuzzer found that reach new
#                               code to the checked-in corpora (libFuzzer -merge=1)
#   scripts/fuzz.sh --coverage  clang source-based coverage build in build-fuzzcov/: replay
#                               each corpus and print the line coverage of the files each
#                               target claims
# The corpus replay itself is an ordinary meson test (suites fuzz, config, sim).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)

# name | libFuzzer binary | replay binary | corpus dirs (first: the one --merge grows) | claimed
# files ("file@TEXT": only the lines before the first line containing TEXT)
targets="dp|tests/fuzz/fuzz-dp-libfuzzer|tests/fuzz/fuzz-dp|tests/fuzz/corpus/dp|src/kubelet/dp_service.c src/output/allocate.c src/policy/placement.c src/policy/topo.c src/policy/replicas.c
http|tests/fuzz/fuzz-http-libfuzzer|tests/fuzz/fuzz-http|tests/fuzz/corpus/http|src/http/http.c src/metrics/metrics.c
ldcache|tests/fuzz/fuzz-ldcache-libfuzzer|tests/fuzz/fuzz-ldcache|tests/fuzz/corpus/ldcache|src/node/ldcache.c
elf|tests/fuzz/fuzz-elf-libfuzzer|tests/fuzz/fuzz-elf|tests/fuzz/corpus/elf|src/node/elf.c
grpc-server|tests/fuzz/fuzz-grpc-server-libfuzzer|tests/fuzz/fuzz-grpc-server|tests/fuzz/corpus/grpc-server|src/grpc/grpc_server.c src/grpc/grpc_server_stream.c src/grpc/grpc_common.c
config|tests/config/fuzz-config-libfuzzer|tests/config/fuzz-config|tests/config/corpus|src/config/config-file.c src/config/config-file-sections.c src/config/config-health.c src/config/config-options.c src/config/config-load.c src/config/config-check.c src/config/config.c src/config/config-print.c src/config/config-args.c src/config/config-cm.c
vgpu|tests/labels/fuzz-vgpu-libfuzzer|tests/labels/fuzz-vgpu|tests/labels/corpus|src/node/host.c@discover_vgpu src/labels/labels.c
kube|tests/kube/fuzz-kube-libfuzzer|tests/kube/fuzz-kube|tests/kube/corpus|src/kube/kube-config.c src/kube/kube-names.c src/kube/kube-watch.c@meta_str
dra-request|tests/dra/fuzz-dra-request-libfuzzer|tests/dra/fuzz-dra-request|tests/dra/corpus-request|src/dra/dra-request.c
dra-claims|tests/dra/fuzz-dra-claims-libfuzzer|tests/dra/fuzz-dra-claims|tests/dra/corpus|src/dra/dra-claim.c src/dra/dra-config.c src/dra/dra-checkpoint.c
sim-profile|tests/sim/fuzz-profile|tests/sim/fuzz-profile-replay|tests/sim/corpus sim/profiles tests/sim/profiles tests/data/nvml-mock-profiles|sim/nvml/sim-profile.c sim/nvml/sim-profile-topo.c sim/nvml/sim-yaml.c"

deps() {
    missing=""
    for p in clang llvm libclang-rt-dev; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "installing:$missing" >&2
    $SUDO apt-get update -qq >&2 || true
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >&2
}

field() { echo "$1" | cut -d'|' -f"$2"; }

# Build one target; its output only when the build fails (clang may warn where gcc did not).
quiet_ninja() {
    out=$(ninja -C "$1" "$2" 2>&1) || { echo "$out" | tail -n 60 >&2; echo "fuzz.sh: building $2 failed" >&2; exit 1; }
}

coverage() {
    dir=build-fuzzcov
    [ -d "$dir" ] || CC=clang meson setup "$dir" --buildtype=debug -Dwerror=true \
        -Dc_args='-fprofile-instr-generate -fcoverage-mapping' \
        -Dc_link_args=-fprofile-instr-generate >/dev/null
    echo "$targets" | while IFS= read -r t; do
        quiet_ninja "$dir" "$(field "$t" 3)"
    done
    mkdir -p "$dir/prof"
    echo "$targets" | while IFS= read -r t; do
        name=$(field "$t" 1)
        rm -f "$dir/prof/$name".*
        # shellcheck disable=SC2046
        LLVM_PROFILE_FILE="$dir/prof/$name.profraw" "$dir/$(field "$t" 3)" \
            $(field "$t" 4) >/dev/null
        llvm-profdata merge -o "$dir/prof/$name.profdata" "$dir/prof/$name.profraw"
        echo "== $name: line coverage of its corpus replay"
        llvm-cov show "$dir/$(field "$t" 3)" -instr-profile="$dir/prof/$name.profdata" \
            >"$dir/prof/$name.txt"
        # shellcheck disable=SC2046
        python3 -c '
import sys
# llvm-cov show: a "<path>:" line opens each file, then "<line>|<count>|<source>" lines
# (no count: no code on that line)
files, cur = {}, None
for line in open(sys.argv[1]):
    if line.endswith(":\n") and "|" not in line:
        cur = files.setdefault(line[:-2].replace(sys.argv[2] + "/", ""), [])
    elif cur is not None:
        parts = line.split("|", 2)
        if len(parts) == 3 and parts[0].strip().isdigit():
            cur.append((parts[1].strip(), parts[2]))
for claim in sys.argv[3:]:
    path, _, stop = claim.partition("@")
    hit = total = 0
    for count, src in files.get(path, []):
        if stop and stop in src:
            break
        if count:
            total += 1
            hit += count != "0"
    what = path + (" (lines before " + stop + ")" if stop else "")
    print("  %-44s %6.2f%% of %4d lines" % (what, 100.0 * hit / max(total, 1), total))
' "$dir/prof/$name.txt" "$root" $(field "$t" 5)
    done
}

build() {
    deps
    dir=build-fuzz
    [ -d "$dir" ] || CC=clang meson setup "$dir" --buildtype=debugoptimized -Dwerror=true \
        -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args='-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined' >/dev/null
    echo "$targets" | while IFS= read -r t; do
        quiet_ninja "$dir" "$(field "$t" 2)"
    done
}

merge() {
    dir=build-fuzz
    echo "$targets" | while IFS= read -r t; do
        name=$(field "$t" 1)
        [ -d "$dir/found/$name" ] || continue
        seeds=$(field "$t" 4 | cut -d' ' -f1)
        "$dir/$(field "$t" 2)" -merge=1 "$seeds" "$dir/found/$name" 2>&1 | grep -E 'MERGE-OUTER: [0-9]+ new files' || true
    done
}

# One target for SECONDS; its final stats, or the log's tail and a line in $dir/failed.
fuzz_one() {
    name=$1 secs=$2
    t=$(echo "$targets" | grep "^$name|")
    mkdir -p "$dir/found/$name"
    dict=""
    [ -f "tests/fuzz/dict/$name.dict" ] && dict="-dict=tests/fuzz/dict/$name.dict"
    # shellcheck disable=SC2046,SC2086
    if ! "$dir/$(field "$t" 2)" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
            -malloc_limit_mb=512 -print_final_stats=1 $dict \
            -artifact_prefix="$dir/artifacts/$name-" "$dir/found/$name" \
            $(field "$t" 4) >"$dir/$name.log" 2>&1; then
        { echo "== fuzzing $name for ${secs}s: FAILED"; tail -n 60 "$dir/$name.log"; } >&2
        echo "$name" >>"$dir/failed"
    else
        { echo "== fuzzed $name for ${secs}s"
          grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$dir/$name.log" || true; } >&2
    fi
}

# Each target runs for the whole SECONDS; libFuzzer uses one core, so the targets run in
# as many lanes as there are cores (nproc; at most 4), each lane one target after another.
run() {
    secs=$1
    dir=build-fuzz
    mkdir -p "$dir/artifacts"
    rm -f "$dir/failed"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
    lanes=$(nproc 2>/dev/null || echo 1)
    [ "$lanes" -ge 1 ] || lanes=1
    [ "$lanes" -le 4 ] || lanes=4
    lane=0
    while [ "$lane" -lt "$lanes" ]; do
        (
            i=0
            for name in $(echo "$targets" | cut -d'|' -f1); do
                [ $((i % lanes)) -eq "$lane" ] && fuzz_one "$name" "$secs"
                i=$((i + 1))
            done
        ) &
        lane=$((lane + 1))
    done
    wait
    if [ -s "$dir/failed" ]; then
        echo "fuzz: crashes in: $(tr '\n' ' ' <"$dir/failed")(inputs in $dir/artifacts/)" >&2
        exit 1
    fi
}

case "${1:-}" in
--coverage) deps; coverage ;;
--merge) merge ;;
--deps) deps ;;
--build) build ;;
*) build; run "${1:-60}" ;;
esac
