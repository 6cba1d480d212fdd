#!/usr/bin/env bash
# run34: the tree of 5b1e55b (the ex2 attention kernel of 0b48f16, steps 1 and 5 fused) alone, timed,
# then Nsight Compute --set full with per-instruction warp-state sampling at d = 128, N = 8K,
# non-causal (NCU=tree). One device call (H100):
rm -rf build && mkdir -p $OUT && SOURCES=variants NCU=tree OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
