#!/usr/bin/env bash
# run37: the tree (the end of the rows through the unit's Q tile, 16-byte pieces; the accumulator's
# pairs where the output is not 16-byte aligned) against `base` (ac58e82's kernel) and `epi3n` (run36's
# stage of its own, 17 KB more shared memory a unit). scripts/gpu_sage2_sources.sh (smoke tests, two
# non-causal rounds), then two causal rounds in alternating order and a third non-causal round. One
# device call (H100).
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
V=/tmp/sage2-sources
bench() {  # $1 causal yes|no, $2 variant, $3 round
  timeout 100 $V/$2/bench_attention --tokens 8192,16384 --dims 128,64 --causal $1 --exp2 sm90-ex2 --warmup 2 --repeats 10 > $OUT/bench-$1-$2-$3.txt 2>&1
  echo "causal=$1 round $3 $2: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $OUT/bench-$1-$2-$3.txt)"
}
for round in 1 2; do
  order="tree base epi3n"; (( round == 2 )) && order="epi3n base tree"
  for v in $order; do bench yes $v $round; done
done >> $OUT/sources-stdout.txt
for v in base tree epi3n; do bench no $v 3; done >> $OUT/sources-stdout.txt
cd $OUT && tar -czf bench-extra.tgz bench-*.txt && rm bench-*.txt
cat $OUT/sources-stdout.txt
