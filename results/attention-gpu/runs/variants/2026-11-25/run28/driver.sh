#!/usr/bin/env bash
# run28: tree, lean (the K scale by a running pointer), pers2 (persistent tiles, refills from per-tile heads).
set -uo pipefail
E=$OUT/extra; mkdir -p $E
bash scripts/gpu_sage2_sources.sh 2>&1 | tee $E/sources-stdout.txt
V=/tmp/sage2-sources
for v in pers2; do
  for g in 1 3 7; do
    LOWBIT_SAGE2_GRID=$g timeout 120 $V/$v/check_sage2_gpu --configs quick --exp2 sm90-ex2 --out /tmp/q-$v-$g > $E/quick-$v-grid$g.log 2>&1
    echo "$v grid $g: exit $? $(tail -1 $E/quick-$v-grid$g.log)"
  done
  LOWBIT_SAGE2_GRID=5 timeout 120 $V/$v/check_sage2_gpu --configs quick --exp2 poly5 --out /tmp/q-$v-p5 > $E/quick-$v-grid5-poly5.log 2>&1
  echo "$v grid 5 poly5: exit $? $(tail -1 $E/quick-$v-grid5-poly5.log)"
  LOWBIT_SAGE2_GRID=2 timeout 150 compute-sanitizer --tool racecheck --print-limit 20 $V/$v/check_sage2_gpu --configs quick --only n384 --exp2 sm90-ex2 --out /tmp/rc-$v > $E/racecheck-$v-grid2.log 2>&1
  echo "$v racecheck grid 2: exit $? $(grep -h 'RACECHECK SUMMARY\|ERROR SUMMARY' $E/racecheck-$v-grid2.log | tail -1)"
  timeout 200 $V/$v/check_sage2_gpu --configs full --only n16384 --exp2 sm90-ex2 --out /tmp/f-$v > $E/full16k-$v.log 2>&1
  echo "$v full n16384: exit $? $(tail -1 $E/full16k-$v.log)"
  LOWBIT_SAGE2_GRID=11 timeout 200 $V/$v/check_sage2_gpu --configs full --exp2 sm90-ex2 --out /tmp/f11-$v > $E/full-$v-grid11.log 2>&1
  echo "$v full grid 11: exit $? $(tail -1 $E/full-$v-grid11.log)"
done
for round in 1 2; do
  for v in tree lean pers2; do
    timeout 100 $V/$v/bench_attention --tokens 8192,16384 --dims 128,64 --causal yes --exp2 sm90-ex2 --warmup 2 --repeats 10 > $E/causal-$v-$round.txt 2>&1
    echo "causal round $round $v: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $E/causal-$v-$round.txt)"
  done
done
tar -czf $OUT/extra.tgz -C $OUT extra && rm -rf $E
