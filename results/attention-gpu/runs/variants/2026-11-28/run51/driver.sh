#!/usr/bin/env bash
# run51: the tree (5320cdd's kernel with d = 64 releasing at the barrier after P V) against pers
# (run50's persistent grid at d = 128 non-causal, fixed: a unit past the head's last skipped its
# tiles and, a lap ahead of the ring, read a stage's phase its parity could not tell apart; it now
# computes the head's last unit's rows again and stores nothing, so every unit reads every KV block
# in ring order; LSE biases with the Q tile as in qbs). scripts/gpu_sage2_sources.sh with 3
# non-causal rounds and 1 causal (BENCH_TIMEOUT 30); then pers's persistent path checked bit for bit
# with the grid capped (LOWBIT_SAGE2_GRID) on the full set's d = 128 non-causal configurations, and
# under memcheck and racecheck at 2 blocks.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=3 CAUSAL_ROUNDS=1 BENCH_TIMEOUT=30 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
B=/tmp/sage2-sources/pers/check_sage2_gpu
{
LOWBIT_SAGE2_GRID=5 timeout 60 $B --configs full --only d128-n --exp2 sm90-ex2 --out /tmp/pf-ex2-5 > $OUT/pers-full-ex2-grid5.log 2>&1
echo "grid 5 ex2 d128 non-causal full: exit $?, $(tail -1 $OUT/pers-full-ex2-grid5.log)"
LOWBIT_SAGE2_GRID=1 timeout 60 $B --configs full --only d128-n1000 --out /tmp/pf-poly-1 > $OUT/pers-full-poly5-grid1.log 2>&1
echo "grid 1 poly5 d128-n1000: exit $?, $(tail -1 $OUT/pers-full-poly5-grid1.log)"
for tool in memcheck racecheck; do
  LOWBIT_SAGE2_GRID=2 timeout 45 compute-sanitizer --tool $tool --print-limit 10 $B --configs full --only d128-n1000-b2 \
    --exp2 sm90-ex2 --out /tmp/pf-$tool > $OUT/pers-$tool.log 2>&1
  echo "$tool grid 2 d128-n1000-b2: exit $?, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/pers-$tool.log | tail -1)"
done
} > $OUT/pers-checks.txt 2>&1
cd $OUT && tar -czf pers-checks.tgz pers-*.log && rm -f pers-*.log
cat $OUT/sources-stdout.txt $OUT/pers-checks.txt
