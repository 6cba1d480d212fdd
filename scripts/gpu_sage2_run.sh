#!/usr/bin/env bash
# One call on the lent GPU machine for the sage2-8b kernels (issues 12 and 13): the exponential,
# the bit-exact checks, the sanitizers, accuracy beside SDPA, the SASS, the benchmark, Nsight
# Compute. Runs from the repository root with binaries built beforehand in build/ (carried), or
# builds them (CMake, sm_90a) when they do not run. Everything lands in $OUT/sage2-results.tar.gz
# (the tool brings back few files); the short tables go to stdout. On a machine kept warm from an
# earlier call, build/ may hold binaries of other sources that still run (the tool copies the tree
# with its own file times, so make sees nothing newer): remove build/ first.
#   STEPS="quick exp2 check sanitize accuracy sass bench checkbench cli ncu" (default: all) selects steps (bench also
#   records the GPU's clock and power, power-clocks.csv);
#   quick (a smoke test) failing or hanging stops the run. quickbench (not in the default): the
#   kernels alone at d = 128 and 64, N = 8K and 16K, both exp2 units, no SDPA.
#   EXP2=poly5|sm90-ex2 (default poly5): the exp2 of the kernels the checks, the CLI step and Nsight
#   Compute run (preset sage2-8b or sage2-8b-ex2); bench measures both.
set -uo pipefail
#   DEADLINE=seconds (default 540): a step that would start later than this is skipped, so the
#   archive is written before the tool's 10-minute limit.
OUT=${OUT:-build/results/gpu-run}
R=${WORK:-/tmp}/sage2
mkdir -p "$R" "$OUT"
steps=${STEPS:-"quick exp2 check sanitize accuracy sass bench checkbench cli ncu"}
deadline=${DEADLINE:-540}
exp2=${EXP2:-poly5}
preset=sage2-8b; [[ $exp2 == sm90-ex2 ]] && preset=sage2-8b-ex2
want() {
  [[ " $steps " == *" $1 "* ]] || return 1
  if (( SECONDS > deadline )); then log "skipped $1: past the deadline"; return 1; fi
}
log() { echo "== $(date -u +%H:%M:%S) +${SECONDS}s $*" | tee -a "$R/steps.log"; }
# The .npy exports of the accuracy step stay out (they are made again from the seeds; the tool
# brings back 16 MB a file).
archive() { tar -czf "$OUT/sage2-results.tar.gz" --exclude='*.npy' -C "$(dirname "$R")" sage2; }
trap 'archive; ls -la "$OUT"' EXIT

source scripts/device/deps.sh  # the carried build dependencies, and their libraries for the carried binaries
source scripts/device/power_log.sh
B=build
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv > "$R/nvidia-smi.csv" 2>&1
nvcc --version > "$R/nvcc.txt" 2>&1
if ! "$B/experiments/lowbit" --help > /dev/null 2>&1; then
  log "carried binaries do not run here; building"
  # shellcheck disable=SC2086  # a list of arguments
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a $LOWBIT_DEPS_CMAKE_ARGS > "$R/cmake.log" 2>&1
  cmake --build "$B" -j16 --target lowbit check_sage2_gpu bench_attention > "$R/build.log" 2>&1 || { tail -30 "$R/build.log"; exit 1; }
fi
export LOWBIT_GIT_SHA=${LOWBIT_GIT_SHA:-$(cat GIT_SHA 2>/dev/null || echo unknown)}

if want quick; then
  log "check_sage2_gpu --configs quick (smoke test)"
  if ! timeout 90 "$B/tests/attention_gpu/check_sage2_gpu" --configs quick --exp2 $exp2 --out "$R/check-quick" 2>&1 | tee "$R/check-quick.log"; then
    log "the smoke test failed: stopping"
    exit 1
  fi
  archive
fi
if want exp2; then
  log "verify-exp2 (all 2^32 inputs)"
  timeout 180 "$B/experiments/lowbit" verify-exp2 --output "$R/exp2.json" 2>&1 | tee "$R/exp2.log"
  archive
fi
if want check; then
  log "check_sage2_gpu --configs full"
  real=(); [[ -d experiments/data/smollm2-135m ]] && real=(--real experiments/data/smollm2-135m)  # captured activations (SmolLM2)
  timeout 270 "$B/tests/attention_gpu/check_sage2_gpu" --configs full "${real[@]}" --exp2 $exp2 --out "$R/check-full" 2>&1 | tee "$R/check-full.log"
  archive
