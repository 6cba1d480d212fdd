#!/usr/bin/env bash
# run32: the tree of fca89d7 against `fused` (an ablation: variants/fused.cu = fca89d7's
# kernels/attention/sage2_kernels.cu with ../patches/s7-ablate-fused.patch; steps 1 and 5 in one
# FFMA, exp2(fma(float(acc), scale, -offset)), in every block, masked ones included), timed although
# its bits differ from the emulation of that commit (ABLATIONS=1). One device call (H100):
rm -rf build && mkdir -p $OUT && SOURCES=variants ABLATIONS=1 OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
