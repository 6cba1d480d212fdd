#!/usr/bin/env bash
# One stage of the sage2-8b-ex2 pipeline at two values, on the committed SmolLM2 capture: `lowbit
# attention --preset sage2-8b-ex2` (causal, every head of layers 0, 10, 20, 29) with --set STAGE=A and
# --set STAGE=B, each against float64 attention (--metrics-json), and the fp16 outputs of the two
# compared element by element; the metrics and the table (table.md) go to OUT, the outputs to a scratch
# folder. From the repository root, after a build:
#   scripts/stage_accuracy.sh exp2-argument fused rounded results/bench_attention/fused-accuracy
#   scripts/stage_accuracy.sh row-sum pv lanes results/bench_attention/row-sum-accuracy
# (OUT defaults to build/results/stage-accuracy.)
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: scripts/stage_accuracy.sh STAGE A B [OUT]   (lowbit attention --help lists the stages)" >&2
  exit 2
fi
stage=$1 a=$2 b=$3
out=${4:-build/results/stage-accuracy}
lowbit=${LOWBIT:-build/experiments/lowbit}
data=experiments/data/smollm2-135m
mkdir -p "$out"
outputs=$(mktemp -d)
trap 'rm -rf "$outputs"' EXIT
for layer in 00 10 20 29; do
  for value in "$a" "$b"; do
    "$lowbit" attention --preset sage2-8b-ex2 --causal --set "$stage=$value" \
      --q $data/layer${layer}_q.npy --k $data/layer${layer}_k.npy --v $data/layer${layer}_v.npy \
      --out "$outputs/out-$layer-$value.npy" --metrics-json "$out/metrics-$layer-$value.json" > /dev/null
  done
done
/usr/bin/python3 - "$out" "$outputs" "$stage" "$a" "$b" <<'PY' | tee "$out/table.md"
import json, sys
import numpy as np
out, outputs, stage, a, b = sys.argv[1:]
print(f"| layer | {stage} | cosine | rel L1 | RMSE | max abs | fp16 outputs that differ between the two |")
print("|---|---|---|---|---|---|---|")
for layer in ["00", "10", "20", "29"]:
    first, second = (np.load(f"{outputs}/out-{layer}-{x}.npy") for x in (a, b))
    for x in (a, b):
        m = json.load(open(f"{out}/metrics-{layer}-{x}.json"))
        differ = f"{int((first != second).sum()):,} of {first.size:,}" if x == a else ""
        print(f"| {layer} | {x} | {m['cosine']:.9f} | {m['rel_l1']:.9f} | {m['rmse']:.9f} | {m['max_abs']:.6f} | {differ} |")
PY
