#!/usr/bin/env bash
# Every experiment of `lowbit run all` with --device gpu at its default size, on the lent GPU: the
# canonical results/experiments/NAME/gpu-check.json (issue 36, part 5; results/experiments/README.md),
# and the gpu: ctests beside them. From the repository root (carry .device-deps):
#   LOWBIT_GIT_SHA=SHA scripts/device/gpu_check_experiments.sh
# Configures build/ (Release, sm_90a) and builds lowbit and the ctests' targets (on the lent 16-core
# machine this took 156 s at d7c1f79 and over 255 s at a196d56: give it 6 minutes), unless LOWBIT names
# a built lowbit: one built on the Debian 12 VM (sm_90a) runs there, with libfmt.so.9 (from .device-deps'
# libfmt9 .deb) on LD_LIBRARY_PATH (seen at 8954fdb: the canonical files came so, with no build there;
# xz-compressed, lowbit is 4.8 MB of the call's 64 MiB; 8 experiments on THREADS=2 took 208 s). Then,
# side by side, each experiment into $OUT_DIR/NAME (--no-plots, --threads THREADS, default 4) and
# ctest -R 'gpu:' (where build/ exists and SKIP_CTEST is unset) -- each cut at STEP_LIMIT seconds
# (default 240). Writes
# $OUT_DIR/gpu-check.tar.xz (every experiment's folder, the logs) where $OUT_DIR is $OUT (the device
# tool's folder) or build/results/gpu-check, and prints each gpu-check.json's totals. Then, here:
#   (in a scratch folder) tar xJf gpu-check.tar.xz && for e in */gpu-check.json; do gzip -n -9 -c $e > REPO/results/experiments/$e.gz; done
# Exit: 0 when every experiment ran and nothing differs; 1 otherwise; 77 where no GPU is visible.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${OUT:-build/results/gpu-check}")
threads=${THREADS:-4}
step_limit=${STEP_LIMIT:-240}
experiments=(granularity smoothing pv-format accumulator fp4 backward attribution formats)
mkdir -p "$out"
work=$(mktemp -d)
log=$work/log.txt

if [ -z "${LOWBIT:-}" ]; then
  source scripts/device/deps.sh
  python=$(command -v python3)
  # shellcheck disable=SC2086  # a list of arguments
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a $LOWBIT_DEPS_CMAKE_ARGS \
    -DLOWBIT_PYTHON="$python" -DLOWBIT_PLOT_PYTHON="$python" > "$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log"; exit 1; }
  start=$SECONDS
  cmake --build build -j"$(nproc)" --target lowbit test_gpu_forward test_gpu_check > "$work/build.log" 2>&1 ||
    { tail -40 "$work/build.log"; exit 1; }
  echo "built in $((SECONDS - start)) s" | tee -a "$log"
  LOWBIT=build/experiments/lowbit
fi

for e in "${experiments[@]}"; do
  ( timeout "$step_limit" "$LOWBIT" run "$e" --device gpu --no-plots --threads "$threads" --out "$work/$e" > "$work/$e.log" 2>&1
    echo $? > "$work/$e.rc" ) &
done
if [ -d build ] && [ -z "${SKIP_CTEST:-}" ]; then
  ( timeout "$step_limit" ctest --test-dir build -R 'gpu:lowbit-run|test_gpu_forward|test_gpu_check' --output-on-failure \
      > "$work/ctest.log" 2>&1; echo $? > "$work/ctest.rc" ) &
fi
wait

status=0
no_gpu=1
for e in "${experiments[@]}"; do
  rc=$(cat "$work/$e.rc")
  [ "$rc" = 77 ] || no_gpu=0
  [ "$rc" = 0 ] || status=1
  totals=$([ -f "$work/$e/gpu-check.json" ] && python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(j["passed"], json.dumps(j["totals"]))' "$work/$e/gpu-check.json")
  echo "$e: exit $rc ${totals:-(no gpu-check.json)}" | tee -a "$log"
done
[ -f "$work/ctest.rc" ] && { echo "ctest gpu: exit $(cat "$work/ctest.rc")"; grep -E "tests passed|Failed|evaluations checked" "$work/ctest.log"; } | tee -a "$log"
[ -f "$work/ctest.rc" ] && [ "$(cat "$work/ctest.rc")" != 0 ] && status=1
(cd "$work" && tar --exclude='*.npy' -cJf "$out/gpu-check.tar.xz" .)
rm -rf "$work"
if [ $no_gpu = 1 ]; then echo "gpu_check_experiments: no GPU (every experiment exited 77); skipped"; exit 77; fi
exit $status