fi
if want sanitize; then
  for tool in memcheck racecheck; do
    log "compute-sanitizer $tool"
    timeout 120 compute-sanitizer --tool $tool --print-limit 20 "$B/tests/attention_gpu/check_sage2_gpu" --configs quick \
      --only n200 --exp2 $exp2 --out "$R/sanitize-$tool" > "$R/sanitizer-$tool.log" 2>&1
    echo "exit $?" >> "$R/sanitizer-$tool.log"
    tail -3 "$R/sanitizer-$tool.log"
  done
  archive
fi
if want accuracy; then
  log "accuracy beside SDPA"
  timeout 120 python3 tests/attention_gpu/accuracy_vs_sdpa.py "$R/check-full" 2>&1 | tee "$R/accuracy.log"
  rm -rf "$R/check-full/accuracy"  # the .npy inputs: large, and made again from the seeds
  archive
fi
if want sass; then
  log "SASS"
  cuobjdump -sass "$B/tests/attention_gpu/check_sage2_gpu" > "$R/sass.txt" 2>&1
  python3 - "$R/sass.txt" <<'PY' | tee "$R/sass-summary.txt"
import re, sys
text = open(sys.argv[1]).read()
for block in re.split(r"\n\s*Function : ", text)[1:]:
    name = block.split("\n", 1)[0].strip()
    if "sage2" not in name and "quantize" not in name and "statistics" not in name:
        continue
    ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+([A-Z][A-Z0-9_.]*)", block, re.M)
    count = lambda prefix: sum(1 for o in ops if o.startswith(prefix))
    print(f"{name[:110]}: {len(ops)} instructions, IGMMA {count('IGMMA')}, QGMMA {count('QGMMA')}, "
          f"MUFU {count('MUFU')}, LDL {count('LDL')}, STL {count('STL')}, FFMA {count('FFMA')}")
PY
  gzip -f "$R/sass.txt"
  archive
fi
if want quickbench; then
  log "bench_attention, kernels alone"
  timeout 120 "$B/experiments/bench_attention" --dims 128,64 --tokens 8192,16384 --causal no,yes --exp2 poly5,sm90-ex2 \
    --json "$R/quickbench.json" 2>&1 | tee "$R/quickbench.log"
  archive
fi
if want bench; then
  log "bench_attention with SDPA"
  power_log_start "$R/power-clocks.csv"
  timeout 240 python3 experiments/bench/bench_attention.py --binary "$B/experiments/bench_attention" --out "$R/bench" 2>&1 | tee "$R/bench.log"
  power_log_stop
  archive
fi
if want checkbench; then
  log "check_sage2_gpu --configs bench"
  timeout 240 "$B/tests/attention_gpu/check_sage2_gpu" --configs bench --exp2 $exp2 --out "$R/check-bench" 2>&1 | tee "$R/check-bench.log"
  archive
fi
if want cli; then
  log "lowbit attention --device gpu --check"
  data=tests/data/attention
  timeout 60 "$B/experiments/lowbit" attention --preset $preset --q $data/q_fp16.npy --k $data/k_fp16.npy \
    --v $data/v_fp16.npy --causal --device gpu --check --metrics-json "$R/cli-check.json" 2>&1 | tee "$R/cli-check.log"
  if [[ -d experiments/data/smollm2-135m ]]; then
    real=experiments/data/smollm2-135m
    timeout 120 "$B/experiments/lowbit" attention --preset $preset --q $real/layer10_q.npy --k $real/layer10_k.npy \
      --v $real/layer10_v.npy --causal --device gpu --check --metrics-json "$R/cli-check-layer10.json" 2>&1 | tee -a "$R/cli-check.log"
  fi
  archive
fi
if want ncu; then
  log "Nsight Compute"
  timeout 150 ncu --clock-control none -k regex:sage2_attention_kernel -c 1 --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
    --section MemoryWorkloadAnalysis \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed \
    "$B/experiments/bench_attention" --tokens 8192 --dims 128 --causal no --exp2 $exp2 --warmup 0 --repeats 1 > "$R/ncu.txt" 2>&1
  grep -E "sage2_attention_kernel|Duration|Registers Per|Dynamic Shared|Theoretical Occupancy|Achieved Occupancy|pipe_|SM Busy|Compute \(SM\)|Memory Throughput|L2 Cache Throughput|lts__|Issue Slots|Stall|Warp Cycles Per Issued" "$R/ncu.txt" | head -60
fi
log "done"
