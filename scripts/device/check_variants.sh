#!/usr/bin/env bash
# The sage2-4b kernel family against its emulation on the lent GPU, from the repository root (carry
# .device-deps, see ../shared/device/README.md):
#   scripts/device/check_variants.sh [all|quick]
# Configures build/ (Release, sm_90a), builds check_variants_gpu and runs it with --configs all
# (default) or quick; logs go to $OUT (the device tool's folder) or build/results/check-variants.
# Exit: check_variants_gpu's (0 equal, 1 a difference, 77 no GPU), or 1 when the build fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/results/check-variants}
mkdir -p "$out"
source scripts/device/deps.sh
# shellcheck disable=SC2086  # a list of arguments
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a $LOWBIT_DEPS_CMAKE_ARGS \
  > "$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
cmake --build build -j"$(nproc)" --target check_variants_gpu > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
build/tests/attention_gpu/check_variants_gpu --configs "${1:-all}" 2>&1 | tee "$out/check.log"
exit "${PIPESTATUS[0]}"
