#!/usr/bin/env bash
# run45: in run44 the refill at P V one block after (mbp1) was 1.6-3.0% faster at d = 128
# non-causal; refills at Q K^T were 7-11% slower at d = 128 (two blocks after: the ring then holds
# only two blocks ahead) and 1-2.5% faster at d = 64. Here d = 64 refills at Q K^T one block after
# in every variant, and d = 128 (patches/s10-*.patch against 6cefa4e):
#   mbp1    at P V one block after, 4 stages (run44's mbp1);
#   mbp1nb  the same, but a refill whose phase is incomplete at P V waits until the next Q K^T;
#   mbp1s6  mbp1 with 6 stages; mbp2s6  at P V two blocks after, 6 stages;
#   mbq2s6  at Q K^T two blocks after, 6 stages.
# scripts/gpu_sage2_sources.sh: smoke tests, 3 non-causal and 2 causal rounds.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=3 CAUSAL_ROUNDS=2 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
cat $OUT/sources-stdout.txt
