#!/usr/bin/env bash
# run43: the polynomial build (preset sage2-8b) of 6cefa4e came out 1.5-2.6% slower at d = 128
# non-causal than in earlier calls; runs 39-42 timed the ex2 build only. The tree (6cefa4e's
# kernels) beside `old` (variants/old/: 79e4b71's kernel and sync.cuh, the release after the unit
# barrier with an acquire-release count), bench_attention alone, --exp2 poly5, d = 128, two rounds
# in alternating order, non-causal and causal. No smoke test: both kernels passed their checks
# (6cefa4e-h200, 774a1a1-h100).
set -uo pipefail
source scripts/device/deps.sh
rm -rf build && mkdir -p $OUT /tmp/v/tree /tmp/v/old
# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a $LOWBIT_DEPS_CMAKE_ARGS > $OUT/cmake.log 2>&1
cmake --build build -j16 --target bench_attention > $OUT/build-tree.log 2>&1 && cp build/experiments/bench_attention /tmp/v/tree/
for f in kernels/attention/sage2_kernels.cu kernels/sm90/sync.cuh; do cp $f /tmp/v/$(basename $f).tree; cp variants/old/$f $f; done
cmake --build build -j16 --target bench_attention > $OUT/build-old.log 2>&1 && cp build/experiments/bench_attention /tmp/v/old/
for f in kernels/attention/sage2_kernels.cu kernels/sm90/sync.cuh; do cp /tmp/v/$(basename $f).tree $f; done
echo "built at +${SECONDS}s"
for round in 1 2; do
  order="tree old"; (( round == 2 )) && order="old tree"
  for v in $order; do
    for c in no yes; do
      timeout 60 /tmp/v/$v/bench_attention --tokens 8192,16384 --dims 128 --causal $c --exp2 poly5 --warmup 2 --repeats 10 > $OUT/bench-$c-$v-$round.txt 2>&1
      echo "poly5 causal=$c round $round $v: $(awk '$3 == "poly5" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $OUT/bench-$c-$v-$round.txt)"
    done
  done
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/nvidia-smi.csv
cd $OUT && tar -czf bench.tgz bench-*.txt && rm -f bench-*.txt
