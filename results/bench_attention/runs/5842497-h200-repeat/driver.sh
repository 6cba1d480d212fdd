#!/usr/bin/env bash
# The canonical benchmark of 5842497's kernels twice more, unchanged (bench_attention.py's defaults,
# as scripts/gpu_sage2_run.sh's bench step), back to back in one call on an H200: how far the ratios
# of the canonical run (results/bench_attention/, same kernels, an earlier call) move.
set -uo pipefail
R=$OUT/repeat; mkdir -p $R
rm -rf .device-deps && mv .device-deps-sa2 .device-deps  # the deps less Catch2 (no tests built here)
source scripts/device/deps.sh
source scripts/device/power_log.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DLOWBIT_TESTS=OFF $LOWBIT_DEPS_CMAKE_ARGS > $R/cmake.log 2>&1
cmake --build build -j16 --target bench_attention > $R/build.log 2>&1 || { tail -20 $R/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/nvidia-smi.csv
for k in 1 2; do
  power_log_start $R/power-clocks-$k.csv
  timeout 240 python3 experiments/bench/bench_attention.py --binary build/experiments/bench_attention --out $R/bench-$k > $R/bench-$k.log 2>&1
  echo "bench $k exit $?"
  power_log_stop
  grep -E "^ +128 +[01] +(8192|16384|32768) |^ +64 +0 +(8192|16384|32768) " $R/bench-$k.log
done
rm -f $R/build.log
tar -czf $OUT/repeat.tgz -C $OUT repeat && rm -rf $R
