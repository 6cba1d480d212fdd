#!/usr/bin/env bash
# run42: run41's rel (block i - 1 released while Q K^T of block i runs) was 4-7% faster at d = 128,
# but its timeline still has warp 0 last at P V's issue in 93% of the blocks (450 cycles behind):
# thread 0's release outlasts the Q K^T wait. Two suspects, apart and together:
#   relk   rel with the block's K scale loaded after the release (no global load in flight at the
#          count's acquire-release);
#   relr   rel with the count relaxed (the readers' wgmma reads complete at their waits, which
#          precede the unit barrier and the count in program order);
#   relrk  both.
# scripts/gpu_sage2_sources.sh (smoke tests, two non-causal rounds), two causal rounds, a third
# non-causal round.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
V=/tmp/sage2-sources
bench() {  # $1 causal yes|no, $2 variant, $3 round
  [[ -x $V/$2/bench_attention ]] || return
  timeout 100 $V/$2/bench_attention --tokens 8192,16384 --dims 128,64 --causal $1 --exp2 sm90-ex2 --warmup 2 --repeats 10 > $OUT/bench-$1-$2-$3.txt 2>&1
  echo "causal=$1 round $3 $2: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $OUT/bench-$1-$2-$3.txt)"
}
{
  for round in 1 2; do
    order="tree rel relk relr relrk"; (( round == 2 )) && order="relrk relr relk rel tree"
    for v in $order; do bench yes $v $round; done
  done
  for v in relrk rel tree relk relr; do bench no $v 3; done
} >> $OUT/sources-stdout.txt
cd $OUT && tar -czf extra.tgz bench-*.txt && rm -f bench-*.txt
cat $OUT/sources-stdout.txt
