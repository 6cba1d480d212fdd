#!/bin/bash
# The ctests gpu:lowbit-run-*: `lowbit run EXPERIMENT --device gpu` on a GPU at tiny sizes, checked
# from its gpu-check.json: at least one work item ran on the GPU and in emulation, more than 0
# output codes and LSE values were compared and none differs; then the same sweep in 2 shards and
# their merge (run-merge), whose gpu-check.json must list the whole run's evaluations; then
# --no-check, whose kernel variants ran on the GPU alone and whose evaluate()d variants no kernel
# computes were left out (no rows in metrics.csv), not emulated. Exit 77 (skipped) where lowbit
# finds no GPU.
# usage: gpu_run_check.sh LOWBIT OUT PYTHON EXPERIMENT [OPTIONS...]
set -u
lowbit=$1 out=$2 python=$3 experiment=$4
shift 4
rm -rf "$out" && mkdir -p "$out"
run() {
  "$lowbit" run "$experiment" "$@" --no-plots
  local rc=$?
  if [ $rc -eq 77 ]; then echo "no GPU: skipped"; exit 77; fi
  if [ $rc -ne 0 ]; then echo "FAILED: lowbit run $experiment $* exited $rc"; exit 1; fi
}
run "$@" --device gpu --out "$out/whole"
run "$@" --device gpu --shard 1/2 --out "$out/shard1"
run "$@" --device gpu --shard 2/2 --out "$out/shard2"
"$lowbit" run-merge "$out/merged" "$out/shard1" "$out/shard2" --no-plots || { echo "FAILED: run-merge"; exit 1; }
run "$@" --device gpu --no-check --out "$out/alone"
"$python" - "$out" <<'PY'
import csv, json, sys
out = sys.argv[1]
load = lambda name: json.load(open(f"{out}/{name}/gpu-check.json"))
whole, merged, alone = load("whole"), load("merged"), load("alone")
t = whole["totals"]
print(json.dumps(t))
checked = [e for e in whole["evaluations"] if e["ran_on"] == "gpu+emulation"]
assert checked, "no work item ran on the GPU and in emulation"
assert whole["passed"] and t["codes_compared"] > 0 and t["lse_compared"] > 0, t
assert t["codes_differ"] == 0 and t["lse_differ"] == 0, t
assert all(e["codes_compared"] > 0 for e in checked), checked
assert all(e.get("reason") for e in whole["evaluations"] if e["ran_on"] == "emulation only")
assert merged["evaluations"] == whole["evaluations"], "the merge's evaluations are not the whole run's"
assert merged["totals"] == whole["totals"] and len(merged["gpus"]) == 2, merged["gpus"]
alone_gpu = [e["variant"] for e in alone["evaluations"] if e["ran_on"] == "gpu"]
assert alone_gpu == [e["variant"] for e in checked], (alone_gpu, checked)
assert alone["totals"]["codes_compared"] == 0
metrics = open(f"{out}/alone/metrics.csv").read()
assert all(f"{v} (GPU)" in metrics for v in alone_gpu)
# What the whole run emulated only is, under --no-check, left out (evaluate()'s) or still emulated
# (an experiment's own computation, which no kernel runs either way).
pairs = lambda doc, ran_on: [(e["variant"], e["dataset"]) for e in doc["evaluations"] if e["ran_on"] == ran_on]
left_out = pairs(alone, "left out")
assert sorted(left_out + pairs(alone, "emulation only")) == sorted(pairs(whole, "emulation only")), (left_out, whole["evaluations"])
assert all(e.get("reason") for e in alone["evaluations"] if e["ran_on"] == "left out")
assert alone["totals"]["work_items_left_out"] == sum(e["work_items"] for e in alone["evaluations"] if e["ran_on"] == "left out")
rows = {(r["variant"], r["dataset"]) for r in csv.DictReader(l for l in open(f"{out}/alone/metrics.csv") if not l.startswith("#"))}
assert not rows & set(left_out), rows & set(left_out)
print(f"{len(checked)} evaluations checked on {whole['gpus'][0].get('gpu')}: {t['codes_compared']} output codes, "
      f"{t['lse_compared']} LSE values, 0 differ; the 2-shard merge lists the same; --no-check ran {len(alone_gpu)} on the GPU alone "
      f"and left {len(left_out)} out")
PY
