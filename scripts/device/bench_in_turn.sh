#!/usr/bin/env bash
# lowbit's sage2-8b kernels and FlashAttention-3 FP8 timed launch by launch in turn in one process
# (experiments/bench/bench_attention.py --library; issue 40's fair protocol), on the lent GPU, from
# liblowbit_sage2.so built here. From the repository root, carrying .whl/ (PyPI's fa3-fwd 0.0.3) and
# $PREBUILT (default build-call/, ignored by git), packed on the Debian 12 VM:
#   cmake --build build --target lowbit_sage2 test_sage2_c_api test_sage2_c_api_gpu && mkdir -p build-call &&
#   cp build/kernels/liblowbit_sage2.so build/tests/attention_gpu/test_sage2_c_api{,_gpu} /lib/x86_64-linux-gnu/libfmt.so.9 build-call/ &&
#   xz -9 build-call/liblowbit_sage2.so build-call/test_sage2_c_api build-call/test_sage2_c_api_gpu
# (each binary records the commit it was built from, and the records name it: each ALT build its own)
# (the tracked tree is about 59 MB of the call's 64 MiB: before the call remove verification/,
# results/ and experiments/data/qwen2.5-coder-1.5b/, and git checkout them after).
#   OUT=/tmp/it CALLS=3 scripts/device/bench_in_turn.sh
#   OUT=/tmp/it8 CALLS=3 BURST=8 REPEATS=10 SKIP_TESTS=1 scripts/device/bench_in_turn.sh
# Steps:
#   1. (unless SKIP_TESTS=1) the library's bits against the emulator through its C interface
#      (test_sage2_c_api_gpu) and its refusals with a GPU present (test_sage2_c_api);
#   2. CALLS processes (default 3) of bench_attention.py --library at N = 8K, 16K, d = $DIMS (default
#      64,128), causal and not, exp2 sm90-ex2, --burst $BURST (default 1), --repeats $REPEATS (default
#      20), --inputs $INPUTS (default normal), --row-sum $ROW_SUM (default lanes; lanes,pv adds
#      lowbit_ex2_pv), into $OUT/in-turn-K/, the GPU's clock and power
#      sampled by nvidia-smi every 100 ms meanwhile into $OUT/power-K.csv;
#   3. the median of the calls (experiments/bench/median_of_calls.py) into $OUT.
# ALT (optional) names other builds of the library, space-separated NAME=FOLDER (each FOLDER packed
# like $PREBUILT, with its liblowbit_sage2.so(.xz)): their kernels join the turns as lowbit...@NAME
# (bench_attention.py --alt-library), a kernel variant timed beside the tree's under the same clocks;
# experiments/bench/launch_clocks.py --kernels lowbit_ex2@NAME,lowbit_ex2 compares their cycles. Only
# their kernels on operands quantized once are timed, unless ALT_END_TO_END=1 (lowbit..._e2e@NAME too).
# Exit 0 when every step passed; 77 where no GPU is visible.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${OUT:-build/results/bench-in-turn}")
prebuilt=${PREBUILT:-build-call}
calls=${CALLS:-3}
dims=${DIMS:-64,128}
burst=${BURST:-1}
repeats=${REPEATS:-20}
inputs=${INPUTS:-normal}
row_sum=${ROW_SUM:-lanes}
mkdir -p "$out"
source scripts/device/prebuilt.sh
unpack_prebuilt "$prebuilt" /tmp/prebuilt liblowbit_sage2.so test_sage2_c_api test_sage2_c_api_gpu ||
  { echo "bench_in_turn: the prebuilt binaries are missing"; exit 1; }
alt_flags=()
for entry in ${ALT:-}; do
  name=${entry%%=*} folder=${entry#*=}
  unpack_prebuilt "$folder" "/tmp/prebuilt-$name" liblowbit_sage2.so || { echo "bench_in_turn: for ALT $name"; exit 1; }
  alt_flags+=(--alt-library "$name=/tmp/prebuilt-$name/liblowbit_sage2.so")
done
[ -n "${ALT:-}" ] && [ "${ALT_END_TO_END:-0}" = 1 ] && alt_flags+=(--alt-end-to-end)
export LD_LIBRARY_PATH=/tmp/prebuilt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source scripts/device/deps.sh  # the fa3-fwd wheel from .whl/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$out/nvidia-smi.csv"
status=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  /tmp/prebuilt/test_sage2_c_api_gpu > "$out/c-api-gpu.log" 2>&1
  rc=$?; echo "the library against the emulator: exit $rc: $(tail -n 2 "$out/c-api-gpu.log" | tr '\n' ' ')"
  [ $rc -eq 77 ] && exit 77
  [ $rc -eq 0 ] || status=1
  /tmp/prebuilt/test_sage2_c_api > "$out/c-api.log" 2>&1
  rc=$?; echo "the library's refusals: exit $rc: $(tail -n 2 "$out/c-api.log" | tr '\n' ' ')"
  [ $rc -eq 0 ] || status=1
fi
for k in $(seq 1 "$calls"); do
  mkdir -p "$out/in-turn-$k"
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,nounits -lms 100 \
    > "$out/power-$k.csv" 2>&1 &
  sampler=$!
  timeout 400 python3 experiments/bench/bench_attention.py --library /tmp/prebuilt/liblowbit_sage2.so --tokens 8192,16384 \
    --dims "$dims" --exp2 sm90-ex2 --burst "$burst" --repeats "$repeats" --inputs "$inputs" --row-sum "$row_sum" "${alt_flags[@]}" \
    --out "$out/in-turn-$k" \
    > "$out/in-turn-$k/bench.log" 2>&1
  rc=$?
  kill "$sampler" 2>/dev/null
  echo "call $k: exit $rc"
  [ $rc -eq 0 ] || { status=1; tail -n 5 "$out/in-turn-$k/bench.log"; }
done
python3 experiments/bench/median_of_calls.py --out "$out" "$out"/in-turn-* || status=1
exit $status
