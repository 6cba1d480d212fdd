#!/usr/bin/env bash
# run49: three variants against the tree (5320cdd's kernel), scripts/gpu_sage2_sources.sh with 3
# non-causal and 2 causal rounds: e64 (d = 64 releases its stage at the barrier after P V, run46's
# mbp1e at d = 64 only), pf (each block prefetches into the L2 the Q tiles of the block a resident
# grid ahead), eptl (diagnostic: %globaltimer at points of the end of the rows, d = 128 non-causal;
# then its timelines at N = 8K and 16K).
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=3 CAUSAL_ROUNDS=2 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
for n in 8192 16384; do
  LOWBIT_BLOCK_TIMELINE=$OUT/eptl-$n.bin /tmp/sage2-sources/eptl/bench_attention --tokens $n --dims 128 --causal no \
    --exp2 sm90-ex2 --warmup 1 --repeats 3 > $OUT/eptl-bench-$n.txt 2>&1
  gzip $OUT/eptl-$n.bin
done
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
cat $OUT/sources-stdout.txt; ls -la $OUT
