#!/usr/bin/env bash
# run60: the tree is run59's nb at d = 128 non-causal only (Shape::barrier_in_loop; the other
# kernels compile to a232d15's instructions), beside old (a232d15's kernel), nbks (the tree with
# each K scale read one block ahead, non-causal) and nbe (the tree with each warp releasing block i
# right after its P V wait, where it released block i - 1 after issuing Q K^T of block i).
# scripts/gpu_sage2_sources.sh with 6 non-causal rounds and 2 causal.
export LOWBIT_GIT_SHA=${LOWBIT_GIT_SHA:-unknown}
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=6 CAUSAL_ROUNDS=2 BENCH_TIMEOUT=30 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
cat $OUT/sources-stdout.txt
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
