#!/usr/bin/env bash
# run31: the codes of subnormal scales. tree (the quantization's codes divide where the scale is
# below 2^-92, kernels/quant_codes.cuh) against old (HEAD's kernels: RN(1/s) for every nonzero
# scale): the smoke test with the two "tiny" configurations, timed side by side (ABLATIONS=1: old
# fails the smoke test); then the GLA kernels' bits (scripts/gpu_linear_run.sh check, sanitize).
set -uo pipefail
ABLATIONS=1 bash scripts/gpu_sage2_sources.sh 2>&1 | tee $OUT/sources-stdout.txt
STEPS="check sanitize" OUT=$OUT bash scripts/gpu_linear_run.sh 2>&1 | tail -30
