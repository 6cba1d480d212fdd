#!/usr/bin/env bash
# run47: where a thread block's time goes outside its loop. The kernel at N = 8K is 4% slower a KV
# block than at 16K: about 8 us a block of fixed cost (canonical H100 run of 501f7aa). Variant btl
# (patches/s10-btl.patch against 501f7aa): %globaltimer of every block of the d = 128 non-causal
# kernel at its entry and, per unit, at its loop's start and end and at its exit, with %smid,
# written after each launch where LOWBIT_BLOCK_TIMELINE points (btl-N.bin.gz; btl.py reads them).
# scripts/gpu_sage2_sources.sh: smoke tests and one non-causal round (the diagnostic's own cost);
# then the timelines at N = 8K, 16K and 32K.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=1 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
for n in 8192 16384 32768; do
  LOWBIT_BLOCK_TIMELINE=$OUT/btl-$n.bin /tmp/sage2-sources/btl/bench_attention --tokens $n --dims 128 --causal no \
    --exp2 sm90-ex2 --warmup 1 --repeats 3 > $OUT/btl-bench-$n.txt 2>&1
  gzip $OUT/btl-$n.bin
done
cd $OUT && tar -czf extra.tgz btl-bench-*.txt && rm -f btl-bench-*.txt
cat $OUT/sources-stdout.txt; ls -la $OUT
