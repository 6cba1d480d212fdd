#!/usr/bin/env bash
# The canonical benchmark again, unchanged (bench_attention.py's defaults, as scripts/gpu_sage2_run.sh's
# bench step), on the kernels of the canonical run (a232d15's, at 5887d3b): how far the ratios move
# between calls and machines.
set -uo pipefail
R=$OUT/repeat; mkdir -p $R
rm -rf .device-deps && mv .device-deps-sa2 .device-deps  # the deps less Catch2 (no tests built here)
source scripts/device/deps.sh
source scripts/device/power_log.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DLOWBIT_TESTS=OFF $LOWBIT_DEPS_CMAKE_ARGS > $R/cmake.log 2>&1
cmake --build build -j16 --target bench_attention > $R/build.log 2>&1 || { tail -20 $R/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/nvidia-smi.csv
power_log_start $R/power-clocks.csv
timeout 240 python3 experiments/bench/bench_attention.py --binary build/experiments/bench_attention --out $R/bench > $R/bench.log 2>&1
echo "bench exit $?"
power_log_stop
rm -f $R/build.log
grep -E " 128 " $R/bench.log | head -40
tar -czf $OUT/repeat.tgz -C $OUT repeat && rm -rf $R
