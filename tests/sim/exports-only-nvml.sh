#!/bin/sh
# The simulated library must export nvml* functions and nothing else.
set -eu
nm=$1
lib=$2
others=$("$nm" -D --defined-only "$lib" | awk '{print $3}' | grep -v '^nvml' || true)
if [ -n "$others" ]; then
    echo "non-NVML symbols exported:" >&2
    echo "$others" >&2
    exit 1
fi
count=$("$nm" -D --defined-only "$lib" | grep -c ' T nvml')
[ "$count" -ge 413 ] || { echo "only $count nvml functions exported" >&2; exit 1; }
echo "ok: $count nvml functions, nothing else"
