#!/usr/bin/env bash
# One device call comparing kernel builds side by side before the full device script runs on the
# faster one (how 00d8644 was chosen over e771902 and a3cafa4: results/attention-gpu/runs/00d8644-h100-variants/).
# Each variants/NAME/ holds check_sage2_gpu, bench_attention, lowbit and GIT_SHA of one commit, built
# beforehand (cmake --build build --target check_sage2_gpu bench_attention lowbit). Per variant: the
# smoke test (a failing variant is dropped), then bench_attention at d = 128 and 64, N = 8K and 16K,
# causal and not; the variant with the most TOPS at d = 128, N = 16K, non-causal is copied into build/
# and scripts/gpu_sage2_run.sh runs on it. Run from the repository root; VARIANTS (default "A B").
set -uo pipefail
OUT=${OUT:-build/results/gpu-run}
mkdir -p "$OUT" /tmp/sage2
best=""; best_tops=0
for v in ${VARIANTS:-A B}; do
  d=variants/$v
  echo "== variant $v ($(cat $d/GIT_SHA))"
  if ! timeout 90 $d/check_sage2_gpu --configs quick --out /tmp/quick-$v > /tmp/quick-$v.log 2>&1; then
    tail -5 /tmp/quick-$v.log; echo "variant $v: smoke test FAILED"; cp /tmp/quick-$v.log "$OUT/"; continue
  fi
  tail -1 /tmp/quick-$v.log
  timeout 120 $d/bench_attention --tokens 8192,16384 --dims 128,64 --causal no,yes --warmup 2 --repeats 10 2>&1 |
    tee /tmp/sage2/variant-$v-bench.txt
  t=$(awk '$(NF-6)==128 && $(NF-5)=="no" && $(NF-4)==16384 {print $(NF-2)}' /tmp/sage2/variant-$v-bench.txt)
  echo "variant $v: d=128 N=16K $t TOPS"
  if [[ -n "$t" ]] && awk -v a="$t" -v b="$best_tops" 'BEGIN{exit !(a>b)}'; then best=$v; best_tops=$t; fi
done
[[ -z "$best" ]] && { echo "no variant passed the smoke test"; exit 1; }
echo "== picked $best ($best_tops TOPS)"; cp variants/$best/GIT_SHA GIT_SHA
mkdir -p build/tests/attention_gpu build/experiments
cp variants/$best/check_sage2_gpu build/tests/attention_gpu/; cp variants/$best/bench_attention variants/$best/lowbit build/experiments/
STEPS="quick check bench checkbench sanitize" DEADLINE=380 bash scripts/gpu_sage2_run.sh
STEPS="ncu" bash scripts/gpu_sage2_run.sh
STEPS="sass cli" bash scripts/gpu_sage2_run.sh
