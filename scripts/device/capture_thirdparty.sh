#!/usr/bin/env bash
# On the GPU machine (device tool), one call: the third-party kernels' captures and the MUFU.LG2 and
# MUFU.RCP probes, packed under OUT_DIR (at most 8 files come back: tarballs of at most 15 MB).
#   usage: scripts/device/capture_thirdparty.sh OUT_DIR [KERNEL...]   (carry .whl with the fa3-fwd wheel)
# KERNEL: sdpa-flash, fa3-fp8, fa3-bf16 (default: sdpa-flash, and both FA3 kernels where the wheel is
# there). Writes OUT_DIR/captures.tgz.* (experiments/thirdparty/capture.py's outputs on its set,
# generated there with the inputs' sha256 in set.json, and sfu/: the probes' reports and tables, gzip -9).
set -uo pipefail
out=${1:?usage: capture_thirdparty.sh OUT_DIR [KERNEL...]}
shift
work=/tmp/capture
mkdir -p "$out" "$work/out/sfu"
source scripts/device/deps.sh  # the carried wheels (fa3-fwd)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for probe in lg2 rcp; do
  nvcc -std=c++20 -arch=sm_90a -O3 -I. -o /tmp/sm90_${probe}_structure kernels/probes/sm90_${probe}_structure.cu &&
    /tmp/sm90_${probe}_structure "$work/out/sfu"
done
gzip -9 -f "$work"/out/sfu/*.delta 2>/dev/null
python3 experiments/thirdparty/capture.py inputs "$work/inputs" >/dev/null
cp "$work/inputs/set.json" "$work/set.json"
kernels=()
for k in "$@"; do kernels+=(--kernel "$k"); done
if [ ${#kernels[@]} -eq 0 ]; then
  kernels=(--kernel sdpa-flash)
  python3 -c "import fa3_fwd_interface" 2>/dev/null && kernels+=(--kernel fa3-fp8 --kernel fa3-bf16)
fi
PYTHONUNBUFFERED=1 python3 experiments/thirdparty/capture.py run "$work/inputs" "$work/out" "${kernels[@]}" 2>&1 | tee "$work/run.log"
cp "$work/set.json" "$work/run.log" "$work/out/"
tar -C "$work/out" -czf - . | split -b 15M - "$out/captures.tgz."
ls -la "$out" "$work/out/sfu"
