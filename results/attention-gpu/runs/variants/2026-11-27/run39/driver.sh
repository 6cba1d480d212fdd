#!/usr/bin/env bash
# run39: where the d = 128 loop's time goes, measured inside the kernel. Variant `tl` is the tree
# with %clock read by lane 0 of every warp at 8 points of each KV block (loop top, stage landed,
# S in, row maximum, P's codes packed, R in, unit barrier, o updated) for the blocks
# (x < 48, y = 0, z = 0) of the d = 128 non-causal kernel, written out after the launch when
# LOWBIT_TIMELINE names a file; `st` is `tl` with the block's units starting 0, 1200 and 2400
# cycles apart. scripts/gpu_sage2_sources.sh (smoke tests, two non-causal rounds: the tree
# beside the instrumented kernels), then a timeline of each at N = 8K and 16K. One device call.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
V=/tmp/sage2-sources
for v in tl st; do
  for n in 8192 16384; do
    [[ -x $V/$v/bench_attention ]] || continue
    LOWBIT_TIMELINE=$OUT/timeline-$v-$n.bin timeout 100 $V/$v/bench_attention --tokens $n --dims 128 --causal no \
      --exp2 sm90-ex2 --warmup 2 --repeats 5 > $OUT/timeline-bench-$v-$n.txt 2>&1
    echo "timeline $v N=$n: $(awk '$3 == "sm90-ex2" {printf "%s ms", $7}' $OUT/timeline-bench-$v-$n.txt), $(stat -c %s $OUT/timeline-$v-$n.bin 2>/dev/null) bytes"
  done
done >> $OUT/sources-stdout.txt
cd $OUT && tar -czf timelines.tgz timeline-* && rm timeline-*
cat $OUT/sources-stdout.txt
