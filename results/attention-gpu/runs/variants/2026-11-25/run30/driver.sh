#!/usr/bin/env bash
# run30: tree vs pers2 (persistent tiles), timed side by side, then Nsight Compute (--set full,
# per-instruction sampling) of each at d = 128, N = 8K, non-causal.
set -uo pipefail
E=$OUT/extra; mkdir -p $E
bash scripts/gpu_sage2_sources.sh 2>&1 | tee $E/sources-stdout.txt
V=/tmp/sage2-sources
for v in tree pers2; do
  timeout 200 ncu --clock-control none -k regex:sage2_attention_kernel -c 1 --set full --import-source no -o /tmp/prof-$v \
    $V/$v/bench_attention --tokens 8192 --dims 128 --causal no --exp2 sm90-ex2 --warmup 0 --repeats 1 > $E/ncu-run-$v.log 2>&1
  echo "$v ncu exit $?"
  ncu -i /tmp/prof-$v.ncu-rep --page details > $E/ncu-details-$v.txt 2>&1
  ncu -i /tmp/prof-$v.ncu-rep --page source --csv --print-source sass 2> /dev/null | gzip -9 > $E/ncu-source-$v.csv.gz
done
tar -czf $OUT/extra.tgz -C $OUT extra && rm -rf $E
