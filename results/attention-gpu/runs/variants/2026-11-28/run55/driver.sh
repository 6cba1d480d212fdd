#!/usr/bin/env bash
# run55: a232d15's entry order against two of its neighbours, non-causal (the causal kernels are the
# same code in all three): s2 (stages 0 and 1 before the Q tiles land, 2 .. after), qall (the Q tiles
# first, then all 4 stages at once). scripts/gpu_sage2_sources.sh with 4 non-causal rounds.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=4 CAUSAL_ROUNDS=0 BENCH_TIMEOUT=30 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
cat $OUT/sources-stdout.txt
