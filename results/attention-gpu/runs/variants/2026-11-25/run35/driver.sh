#!/usr/bin/env bash
# run35: the tree of a4a4c2a against `poly2`, `poly4` and `poly8` (variants/NAME.cu = a4a4c2a's
# kernels/attention/sage2_kernels.cu with ../patches/s7-NAME.patch: every 2nd, 4th or 8th exponential
# of a row by the degree-5 polynomial on the FMA pipe, the rest MUFU.EX2; ablations, their bits those of
# no emulation, timed with ABLATIONS=1). One device call (H100):
rm -rf build && mkdir -p $OUT && SOURCES=variants ABLATIONS=1 OUT=$OUT bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
