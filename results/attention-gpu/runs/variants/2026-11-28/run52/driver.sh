#!/usr/bin/env bash
# run52: where a thread block's time goes, KV block by KV block. Variants against the tree
# (747a184's kernel): itl (diagnostic: thread 0 of each unit writes %clock at the top of every KV
# block, at its loop's end and at the end of its rows; d = 128 non-causal), pers (run51's persistent
# grid, again), ptl (pers with itl's timeline, tile after tile). scripts/gpu_sage2_sources.sh with
# 2 non-causal rounds; then the timelines of itl and ptl at N = 8K and 16K, summarized by itl.py
# (in the call, variants/itl.py.txt; here run52/itl.py).
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=2 CAUSAL_ROUNDS=0 BENCH_TIMEOUT=40 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
T=/tmp/itl; rm -rf $T; mkdir -p $T
for v in itl ptl; do
  for n in 8192 16384; do
    LOWBIT_ITL=$T/$v-$n.bin timeout 60 /tmp/sage2-sources/$v/bench_attention --tokens $n --dims 128 --causal no \
      --exp2 sm90-ex2 --warmup 1 --repeats 2 > $T/$v-bench-$n.txt 2>&1
    echo "$v $n: exit $?"
  done
done > $T/runs.txt 2>&1
python3 variants/itl.py.txt $T/itl-8192.bin $T/itl-16384.bin $T/ptl-8192.bin $T/ptl-16384.bin > $T/itl-summary.txt 2>&1
gzip $T/itl-8192.bin $T/ptl-8192.bin; rm -f $T/*.bin
nvidia-smi > $T/nvidia-smi.txt 2>&1
tar -czf $OUT/itl.tgz -C /tmp itl
cat $OUT/sources-stdout.txt $T/runs.txt $T/itl-summary.txt; ls -la $OUT $T
