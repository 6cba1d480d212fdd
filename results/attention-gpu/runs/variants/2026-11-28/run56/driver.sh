#!/usr/bin/env bash
# run56: where a232d15's gain lies, with light time stamps (none inside the loop). Variants against
# the tree (a232d15): ltlold (747a184's kernel) and ltlent (a232d15's), each with three %clock stamps
# a unit (before its KV loop, at its end, at the end of its rows) and the block's entry. Timed with
# scripts/gpu_sage2_sources.sh (2 non-causal rounds; was the gain kept with the stamps?), then their
# timelines at N = 8K, summarized by ltl.py.
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=2 CAUSAL_ROUNDS=0 BENCH_TIMEOUT=30 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
T=/tmp/ltl; rm -rf $T; mkdir -p $T
for v in ltlold ltlent; do
  LOWBIT_ITL=$T/$v-8192.bin timeout 60 /tmp/sage2-sources/$v/bench_attention --tokens 8192 --dims 128 --causal no \
    --exp2 sm90-ex2 --warmup 1 --repeats 2 > $T/$v-bench-8192.txt 2>&1
  echo "$v: exit $?"
done > $T/runs.txt 2>&1
python3 variants/ltl.py.txt $T/ltlold-8192.bin $T/ltlent-8192.bin > $T/ltl-summary.txt 2>&1
rm -f $T/*.bin
nvidia-smi > $T/nvidia-smi.txt 2>&1
tar -czf $OUT/ltl.tgz -C /tmp ltl
cat $OUT/sources-stdout.txt $T/runs.txt $T/ltl-summary.txt
