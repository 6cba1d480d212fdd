#!/usr/bin/env bash
# The attention kernel's schedules (Sage2Schedule: serial, overlapped) beside FlashAttention-3 FP8 on
# the lent GPU, from binaries built here (issue 40). From the repository root, carrying .whl/ (PyPI's
# fa3-fwd 0.0.3) and $PREBUILT (default build-call/, ignored by git), which holds bench_attention and
# check_sage2_gpu (each may be .xz) and libfmt.so.9, packed on the Debian 12 VM:
#   cmake --build build --target bench_attention check_sage2_gpu && mkdir -p build-call &&
#   cp build/experiments/bench_attention build/tests/attention_gpu/check_sage2_gpu /lib/x86_64-linux-gnu/libfmt.so.9 build-call/ &&
#   xz -9 build-call/bench_attention build-call/check_sage2_gpu
# (each binary records the commit it was built from, and the records name it: each ALT build its own)
# The tracked tree is about 59 MB of the call's 64 MiB: before the call remove verification/, results/
# and experiments/data/qwen2.5-coder-1.5b/ (git checkout them after; not while a build runs here).
#   OUT=/tmp/sb SCHEDULES=serial,overlapped CALLS=3 FULL=1 scripts/device/schedule_bench.sh;
#   cd /tmp/sb && tar -czf $OUT/schedule-bench.tgz $(find . -maxdepth 2 -name '*.csv' -o -name '*.json' -o -name '*.log')
# ($OUT: the device tool's folder, which brings back 8 files of at most 16 MiB: the checks' folders
# also hold their inputs, about 73 MB each.)
# ALT (optional) names other folders, space-separated, each packed the same way from a build with
# other compile-time choices (a -D of CMAKE_CUDA_FLAGS under test), run with the schedule ALT_SCHEDULE
# (default overlapped) and timed at the head dimensions ALT_DIMS (default 64), or at those of its
# entry's own ":DIMS" (ALT="build-call-x build-call-y:64,128"); the K-th is "alt-K".
# Steps, each cut at the call's DEADLINE (seconds since the start, default 540):
#   1. the smoke test of each schedule: check_sage2_gpu --configs quick --exp2 sm90-ex2 --schedule S;
#      with ALT, each ALT build's (ALT_SCHEDULE);
#   2. CALLS calls of experiments/bench/bench_attention.py (--tokens 8192,16384, --exp2 sm90-ex2,
#      --schedule $SCHEDULES): both schedules, SDPA and FA3 FP8/BF16 timed in each (issue 40's protocol:
#      the median of the calls; with INTERLEAVE=1, bench_attention.py --interleave, and with
#      OTHERS_FIRST=1 also --others-first), into $OUT/bench-K/;
#      with ALT, each call followed by one of each ALT build's bench_attention at ALT_DIMS, into
#      $OUT/alt-J-bench-K/;
#   3. with FULL=1, the bit-exact protocol of the schedules FULL_SCHEDULES (default overlapped; empty:
#      none), each exp2 unit: check_sage2_gpu --configs full --real experiments/data/smollm2-135m and
#      --configs bench; with ALT, then each ALT build's check_sage2_gpu --configs full --real ...
#      (sm90-ex2, ALT_SCHEDULE);
#   4. with NCU=1, Nsight Compute's issue and stall metrics of one launch of each schedule, of each
#      ALT build at ALT_DIMS and of FA3 FP8's kernel (d = 128 and 64, N = 8K, not causal; NCU_CAUSAL=yes:
#      causal) into $OUT/ncu/, with the instructions executed per opcode (ncu_stalls.py --opcodes
#      8589934592: B H N^2 scores; causal, half of them) (experiments/bench/ncu_stalls.py tabulates them).
# Everything lands under $OUT (the device tool's folder) or build/results/schedule-bench. Exit 0 when
# every step that ran passed; 77 where no GPU is visible.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${OUT:-build/results/schedule-bench}")
prebuilt=${PREBUILT:-build-call}
schedules=${SCHEDULES:-serial,overlapped}
deadline=${DEADLINE:-540}
alts=() alt_dims=()  # each ALT entry's folder and head dimensions
for entry in ${ALT:-}; do
  alts+=("${entry%%:*}")
  [[ $entry == *:* ]] && alt_dims+=("${entry#*:}") || alt_dims+=("${ALT_DIMS:-64}")
