#!/usr/bin/env bash
# run50: the tree (5320cdd's kernel with d = 64 releasing at the barrier after P V, run49's e64) against
# qbs (the LSE biases copied to shared memory with the Q tile: the end of the rows waited 1 us on
# them, run49's eptl) and pers (qbs and a persistent grid at d = 128 non-causal: one block an SM,
# tiles c, c + grid, ...; the ring runs on across a block's tiles; the next Q tile loads into a
# second Q set while the last KV blocks run). scripts/gpu_sage2_sources.sh with 3 non-causal and 2
# causal rounds; then pers's persistent path checked bit for bit with the grid capped at 1 and 5
# blocks (LOWBIT_SAGE2_GRID: many tiles a block) on the full set, both exponentials, and under
# racecheck and memcheck at 2 blocks.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=3 CAUSAL_ROUNDS=2 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
B=/tmp/sage2-sources/pers/check_sage2_gpu
{
for g in 1 5; do
  LOWBIT_SAGE2_GRID=$g timeout 100 $B --configs full --exp2 sm90-ex2 --out /tmp/pf-ex2-$g > $OUT/pers-full-ex2-grid$g.log 2>&1
  echo "grid $g ex2 full: exit $?, $(tail -1 $OUT/pers-full-ex2-grid$g.log)"
done
LOWBIT_SAGE2_GRID=3 timeout 100 $B --configs full --out /tmp/pf-poly-3 > $OUT/pers-full-poly5-grid3.log 2>&1
echo "grid 3 poly5 full: exit $?, $(tail -1 $OUT/pers-full-poly5-grid3.log)"
for tool in racecheck memcheck; do
  LOWBIT_SAGE2_GRID=2 timeout 90 compute-sanitizer --tool $tool --print-limit 20 $B --configs full --only d128-n1000 \
    --exp2 sm90-ex2 --out /tmp/pf-$tool > $OUT/pers-$tool.log 2>&1
  echo "$tool grid 2 d128-n1000: exit $?, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/pers-$tool.log | tail -1)"
done
} > $OUT/pers-checks.txt 2>&1
cd $OUT && tar -czf pers-checks.tgz pers-*.log && rm -f pers-*.log
cat $OUT/sources-stdout.txt $OUT/pers-checks.txt; ls -la $OUT
