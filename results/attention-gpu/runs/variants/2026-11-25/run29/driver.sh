#!/usr/bin/env bash
# run29: tree vs lean again (the K scale by a running pointer), non-causal and causal, three rounds.
set -uo pipefail
E=$OUT/extra; mkdir -p $E
bash scripts/gpu_sage2_sources.sh 2>&1 | tee $E/sources-stdout.txt
V=/tmp/sage2-sources
for round in 1 2 3; do
  order="tree lean"; [[ $round == 2 ]] && order="lean tree"
  for v in $order; do
    timeout 100 $V/$v/bench_attention --tokens 8192,16384 --dims 128,64 --causal yes --exp2 sm90-ex2 --warmup 2 --repeats 10 > $E/causal-$v-$round.txt 2>&1
    echo "causal round $round $v: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $E/causal-$v-$round.txt)"
    timeout 100 $V/$v/bench_attention --tokens 8192,16384 --dims 128,64 --causal no --exp2 sm90-ex2 --warmup 2 --repeats 10 > $E/noncausal-$v-$round.txt 2>&1
    echo "non-causal round $round $v: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $E/noncausal-$v-$round.txt)"
  done
done
tar -czf $OUT/extra.tgz -C $OUT extra && rm -rf $E
