#!/usr/bin/env bash
# run54: the block's entry, side by side on the canonical GPU kind. The tree is the candidate
# (747a184 + the entry order at d = 128 only: Q tiles first, stage 0, stages 1.. after unit 0's Q
# tile landed); old = 747a184's kernel; ent = run53's ent (the same order at d = 64 too).
# scripts/gpu_sage2_sources.sh with 4 non-causal rounds and 2 causal.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=4 CAUSAL_ROUNDS=2 BENCH_TIMEOUT=30 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
cat $OUT/sources-stdout.txt
