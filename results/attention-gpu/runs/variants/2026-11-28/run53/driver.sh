#!/usr/bin/env bash
# run53: the block's entry. Variants against the tree (747a184's kernel): ent (the Q tile's copies
# issued first, before the mbarriers' init; then stage 0; stages 1.. once unit 0's Q tile landed),
# entep (ent, and the end of the rows' LSE biases and V scales copied to shared memory with the Q
# tile, d = 128), itl and itlent (diagnostics: run52's per-KV-block %clock timeline on the tree and
# on ent). scripts/gpu_sage2_sources.sh with 2 non-causal rounds and 1 causal; then the timelines of
# itl and itlent at N = 8K and 16K, summarized by itl.py (in the call, variants/itl.py.txt).
rm -rf build && mkdir -p $OUT && SOURCES=variants OUT=$OUT ROUNDS=2 CAUSAL_ROUNDS=1 BENCH_TIMEOUT=30 bash scripts/gpu_sage2_sources.sh > $OUT/sources-stdout.txt 2>&1
T=/tmp/itl; rm -rf $T; mkdir -p $T
for v in itl itlent; do
  for n in 8192 16384; do
    LOWBIT_ITL=$T/$v-$n.bin timeout 60 /tmp/sage2-sources/$v/bench_attention --tokens $n --dims 128 --causal no \
      --exp2 sm90-ex2 --warmup 1 --repeats 2 > $T/$v-bench-$n.txt 2>&1
    echo "$v $n: exit $?"
  done
done > $T/runs.txt 2>&1
python3 variants/itl.py.txt $T/itl-8192.bin $T/itlent-8192.bin $T/itl-16384.bin $T/itlent-16384.bin > $T/itl-summary.txt 2>&1
gzip $T/itl-8192.bin $T/itlent-8192.bin; rm -f $T/*.bin
nvidia-smi > $T/nvidia-smi.txt 2>&1
tar -czf $OUT/itl.tgz -C /tmp itl
cat $OUT/sources-stdout.txt $T/runs.txt $T/itl-summary.txt; ls -la $OUT