done
alt_schedule=${ALT_SCHEDULE:-overlapped}
mkdir -p "$out"
source scripts/device/prebuilt.sh
unpack() {  # unpack FOLDER INTO: the folder's binaries, uncompressed, into INTO
  unpack_prebuilt "$1" "$2" bench_attention check_sage2_gpu || { echo "schedule_bench: the prebuilt binaries are missing"; exit 1; }
}
unpack "$prebuilt" /tmp/prebuilt
for j in "${!alts[@]}"; do unpack "${alts[$j]}" /tmp/prebuilt-alt-$((j + 1)); done
export LD_LIBRARY_PATH=/tmp/prebuilt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source scripts/device/deps.sh  # the fa3-fwd wheel from .whl/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/nvidia-smi.csv"
status=0
in_time() { [ "$SECONDS" -lt "$deadline" ] || { echo "schedule_bench: $1 skipped (past ${deadline} s)"; return 1; }; }
# A step's time limit: its own, and never past the deadline.
limit() { local left=$((deadline - SECONDS)); echo $(($1 < left ? $1 : left)); }
for schedule in ${schedules//,/ }; do
  in_time "smoke $schedule" || continue
  timeout $(limit 200) /tmp/prebuilt/check_sage2_gpu --configs quick --exp2 sm90-ex2 --schedule "$schedule" \
    --out "$out/quick-$schedule" > "$out/quick-$schedule.log" 2>&1
  rc=$?; echo "smoke test, $schedule: exit $rc: $(tail -n 1 "$out/quick-$schedule.log")"
  [ $rc -eq 77 ] && exit 77  # no GPU here
  [ $rc -eq 0 ] || { status=1; schedules=$(echo ",$schedules," | sed "s/,$schedule,/,/; s/^,//; s/,$//"); }
done
[ -n "$schedules" ] || exit 1
alt_ok=()  # the ALT builds that passed their smoke test, as indices J of alt-J
for j in "${!alts[@]}"; do
  a=alt-$((j + 1))
  in_time "smoke $a" || continue
  timeout $(limit 200) /tmp/prebuilt-$a/check_sage2_gpu --configs quick --exp2 sm90-ex2 --schedule "$alt_schedule" \
    --out "$out/quick-$a" > "$out/quick-$a.log" 2>&1
  rc=$?; echo "smoke test, $a (${alts[$j]}) $alt_schedule: exit $rc: $(tail -n 1 "$out/quick-$a.log")"
  [ $rc -eq 0 ] && alt_ok+=($((j + 1))) || status=1
done
bench() {  # bench BINARY DIMS NAME SCHEDULES
  timeout $(limit 300) python3 experiments/bench/bench_attention.py --binary "$1" --tokens 8192,16384 --dims "$2" \
    --exp2 sm90-ex2 --schedule "$4" ${INTERLEAVE:+--interleave} ${OTHERS_FIRST:+--others-first} --out "$out/$3" > "$out/$3.log" 2>&1 || status=1
  echo "$3:"; tail -n 9 "$out/$3.log"
}
for ((k = 1; k <= ${CALLS:-3}; k++)); do
  in_time "bench call $k" || break
  bench /tmp/prebuilt/bench_attention 64,128 "bench-$k" "$schedules"
  for j in "${alt_ok[@]}"; do
    in_time "alt-$j bench call $k" && bench /tmp/prebuilt-alt-$j/bench_attention "${alt_dims[$((j - 1))]}" "alt-$j-bench-$k" "$alt_schedule"
  done
done
if [ "${FULL:-0}" = 1 ]; then
  full_schedules=${FULL_SCHEDULES-overlapped}
  for schedule in ${full_schedules//,/ }; do
    for exp2 in sm90-ex2 poly5; do
      for configs in full bench; do
        in_time "check $schedule $exp2 $configs" || continue
        real=(); [ $configs = full ] && real=(--real experiments/data/smollm2-135m)
        name=check-$schedule-$exp2-$configs
        timeout $(limit 300) /tmp/prebuilt/check_sage2_gpu --configs $configs "${real[@]}" --exp2 $exp2 --schedule $schedule \
          --out "$out/$name" > "$out/$name.log" 2>&1
        rc=$?; echo "bit-exact, $schedule, $exp2, $configs: exit $rc: $(tail -n 1 "$out/$name.log")"
        [ $rc -eq 0 ] || status=1
      done
    done
  done
  for j in "${alt_ok[@]}"; do
    in_time "check alt-$j" || continue
    timeout $(limit 300) /tmp/prebuilt-alt-$j/check_sage2_gpu --configs full --real experiments/data/smollm2-135m --exp2 sm90-ex2 \
      --schedule "$alt_schedule" --out "$out/check-alt-$j-full" > "$out/check-alt-$j-full.log" 2>&1
    rc=$?; echo "bit-exact, alt-$j $alt_schedule, sm90-ex2, full: exit $rc: $(tail -n 1 "$out/check-alt-$j-full.log")"
    [ $rc -eq 0 ] || status=1
  done
fi
if [ "${NCU:-0}" = 1 ]; then
  mkdir -p "$out/ncu"
  ncu_causal=${NCU_CAUSAL:-no}
  [ "$ncu_causal" = yes ] && fa3_causal=True scores=$((4 * 32 * 8192 * 8192 / 2)) || fa3_causal=False scores=$((4 * 32 * 8192 * 8192))
  metrics='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|smsp__inst_executed\.sum|sm__cycles_elapsed\.avg|sm__inst_executed_pipe_xu\.avg\.pct_of_peak_sustained_active|launch__registers_per_thread|lts__throughput\.avg\.pct_of_peak_sustained_elapsed,sass__inst_executed_per_opcode'
  profile() {  # profile NAME KERNEL-REGEX COMMAND...: one launch's metrics into $out/ncu/NAME.csv
    local name=$1 kernel=$2; shift 2
    timeout $(limit 120) ncu --kernel-name-base demangled --kernel-name "regex:$kernel" --launch-count 1 --csv --page raw \
      --print-metric-instances details --metrics "$metrics" "$@" > "$out/ncu/raw.txt" 2>&1 || status=1
    grep '^"' "$out/ncu/raw.txt" > "$out/ncu/$name.csv"
  }
  for d in 128 64; do
    for schedule in ${schedules//,/ }; do
      in_time "ncu d$d $schedule" || continue
      profile "d$d-$schedule" sage2_attention_kernel /tmp/prebuilt/bench_attention --dims $d --tokens 8192 --causal $ncu_causal \
        --exp2 sm90-ex2 --schedule "$schedule" --warmup 0 --repeats 1
    done
    for j in "${alt_ok[@]}"; do
      if [[ ",${alt_dims[$((j - 1))]}," == *",$d,"* ]] && in_time "ncu d$d alt-$j"; then
        profile "d$d-alt-$j-$alt_schedule" sage2_attention_kernel /tmp/prebuilt-alt-$j/bench_attention --dims $d --tokens 8192 \
          --causal $ncu_causal --exp2 sm90-ex2 --schedule "$alt_schedule" --warmup 0 --repeats 1
      fi
    done
    in_time "ncu d$d fa3_fp8" || continue
    profile "d$d-fa3_fp8" FlashAttnFwd python3 -c "import sys; sys.path.insert(0, 'experiments/bench'); import bench_attention as b; b.time_fa3(True, 4, 32, 8192, $d, $fa3_causal, 0, 1)"
  done
  rm -f "$out/ncu/raw.txt"
  python3 experiments/bench/ncu_stalls.py --markdown "$out"/ncu/*.csv || status=1
  python3 experiments/bench/ncu_stalls.py --markdown --opcodes $scores "$out"/ncu/*.csv || status=1
fi
echo "schedule_bench: done in ${SECONDS} s, exit $status"
exit $status
