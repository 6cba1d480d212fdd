#!/usr/bin/env bash
# run59: three small changes to the KV loop and their sum, beside the tree (a232d15's kernel):
# imx (without masked keys the row's lanes exchange their integer maxima, before the conversions),
# ksn (non-causal: each KV block's K scale read one block ahead), nb (no unit barrier in the loop:
# each warp's lane 0 releases a stage, the empty mbarriers count 4 arrivals a unit; one barrier
# after the loop for the Q tile's reuse), all (the three). scripts/gpu_sage2_sources.sh with 4
# non-causal rounds and 2 causal.
export LOWBIT_GIT_SHA=${LOWBIT_GIT_SHA:-unknown}
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=4 CAUSAL_ROUNDS=2 BENCH_TIMEOUT=30 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
cat $OUT/sources-stdout.txt
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
