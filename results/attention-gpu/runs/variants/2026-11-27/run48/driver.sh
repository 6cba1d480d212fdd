#!/usr/bin/env bash
# run48: run47 found 2.75 us from a block's last loop end to its exit (its units' ends of rows),
# 1.9 us from its entry to its first loop, 0.26 us between blocks: 4.1% of the kernel at N = 8K.
# The end of the rows reads the V scales and the LSE's smoothing bias from global memory. Variants
# (patches/s10-ep*.patch against 501f7aa):
#   epv   each unit copies its head's V scales to shared memory in the prologue (beside its Q tile's
#         copy), the end of the rows reads them there;
#   epvq  epv, and the two rows' LSE biases read into registers before the loop.
# scripts/gpu_sage2_sources.sh: smoke tests, 3 non-causal rounds and 1 causal round.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=3 CAUSAL_ROUNDS=1 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
cat $OUT/sources-stdout.txt
