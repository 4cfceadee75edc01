#!/bin/sh
# Build gpu-device-plugin and run it on the built-in simulated 8-GPU node against the
# test kubelet: registration, the device list, one Allocate, one preferred allocation.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
[ -d build-demo ] || meson setup build-demo --buildtype=debugoptimized >/dev/null
ninja -C build-demo src/gpu-device-plugin sim/nvml/libnvidia-ml.so.1 sim/nvml/nvml-sim-render >/dev/null
exec /usr/bin/python3 scripts/demo.py build-demo
