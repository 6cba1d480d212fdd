#!/usr/bin/env bash
# One call on the lent GPU machine for the intra-chunk GLA kernels (issue 14): every bit of the four
# kernels (bf16, int8-smooth, bf16-fp8, int8-smooth-fp8) against their emulation, the sanitizers,
# the SASS opcodes, and the four kernels timed side by side, then the INT4 speed model on the
# measured times. Runs from the repository root with check_linear_gpu built beforehand in build/
# (carried), or builds it (CMake, sm_90a) when it does not run. Everything lands in
# $OUT/linear-gpu.tar.gz (the tool brings back few files); the tables go to stdout.
#   STEPS="check sanitize sass bench" (default; about 100 s on an H100) selects steps; STEPS=copy runs
#   the copying task of the proposal (PyTorch on the GPU, about 3 minutes on an H100: a call of its own).
#   What it wrote on an H100 is in results/linear/gpu/ (README there).
#   DEADLINE=seconds (default 540): a step that would start later is skipped, so the archive is
#   written before the tool's 10-minute limit.
set -uo pipefail
OUT=${OUT:-build/results/gpu-run}
R=${WORK:-/tmp}/linear-gpu
mkdir -p "$R" "$OUT"
steps=${STEPS:-"check sanitize sass bench"}
deadline=${DEADLINE:-540}
log() { echo "== $(date -u +%H:%M:%S) +${SECONDS}s $*" | tee -a "$R/steps.log"; }
want() {
  [[ " $steps " == *" $1 "* ]] || return 1
  if (( SECONDS > deadline )); then log "skipped $1: past the deadline"; return 1; fi
}
archive() { tar -czf "$OUT/linear-gpu.tar.gz" -C "$(dirname "$R")" "$(basename "$R")"; }
trap 'archive; ls -la "$OUT"' EXIT

source scripts/device/deps.sh  # the carried build dependencies, and their libraries for the carried binaries
B=build
bin=$B/experiments/check_linear_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv > "$R/nvidia-smi.csv" 2>&1
nvcc --version > "$R/nvcc.txt" 2>&1
if ! "$bin" --help > /dev/null 2>&1; then
  log "carried check_linear_gpu does not run here; building"
  # shellcheck disable=SC2086  # lists of arguments
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a $LOWBIT_DEPS_CMAKE_ARGS ${CMAKE_EXTRA:-} > "$R/cmake.log" 2>&1
  cmake --build "$B" -j16 --target check_linear_gpu > "$R/build.log" 2>&1 || { tail -30 "$R/build.log"; exit 1; }
fi
export LOWBIT_GIT_SHA=${LOWBIT_GIT_SHA:-$(cat GIT_SHA 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}

status=0
if want check; then
  # Every bit of 8 heads x 2048 tokens per shape (the emulation: about 0.2 CPU s per head and kernel);
  # mismatching chunks are kept as .npy under check/failing/.
  log "check_linear_gpu: bits of every kernel on every shape"
  timeout 300 "$bin" --heads 8 --tokens 2048 --check-heads 8 --reps 3 --keep 2 --out "$R/check" 2>&1 | tee "$R/check.log"
  status=${PIPESTATUS[0]}
  archive
fi
if want sanitize; then
  for tool in memcheck racecheck; do
    log "compute-sanitizer $tool"
    timeout 120 compute-sanitizer --tool $tool --print-limit 20 "$bin" --heads 1 --tokens 128 --check-heads 1 --reps 1 \
      --shapes 64x64,128x256 --out "$R/sanitize-$tool" > "$R/sanitizer-$tool.log" 2>&1
    echo "exit $?" >> "$R/sanitizer-$tool.log"
    tail -3 "$R/sanitizer-$tool.log"
  done
  archive
fi
if want sass; then
  log "SASS opcodes"
  cuobjdump -sass "$bin" > "$R/sass.txt" 2>&1 && python3 scripts/sass_summary.py < "$R/sass.txt" > "$R/sass-summary.md"
  cuobjdump -res-usage "$bin" > "$R/res-usage.txt" 2>&1
  grep -i gla "$R/sass-summary.md" | cut -c1-400
  gzip -f "$R/sass.txt"
  archive
fi
if want bench; then
  # 32 heads x 8192 tokens (4096 chunks per launch), 50 timed launches per kernel; the bits of the
  # first 2 heads compared too (other data than the check step's, 8192 tokens each).
  log "check_linear_gpu: the four kernels side by side"
  timeout 240 "$bin" --heads 32 --tokens 8192 --check-heads 2 --reps 50 --keep 1 --out "$R/bench" 2>&1 | tee "$R/bench.log"
  python3 experiments/linear/int4_speed_model.py --measured "$R/bench/gpu.csv" 2>&1 | tee "$R/int4-model.md"
  archive
fi
if want copy; then
  log "copying task (experiments/linear/copy_task.py)"
  PYTHONUNBUFFERED=1 timeout 560 python3 experiments/linear/copy_task.py --time-limit 400 --out "$R/copy" 2>&1 | tee "$R/copy.log"
  archive
fi
exit $status
