#!/usr/bin/env bash
# One device call comparing kernel builds side by side, then the full device script on the fastest
# (how 6a1d0c3 was chosen: f6dfbb2:results/attention-gpu/runs/variants/). Run from the repository root.
# Each variants/NAME/ holds check_sage2_gpu, bench_attention, lowbit and GIT_SHA of one commit,
# built beforehand (cmake --build build --target check_sage2_gpu bench_attention lowbit); the first
# of VARIANTS is the kernel already checked in full. Per variant: the smoke test (a failing variant
# is dropped), then bench_attention at d = 128 and 64, N = 8K and 16K, non-causal. The variant with
# the most TOPS at d = 128, N = 16K wins; a later one must beat the best so far by 1.5% (more than
# the run-to-run noise). If the first wins, nothing more runs; otherwise the winner's binaries go
# into build/ and scripts/gpu_sage2_run.sh runs on them. (The first two comparison calls, run1 and
# run2, timed causal too, and run1 asked the second variant for 2%, run2 for nothing.)
set -uo pipefail
OUT=${OUT:-build/results/gpu-run}
mkdir -p "$OUT" /tmp/sage2
read -r -a variants <<< "${VARIANTS:-A B}"
best=""; best_tops=0
for v in "${variants[@]}"; do
  d=variants/$v
  echo "== variant $v ($(cat $d/GIT_SHA))"
  if ! timeout 90 $d/check_sage2_gpu --configs quick --out /tmp/quick-$v > /tmp/quick-$v.log 2>&1; then
    tail -5 /tmp/quick-$v.log; echo "variant $v: smoke test FAILED"; cp /tmp/quick-$v.log "$OUT/"; continue
  fi
  tail -1 /tmp/quick-$v.log
  timeout 120 $d/bench_attention --tokens 8192,16384 --dims 128,64 --causal no --warmup 2 --repeats 10 2>&1 |
    tee /tmp/sage2/variant-$v-bench.txt
  t=$(awk '$(NF-6)==128 && $(NF-5)=="no" && $(NF-4)==16384 {print $(NF-2)}' /tmp/sage2/variant-$v-bench.txt)
  echo "variant $v: d=128 N=16K $t TOPS"
  margin=1.015; [[ $v == "${variants[0]}" ]] && margin=1.0
  if [[ -n "$t" ]] && awk -v a="$t" -v b="$best_tops" -v m=$margin 'BEGIN{exit !(a>b*m)}'; then best=$v; best_tops=$t; fi
done
[[ -z "$best" ]] && { echo "no variant passed the smoke test"; exit 1; }
echo "== picked $best ($best_tops TOPS)"; cp variants/$best/GIT_SHA GIT_SHA
if [[ $best == "${variants[0]}" ]]; then
  echo "$best, checked in full before, is the fastest: no further steps"
  tar -czf "$OUT/sage2-results.tar.gz" -C /tmp sage2; exit 0
fi
mkdir -p build/tests/attention_gpu build/experiments
cp variants/$best/check_sage2_gpu build/tests/attention_gpu/; cp variants/$best/bench_attention variants/$best/lowbit build/experiments/
STEPS="quick check bench checkbench sanitize" DEADLINE=380 bash scripts/gpu_sage2_run.sh
STEPS="ncu" bash scripts/gpu_sage2_run.sh
STEPS="sass cli" bash scripts/gpu_sage2_run.sh
