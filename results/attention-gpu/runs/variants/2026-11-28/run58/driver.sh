#!/usr/bin/env bash
# run58: the persistent grid at d = 128 non-causal with an unchanged KV loop (the tree: one block
# an SM, every grid-th tile, the ring running on across tiles, the next Q tile in a second set,
# a unit past the head's last running the ring's protocol without the math); old = HEAD's kernel
# (a232d15's code). scripts/gpu_sage2_sources.sh with 4 non-causal rounds and 1 causal, then the
# tree's binaries: bench at the other N (both), the full and bench checks (ex2), the full check of
# the d = 128 non-causal poly5 configurations, memcheck and racecheck of the quick set.
export LOWBIT_GIT_SHA=${LOWBIT_GIT_SHA:-unknown}
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=4 CAUSAL_ROUNDS=1 BENCH_TIMEOUT=30 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
cat $OUT/sources-stdout.txt
V=/tmp/sage2-sources
for v in tree old; do
  timeout 60 $V/$v/bench_attention --tokens 1024,2048,4096,32768 --dims 128 --causal no --exp2 sm90-ex2 --warmup 2 --repeats 10 > $OUT/bench-othern-$v.txt 2>&1
  echo "other N $v: $(awk '$3 == "sm90-ex2" {printf "N=%s %s ms; ", $6, $7}' $OUT/bench-othern-$v.txt)"
done
timeout 120 $V/tree/check_sage2_gpu --configs full --exp2 sm90-ex2 --out /tmp/full-ex2 > $OUT/check-full-ex2.log 2>&1; echo "full ex2 exit $?: $(tail -1 $OUT/check-full-ex2.log)"
timeout 100 $V/tree/check_sage2_gpu --configs bench --exp2 sm90-ex2 --out /tmp/bench-ex2 > $OUT/check-bench-ex2.log 2>&1; echo "bench ex2 exit $?: $(tail -1 $OUT/check-bench-ex2.log)"
timeout 100 $V/tree/check_sage2_gpu --configs full --only d128-n --exp2 poly5 --out /tmp/full-poly5 > $OUT/check-full-poly5-d128.log 2>&1; echo "full poly5 d128 non-causal exit $?: $(tail -1 $OUT/check-full-poly5-d128.log)"
cp /tmp/full-ex2/summary.json $OUT/check-full-ex2.json 2>/dev/null; cp /tmp/bench-ex2/summary.json $OUT/check-bench-ex2.json 2>/dev/null
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool $V/tree/check_sage2_gpu --configs quick --only d128-n600 --exp2 sm90-ex2 --out /tmp/san-$tool > $OUT/sanitizer-$tool.log 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|HAZARD|RACECHECK SUMMARY' $OUT/sanitizer-$tool.log | tail -1)"
done
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
