#!/usr/bin/env bash
# run41: run40's timelines put the 4 warps of a unit 300 cycles apart at the loop's top, warp 0
# last in 99% of the blocks: its thread 0 releases the stage (a shared acquire-release count) and
# refills it (expect_tx, two bulk copies, arrive) between the unit's barrier and the next Q K^T, a
# collective wgmma that waits for all 4 warps. The variants move the release of block i - 1 to
# just after Q K^T of block i is issued, into the wait every warp has there:
#   rel  the tree with the release moved; relp  rel with P V as two interleaved m64n64 chains
#   (run40's ilp); reltl  rel with run39's timeline.
# scripts/gpu_sage2_sources.sh (smoke tests, two non-causal rounds), two causal rounds, a third
# non-causal round, reltl's timelines at N = 8K and 16K.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
V=/tmp/sage2-sources
bench() {  # $1 causal yes|no, $2 variant, $3 round
  [[ -x $V/$2/bench_attention ]] || return
  timeout 100 $V/$2/bench_attention --tokens 8192,16384 --dims 128,64 --causal $1 --exp2 sm90-ex2 --warmup 2 --repeats 10 > $OUT/bench-$1-$2-$3.txt 2>&1
  echo "causal=$1 round $3 $2: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $OUT/bench-$1-$2-$3.txt)"
}
{
  for round in 1 2; do
    order="tree rel relp"; (( round == 2 )) && order="relp rel tree"
    for v in $order; do bench yes $v $round; done
  done
  for v in rel tree relp; do bench no $v 3; done
  for n in 8192 16384; do
    LOWBIT_TIMELINE=$OUT/timeline-reltl-$n.bin timeout 100 $V/reltl/bench_attention --tokens $n --dims 128 --causal no \
      --exp2 sm90-ex2 --warmup 2 --repeats 5 > $OUT/timeline-bench-reltl-$n.txt 2>&1
  done
} >> $OUT/sources-stdout.txt
cd $OUT && tar -czf extra.tgz bench-*.txt timeline-* && rm -f bench-*.txt timeline-*
cat $OUT/sources-stdout.txt
