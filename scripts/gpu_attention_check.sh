#!/usr/bin/env bash
# The GPU kernel's bit-for-bit check, as ./dev.sh run calls it: where the lowbit binary has
# `lowbit attention --device gpu --check` (the sage2-8b kernels) and a GPU is present, run both
# builds of the kernel on the committed SmolLM2 sample and compare every output code and LSE with
# the emulated sage2-8b and sage2-8b-ex2 pipelines (the command exits 1 on any difference).
#
# usage: scripts/gpu_attention_check.sh LOWBIT_BINARY OUT_DIR
# exit: 0 every layer bit-exact; 1 a difference or an error; 77 skipped (no --device in this
# build, or no GPU: the command's own 77).
set -uo pipefail
lowbit=$1
out=$2
data="$(dirname "$0")/../experiments/data/smollm2-135m"
if ! "$lowbit" attention --help 2>/dev/null | grep -q -- "--device"; then
  echo "gpu kernel check: skipped: this lowbit has no 'attention --device gpu' (the kernels are not built in)"
  exit 77
fi
mkdir -p "$out"
status=0
# Both builds of the kernel: the polynomial exp2 (sage2-8b) and MUFU.EX2 (sage2-8b-ex2).
for preset in sage2-8b sage2-8b-ex2; do
  for layer in 00 10 20 29; do
    name=$preset-layer$layer
    "$lowbit" attention --device gpu --check --preset $preset --causal \
      --q "$data/layer${layer}_q.npy" --k "$data/layer${layer}_k.npy" --v "$data/layer${layer}_v.npy" \
      --metrics-json "$out/$name.json" > "$out/$name.txt" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then
      echo "gpu kernel check: skipped: no GPU ($(tail -n 1 "$out/$name.txt"))"
      exit 77
    fi
    echo "gpu kernel check: $preset, layer $layer: $( [ $rc -eq 0 ] && echo "bit-exact" || echo "FAILED (exit $rc)" ) ($out/$name.txt)"
    [ $rc -eq 0 ] || status=1
  done
done
exit $status
