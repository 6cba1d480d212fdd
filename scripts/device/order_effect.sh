#!/usr/bin/env bash
# Whether a timing of the attention kernel depends on what ran before it in the same process (issue 40:
# the same causal d = 128 kernel read 852 and 902 TOPS at N = 16K in two positions of one device call).
# From the repository root, carrying $PREBUILT (default build-call/: bench_attention(.xz) and
# libfmt.so.9, as scripts/device/schedule_bench.sh's header packs them). Runs bench_attention three
# ways, each twice, with the SM clock, power and throttle reasons logged every 200 ms beside each run:
#   all:      --dims 64,128 (the order of bench_attention.py: d = 64 first),
#   d128:     --dims 128 alone,
#   reversed: --dims 128 with --tokens 16384,8192 (16K first).
# Writes $OUT (default build/results/order-effect): RUN-K.log and RUN-K-power.csv; exit 77 without a GPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${OUT:-build/results/order-effect}")
prebuilt=${PREBUILT:-build-call}
mkdir -p "$out"
source scripts/device/prebuilt.sh
unpack_prebuilt "$prebuilt" /tmp/order-effect bench_attention || exit 1
export LD_LIBRARY_PATH=/tmp/order-effect${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source scripts/device/power_log.sh
status=0
for k in 1 2; do
  for run in all d128 reversed; do
    case $run in
      all) args=(--dims 64,128 --tokens 8192,16384) ;;
      d128) args=(--dims 128 --tokens 8192,16384) ;;
      reversed) args=(--dims 128 --tokens 16384,8192) ;;
    esac
    power_log_start "$out/$run-$k-power.csv"
    timeout 120 /tmp/order-effect/bench_attention "${args[@]}" --causal no,yes --exp2 sm90-ex2 > "$out/$run-$k.log" 2>&1
    rc=$?
    power_log_stop
    [ $rc -eq 77 ] && exit 77
    [ $rc -eq 0 ] || status=1
    echo "$run, call $k (exit $rc):"; grep -E " 128 " "$out/$run-$k.log"
  done
done
exit $status
