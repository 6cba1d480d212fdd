#!/usr/bin/env bash
# SageAttention2-8b's own sm90 kernel beside lowbit_ex2 at 5842497's kernels (f45c41c), on an H200, as
# results/bench_attention/sageattention2/README.md: lowbit's benchmark before and after
# SageAttention's (per-thread scales with SDPA and back-to-back timing; per-warp scales, time allowing).
# SageAttention's extensions are JIT-built here while lowbit builds.
set -uo pipefail
R=$OUT/sa2; mkdir -p $R
rm -rf .device-deps && mv .device-deps-sa2 .device-deps  # the deps less Catch2 (no tests built here): the call stays under 64 MiB
source scripts/device/deps.sh
source scripts/device/power_log.sh
start=$SECONDS
python3 experiments/bench/bench_sageattention2.py --build-dir /tmp/sage2-ext --build-only > $R/sa2-build.log 2>&1 &
sa2_build=$!
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DLOWBIT_TESTS=OFF $LOWBIT_DEPS_CMAKE_ARGS > $R/cmake.log 2>&1
cmake --build build -j14 --target bench_attention > $R/build.log 2>&1 || { tail -20 $R/build.log; exit 1; }
echo "lowbit built at +$((SECONDS - start))s"
wait $sa2_build; echo "sa2 build exit $? at +$((SECONDS - start))s: $(tail -2 $R/sa2-build.log | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/nvidia-smi.csv
power_log_start $R/power-clocks.csv
lowbit() { build/experiments/bench_attention --tokens 8192,16384,32768 --dims 128,64 --causal no,yes --exp2 sm90-ex2 --warmup 3 --repeats 20 --json $R/lowbit-$1.json > $R/lowbit-$1.txt 2>&1; echo "lowbit pass $1 exit $? at +$((SECONDS - start))s"; }
lowbit 1
python3 experiments/bench/bench_sageattention2.py --build-dir /tmp/sage2-ext --with-sdpa --loop --tokens 8192,16384,32768 --out $R/per-thread > $R/sa2-per-thread.log 2>&1
echo "sa2 per-thread exit $? at +$((SECONDS - start))s"
lowbit 2
if (( SECONDS - start < 430 )); then
  python3 experiments/bench/bench_sageattention2.py --build-dir /tmp/sage2-ext --qk-quant-gran per_warp --loop --tokens 8192,16384,32768 --out $R/per-warp > $R/sa2-per-warp.log 2>&1
  echo "sa2 per-warp exit $? at +$((SECONDS - start))s"
fi
power_log_stop
cat $R/lowbit-1.txt; grep -E "sage2_8b|sdpa|error|Error" $R/sa2-per-thread.log | head -80
tar -czf $OUT/sa2.tgz -C $OUT sa2 && rm -rf $R
