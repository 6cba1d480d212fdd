#!/usr/bin/env bash
# The fused exponent argument's accuracy beside the rounded one, on the committed SmolLM2 capture:
# `lowbit attention --preset sage2-8b-ex2` (causal, every head of layers 0, 10, 20, 29) with
# --set exp2-argument=fused and =rounded, each against float64 attention (--metrics-json), and the
# fp16 outputs of the two compared element by element. From the repository root, after a build:
#   bash results/bench_attention/fused-accuracy/run.sh [OUT]      (OUT: build/results/fused-accuracy)
set -euo pipefail
out=${1:-build/results/fused-accuracy}
lowbit=${LOWBIT:-build/experiments/lowbit}
data=experiments/data/smollm2-135m
mkdir -p "$out"
for layer in 00 10 20 29; do
  for argument in fused rounded; do
    "$lowbit" attention --preset sage2-8b-ex2 --causal --set exp2-argument=$argument \
      --q $data/layer${layer}_q.npy --k $data/layer${layer}_k.npy --v $data/layer${layer}_v.npy \
      --out "$out/out-$layer-$argument.npy" --metrics-json "$out/metrics-$layer-$argument.json" > /dev/null
  done
done
/usr/bin/python3 - "$out" <<'PY' | tee "$out/table.md"
import json, sys
import numpy as np
out = sys.argv[1]
print("| layer | exp2-argument | cosine | rel L1 | RMSE | max abs | fp16 outputs that differ between the two |")
print("|---|---|---|---|---|---|---|")
for layer in ["00", "10", "20", "29"]:
    a, b = (np.load(f"{out}/out-{layer}-{x}.npy") for x in ("fused", "rounded"))
    for x in ("fused", "rounded"):
        m = json.load(open(f"{out}/metrics-{layer}-{x}.json"))
        differ = f"{int((a != b).sum()):,} of {a.size:,}" if x == "fused" else ""
        print(f"| {layer} | {x} | {m['cosine']:.9f} | {m['rel_l1']:.9f} | {m['rmse']:.9f} | {m['max_abs']:.6f} | {differ} |")
PY
