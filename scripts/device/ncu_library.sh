#!/usr/bin/env bash
# Nsight Compute's issue, stall and per-opcode metrics of one launch of the attention kernel of
# liblowbit_sage2.so (through lowbit.gpu, so every kernel the C interface has, the row sums by P V
# included), on the lent GPU: batch 4, 32 heads, N = 8K, not causal, fp16, MUFU.EX2, at each head
# dimension of DIMS (default "128 64") and row sum of ROW_SUMS (default "lanes pv"), into
# $OUT/dD-ROWSUM.csv (experiments/bench/ncu_stalls.py reads them; --opcodes 8589934592: B H N^2).
# From the repository root, carrying $PREBUILT (default build-call/, packed as bench_in_turn.sh says):
#   OUT=/tmp/ncu scripts/device/ncu_library.sh
# What made results/bench_attention/fa3/in-turn/row-sum/ncu/ and exp2-split/ncu/. Exit 0 when every
# profile ran; 77 where no GPU is visible.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${OUT:-build/results/ncu-library}")
prebuilt=${PREBUILT:-build-call}
nvidia-smi > /dev/null 2>&1 || { echo "ncu_library: no GPU"; exit 77; }
mkdir -p "$out"
source scripts/device/prebuilt.sh
unpack_prebuilt "$prebuilt" /tmp/ncu-library liblowbit_sage2.so || exit 1
export LD_LIBRARY_PATH=/tmp/ncu-library${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cat > /tmp/ncu-library/one_launch.py <<'PY'
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("gpu", "python/lowbit/gpu.py")
gpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu)
d, row_sum = int(sys.argv[1]), sys.argv[2]
q, k, v = (torch.randn(4, 8192, 32, d, device="cuda", dtype=torch.float16) for _ in range(3))
attn = gpu.Sage2Attention(4, 32, 8192, d, layout="bnhd", row_sum=row_sum, library="/tmp/ncu-library/liblowbit_sage2.so")
attn(q, k, v)
torch.cuda.synchronize()
PY
metrics='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|smsp__inst_executed\.sum|sm__cycles_elapsed\.avg|sm__inst_executed_pipe_xu\.avg\.pct_of_peak_sustained_active|launch__registers_per_thread|lts__throughput\.avg\.pct_of_peak_sustained_elapsed,sass__inst_executed_per_opcode'
status=0
for d in ${DIMS:-128 64}; do
  for row_sum in ${ROW_SUMS:-lanes pv}; do
    timeout 60 ncu --kernel-name-base demangled --kernel-name regex:sage2_attention_kernel --launch-count 1 --csv --page raw \
      --print-metric-instances details --metrics "$metrics" python3 /tmp/ncu-library/one_launch.py "$d" "$row_sum" \
      > /tmp/ncu-library/raw.txt 2>&1 || { status=1; tail -n 3 /tmp/ncu-library/raw.txt; }
    grep '^"' /tmp/ncu-library/raw.txt > "$out/d$d-$row_sum.csv"
  done
done
python3 experiments/bench/ncu_stalls.py --markdown "$out"/d*.csv || status=1
exit $status
