#!/bin/bash
# Issue 36, part 3: the granularity, smoothing, pv-format and accumulator experiments on every layer
# and head of a SmolLM2-135M capture at 8192 tokens, on the GPU alone (--no-check: variants no
# kernel computes are left out, listed in each gpu-check.json), then one checked slice (layer 0,
# Q head 0, 8192 tokens, GPU and emulation compared code by code).
#
# Run from the repository root on the GPU machine:
#   scripts/device/real_scale_sweeps.sh LOWBIT
# LOWBIT: a built `lowbit` (with the CUDA kernels). $OUT: the folder whose files come back. Needs
# the trimmed GGUF's pieces .gguf-parts/smollm2-trimmed.gguf.xz.part-aa, -ab (joined in name order,
# decompressed, its SHA-256 checked against .gguf-parts/trimmed.json, whose source must be
# capture.json's GGUF) and .whl/gguf-0.19.0-py3-none-any.whl (scripts/device/pack_gguf.sh writes
# them), python3 with numpy and tokenizers.
# Getting the GGUF there (63 MB compressed; a call carries at most 64 MiB, the tree included, and the
# tree is 57 MB): with the tree's verification/ and results/ out of the working tree for the two calls
# (git checkout brings them back; the run reads neither; set LOWBIT_GIT_SHA), two calls back to back
# on one warm machine (it goes back 30 s after a call): the first carries one piece in a folder of its
# own (say .gguf-a/) and copies it to /tmp, the second the other (.gguf-b/), puts both in
# .gguf-parts/ and runs this.
# Steps, in this order, and their expected time on 16 cores and an H100 (extrapolated from 2 shared
# cores, untried on the device; each is printed as it ends):
#   join and check the GGUF, install gguf                                        ~5 s
#   capture: 30 layers x 8192 tokens of the saltmarsh text (float64 numpy;
#     ~6-8 CPU s a layer on its 16 threads, plus ~10 s loading and saving)       ~0.5-1.5 min
#   granularity (--no-check; 8 variants x 270 heads)                             ~1 min
#   checked slice: granularity on layer 0, Q head 0, emulated beside the GPU     ~1-1.5 min
#   pv-format, smoothing (--no-check)                                            ~1 min each
#   accumulator (--no-check; windows of 128 queries at 1K-8K keys, Table 13)     ~1-1.5 min
#   pack                                                                         ~10 s
# The whole run keeps within BUDGET seconds (default 480): each step is cut (timeout) where it
# would pass BUDGET less 20 s for packing, and a step with under 20 s left is skipped; summary.md
# marks either. Back in $OUT: summary.md (times, exit codes, each run's gpu-check.json totals and
# table.md), capture.json, real-scale.tar.xz (every result folder but .npy heatmaps and plots, and
# the logs; split into real-scale.tar.xz.part-aa, ... past 15 MB). Exit 0 when every step ran and
# exited 0, else 1.
# STEPS (default all five: granularity checked-slice pv-format smoothing accumulator) runs some of them,
# in that order (a later call finishing what a budget cut).
# SHARDS=N (default 1) runs each sweep as N processes side by side (--shard I/N), joined by lowbit
# run-merge: one process leaves most of the 16 cores idle (the accumulator averaged under 2 of them).
# For a trial elsewhere: TOKENS, REAL_LENGTHS, LAYERS, Q_HEADS, THREADS, BUDGET, DEVICE (cpu: no
# GPU, everything emulated) and CAPTURE (a folder holding a capture already: no capture step).
set -uo pipefail
lowbit=$(realpath "${1:?usage: scripts/device/real_scale_sweeps.sh LOWBIT (with OUT set)}")
out=${OUT:?OUT: the folder whose files come back}
tokens=${TOKENS:-8192}
real_lengths=${REAL_LENGTHS:-1024,2048,4096,8192}
layers=${LAYERS:-all}
q_heads=${Q_HEADS:-all}
threads=${THREADS:-16}
shards=${SHARDS:-1}
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "SHARDS: '$shards' is not a positive whole number" >&2; exit 1; }
device=${DEVICE:-gpu}
deadline=$(($(date +%s) + ${BUDGET:-480} - 20))  # 20 s kept for packing
all_steps=" granularity checked-slice pv-format smoothing accumulator "
read -r -a steps <<< "${STEPS:-$all_steps}"
for name in "${steps[@]}"; do
  [[ $all_steps == *" $name "* ]] || { echo "STEPS: '$name' is none of$all_steps" >&2; exit 1; }
done
text=experiments/data/qwen2.5-coder-1.5b/text.txt  # 9,049 SmolLM2 tokens: the repository's longest prose
work=/tmp/real-scale
mkdir -p "$out" "$work"
summary=$work/summary.md
echo "# Real-scale sweeps: SmolLM2-135M, $tokens tokens, layers $layers, Q heads $q_heads, --device $device" > "$summary"
echo "" >> "$summary"
echo "| step | seconds | exit |" >> "$summary"
echo "|---|---|---|" >> "$summary"
failed=0

