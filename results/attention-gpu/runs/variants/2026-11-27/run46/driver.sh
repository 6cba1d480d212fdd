#!/usr/bin/env bash
# run46: run45's mbp1 (d = 128: the refill at P V one block after, 4 stages) was 2.7% faster at
# 8K and 1.6% at 16K, and work placed in the Q K^T wait cost d = 128 in every variant. Here the
# arrival that releases block i moves from Q K^T of block i + 1 to right after the unit's barrier
# of block i (nothing returned, so nothing waited for): mbp1e, and with 6 stages mbp1s6e
# (patches/s10-*.patch against 6cefa4e). scripts/gpu_sage2_sources.sh: smoke tests, 3
# non-causal and 2 causal rounds.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=3 CAUSAL_ROUNDS=2 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
cat $OUT/sources-stdout.txt
