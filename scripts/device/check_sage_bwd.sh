#!/usr/bin/env bash
# SageBwd's kernels (kernels/attention/sage_bwd_gpu.hpp) on the lent GPU, from the repository root,
# with binaries built beforehand (carried in build/: test_sage_bwd_gpu, check_sage_bwd_gpu, lowbit):
#   scripts/device/check_sage_bwd.sh [BUILD]   (BUILD: the build folder, default build)
# Runs, logging each to $OUT (the device tool's folder) or BUILD/results/check-sage-bwd:
#   bits.log      test_sage_bwd_gpu: every fp32 bit of O, LSE, dQ, dK, dV against the emulated
#                 Hopper twin on 36 fixed cases (Catch2; a failure prints each tensor's differences)
#   check.log     check_sage_bwd_gpu: the same cases on fresh seeds, exp2/log2 on all 2^32 inputs,
#                 the N = 32768, d = 128 timing
#   run.log       lowbit run backward --device gpu (whole, 2 shards merged, --no-check) through
#                 tests/experiments/gpu_run_check.sh; its results in run/
# Exit 0 when all pass; 1 when any fails (the step is named); 77 when there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${OUT:-$build/results/check-sage-bwd}
mkdir -p "$out"
failed=""
step() {  # NAME LOG COMMAND...
  local name=$1 log=$2
  shift 2
  echo "== $name"
  "$@" 2>&1 | tee "$out/$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 77 ]; then echo "no GPU: skipped"; exit 77; fi
  if [ "$rc" -ne 0 ]; then failed="$failed $name(rc=$rc)"; fi
}
step test_sage_bwd_gpu bits.log "$build/tests/attention_gpu/test_sage_bwd_gpu"
step check_sage_bwd_gpu check.log "$build/tests/attention_gpu/check_sage_bwd_gpu" --seed fresh
step "lowbit run backward" run.log bash tests/experiments/gpu_run_check.sh "$build/experiments/lowbit" "$out/run" python3 \
  backward --datasets synthetic,smollm2 --heads 2 --tokens 200
if [ -n "$failed" ]; then echo "FAILED:$failed"; exit 1; fi
echo "PASS: every step"
