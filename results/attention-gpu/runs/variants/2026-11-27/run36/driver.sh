#!/usr/bin/env bash
# run36: the tree of ac58e82 against the end of the rows through a shared-memory stage (variants/NAME/:
# the outputs normalized into a padded stage of the unit, then stored as 16-byte pieces):
#   epi1  the warpgroup's 128 threads store the unit's rows after a named barrier; biases and V scales
#         copied into shared memory with the Q tile;
#   epi3  each warp stages and stores its own 16 rows (no barrier beyond __syncwarp); the same copies;
#   epi3n epi3 with the biases and V scales read from global memory, as the tree does.
# scripts/gpu_sage2_sources.sh (smoke test, two non-causal rounds), then two causal rounds in
# alternating order. One device call (H100).
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
V=/tmp/sage2-sources
for round in 1 2; do
  order="tree epi1 epi3 epi3n"; (( round == 2 )) && order="epi3n epi3 epi1 tree"
  for v in $order; do
    [[ -x $V/$v/bench_attention ]] || continue
    timeout 100 $V/$v/bench_attention --tokens 8192,16384 --dims 128,64 --causal yes --exp2 sm90-ex2 --warmup 2 --repeats 10 > $OUT/causal-$v-$round.txt 2>&1
    echo "causal round $round $v: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' $OUT/causal-$v-$round.txt)"
  done
done >> $OUT/sources-stdout.txt
cd $OUT && tar -czf causal.tgz causal-*.txt && rm causal-*.txt
cat $OUT/sources-stdout.txt
