#!/usr/bin/env bash
# run33: the tree of 908b1a9 against `mutexw` and `mutexi` (variants/NAME.cu = 908b1a9's
# kernels/attention/sage2_kernels.cu with ../patches/s7-NAME.patch: a shared-memory lock on the
# tensor cores among the units of a block at d = 128, taken before each wgmma group and released
# after its wait (mutexw) or right after its issue (mutexi), so that the units' groups do not
# interleave; scheduling only, the bits unchanged). One device call (H100):
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
