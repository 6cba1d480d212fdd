#!/usr/bin/env bash
# run40: run39's timeline put a d = 128 unit's Q K^T at 670 cycles from issue to wait and its P V
# at 570, four dependent m64n128k32 wgmmas each, with no other unit on the tensor cores 41% of the
# time: each chain waits on its own accumulator. The variants split S and R into two independent
# m64n64 halves (keys 0-63 and 64-127 of S, channels 0-63 and 64-127 of R) issued interleaved,
# lo0 hi0 lo1 hi1 ... in one commit group (d = 64 unchanged):
#   il   both; ilq  Q K^T only; ilp  P V only; iltl  il with run39's timeline; tl  run39's tl.
# scripts/gpu_sage2_sources.sh (smoke tests, two non-causal rounds), two causal rounds, a third
# non-causal round, the timelines at N = 8K and 16K, and il's full check (both exponentials).
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
V=/tmp/sage2-sources
bench() {  # $1 causal yes|no, $2 variant, $3 round
  [[ -x $V/$2/bench_attention ]] || return
  timeout 100 $V/$2/bench_attention --tokens 8192,16384 --dims 128,64 --causal $1 --exp2 sm90-ex2 --warmup 2 --repeats 10 > $OUT/bench-$1-$2-$3.txt 2>&1
  echo "causal=$1 round $3 $2: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $OUT/bench-$1-$2-$3.txt)"
}
{
  for round in 1 2; do
    order="tree il ilq ilp"; (( round == 2 )) && order="ilp ilq il tree"
    for v in $order; do bench yes $v $round; done
  done
  for v in il tree ilp ilq; do bench no $v 3; done
  for v in tl iltl; do
    for n in 8192 16384; do
      LOWBIT_TIMELINE=$OUT/timeline-$v-$n.bin timeout 100 $V/$v/bench_attention --tokens $n --dims 128 --causal no \
        --exp2 sm90-ex2 --warmup 2 --repeats 5 > $OUT/timeline-bench-$v-$n.txt 2>&1
    done
  done
  for e in sm90-ex2 poly5; do
    timeout 200 $V/il/check_sage2_gpu --configs full --exp2 $e --out /tmp/full-il-$e > $OUT/check-full-il-$e.log 2>&1
    echo "il check full --exp2 $e: exit $?, $(tail -1 $OUT/check-full-il-$e.log)"
  done
} >> $OUT/sources-stdout.txt
cd $OUT && tar -czf extra.tgz bench-*.txt timeline-* check-full-* && rm -f bench-*.txt timeline-* check-full-*
cat $OUT/sources-stdout.txt