# Runs "$@" as step NAME (its output in $work/NAME.log) within the time left, timing it; records
# the time and exit code.
step() {
  local name=$1 start rc seconds status left=$((deadline - $(date +%s)))
  shift
  if [ $left -lt 20 ]; then
    echo "| $name | - | skipped: the budget was spent |" >> "$summary"
    echo "== $name: skipped, the budget was spent" >&2
    failed=1
    return 1
  fi
  start=$(date +%s%N)
  timeout "$left" "$@" > "$work/$name.log" 2>&1
  rc=$?
  seconds=$((($(date +%s%N) - start) / 1000000000))
  status=$rc
  if [ $rc -eq 124 ]; then status="124 (timed out: cut at $left s, the budget's end)"; fi
  echo "| $name | $seconds | $status |" >> "$summary"
  echo "== $name: $seconds s, exit $status" >&2
  tail -n 3 "$work/$name.log" >&2
  [ $rc -eq 0 ] || failed=1
  return $rc
}

if [ -z "${CAPTURE:-}" ]; then
  capture=/tmp/cap8k
  source_sha=$(python3 -c 'import json; print(json.load(open("experiments/data/smollm2-135m/capture.json"))["gguf_sha256"])')
  record_source=$(python3 -c 'import json; print(json.load(open(".gguf-parts/trimmed.json"))["source_sha256"])')
  want=$(python3 -c 'import json; print(json.load(open(".gguf-parts/trimmed.json"))["trimmed_sha256"])')
  if [ "$record_source" != "$source_sha" ]; then echo "trimmed.json: trimmed from $record_source, not the capture's $source_sha" >&2; exit 1; fi
  cat .gguf-parts/smollm2-trimmed.gguf.xz.part-* | xz -dc > /tmp/smollm2.gguf || exit 1
  got=$(sha256sum /tmp/smollm2.gguf | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then echo "the joined GGUF's SHA-256 is $got, not trimmed.json's $want" >&2; exit 1; fi
  cp .gguf-parts/trimmed.json "$out/gguf-trimmed.json"
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/gguf-*.whl || exit 1
  step capture env PYTHONPATH=/tmp/site LOWBIT_BLAS_THREADS="$threads" python3 experiments/data/capture_smollm2.py \
    --gguf /tmp/smollm2.gguf --text "$text" --tokens "$tokens" --all-layers --no-check --out "$capture" || exit 1
else
  capture=$CAPTURE
fi
cp "$capture/capture.json" "$out/capture.json"

# lowbit run NAME ARGS... --out DIR as SHARDS processes side by side, each into DIR.shard-I, then
# joined into DIR (a function so that step's timeout covers the whole, its process group included).
sweep() {
  local dir=$1 i rc=0
  shift
  if [ "$shards" -eq 1 ]; then "$lowbit" run "$@" --out "$dir"; return; fi
  local pids=()
  for i in $(seq 1 "$shards"); do
    "$lowbit" run "$@" --shard "$i/$shards" --out "$dir.shard-$i" > "$dir.shard-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  tail -n 2 "$dir".shard-*.log
  [ $rc -eq 0 ] && "$lowbit" run-merge --no-plots "$dir" "$dir".shard-*[0-9]
}
export -f sweep
export lowbit shards

common=(--data-dir "$capture" --datasets smollm2 --tokens "$tokens" --device "$device" --threads "$threads" --no-plots)
alone=("${common[@]}" --layers "$layers" --q-heads "$q_heads")
[ "$device" = gpu ] && alone+=(--no-check)
for name in "${steps[@]}"; do
  case $name in
    granularity | pv-format | smoothing) step "$name" bash -c 'sweep "$@"' _ "$work/$name" "$name" "${alone[@]}" ;;
    # One slice checked at full length: the GPU's output codes and LSE against the emulation's (second
    # by default: it proves the kernels at N = 8192 while the budget is whole).
    checked-slice) step checked-slice "$lowbit" run granularity "${common[@]}" --layers 0 --q-heads 0 --out "$work/checked-slice" ;;
    accumulator) step accumulator bash -c 'sweep "$@"' _ "$work/accumulator" accumulator "${alone[@]}" --real-lengths "$real_lengths" ;;
  esac
done

for dir in "${steps[@]}"; do
  echo -e "\n---\n\n# $dir" >> "$summary"
  if [ -f "$work/$dir/gpu-check.json" ]; then
    python3 -c 'import json, sys; t = json.load(open(sys.argv[1]))["totals"]; print("\ngpu-check.json totals:", json.dumps(t))' \
      "$work/$dir/gpu-check.json" >> "$summary"
  fi
  if [ -f "$work/$dir/table.md" ]; then grep -v '^<!--' "$work/$dir/table.md" >> "$summary"; else echo "(no table.md)" >> "$summary"; fi
done
cp "$summary" "$out/summary.md"
(cd "$work" && tar --exclude='*.npy' --exclude='*.png' --exclude='*.shard-[0-9]' -cJf /tmp/real-scale.tar.xz .)
if [ "$(stat -c %s /tmp/real-scale.tar.xz)" -gt 15000000 ]; then
  split -b 15M /tmp/real-scale.tar.xz "$out/real-scale.tar.xz.part-"
else
  cp /tmp/real-scale.tar.xz "$out/"
fi
ls -l "$out" >&2
exit $failed
