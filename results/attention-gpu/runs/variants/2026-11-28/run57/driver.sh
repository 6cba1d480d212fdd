#!/usr/bin/env bash
# run57: the units of a non-causal d = 128 block started further apart on purpose (run56: a232d15's
# loop ran 1.2% faster with its units starting 1109 cycles apart against 456). Variants against the
# tree (3dbd27a, a232d15's code): st250 and st500, unit w sleeping w x 250 or 500 ns (__nanosleep)
# after its Q tile landed. scripts/gpu_sage2_sources.sh with 2 non-causal rounds.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=2 CAUSAL_ROUNDS=0 BENCH_TIMEOUT=30 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
cat $OUT/sources-stdout.txt
