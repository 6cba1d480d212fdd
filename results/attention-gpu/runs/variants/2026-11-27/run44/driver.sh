#!/usr/bin/env bash
# run44: 6cefa4e's release still leaves warp 0 last at P V's issue (450 cycles, reltl's timeline):
# thread 0 waits at the count's returned value and issues a third of the refills inside the Q K^T
# wait. Variants (patches/s10-*.patch against 6cefa4e):
#   pvrel  the count and refill of block i - 1 after P V of block i is issued (the longer wait);
#   mbqL   per-stage "empty" mbarriers: each unit's thread 0 arrives (nothing returned to wait for)
#          where it counted; the refill of block i's stage goes round robin to the units reading
#          block i + 4, which wait for that phase L blocks later at Q K^T (mbq1, mbq2);
#   mbpL   the same, the refill at P V (mbp1, mbp2).
# scripts/gpu_sage2_sources.sh: smoke tests, 3 non-causal and 2 causal rounds.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=3 CAUSAL_ROUNDS=2 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
cat $OUT/sources-stdout.txt
