#!/usr/bin/env bash
# run38: the tree (its epilogue through the Q tile) against the d = 128 kernel in two units of 255
# registers a block whose loop overlaps each unit's softmax with its own wgmmas (variants/NAME/):
#   ov2  block i's Q K'^T and block i - 1's P V issued together, block i's softmax while they run
#        (6 stages of K/V; d = 64 as the tree);
#   pp2  ov2 with the block's two units taking turns at issuing (named barriers, ping-pong).
# scripts/gpu_sage2_sources.sh (smoke tests, two non-causal rounds), then two causal rounds in
# alternating order and a third non-causal round. One device call (H100).
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
V=/tmp/sage2-sources
bench() {  # $1 causal yes|no, $2 variant, $3 round
  [[ -x $V/$2/bench_attention ]] || return
  timeout 100 $V/$2/bench_attention --tokens 8192,16384 --dims 128,64 --causal $1 --exp2 sm90-ex2 --warmup 2 --repeats 10 > $OUT/bench-$1-$2-$3.txt 2>&1
  echo "causal=$1 round $3 $2: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $OUT/bench-$1-$2-$3.txt)"
}
for round in 1 2; do
  order="tree ov2 pp2"; (( round == 2 )) && order="pp2 ov2 tree"
  for v in $order; do bench yes $v $round; done
done >> $OUT/sources-stdout.txt
for v in ov2 tree pp2; do bench no $v 3; done >> $OUT/sources-stdout.txt
cd $OUT && tar -czf bench-extra.tgz bench-*.txt && rm bench-*.txt
cat $OUT/sources-stdout.txt
