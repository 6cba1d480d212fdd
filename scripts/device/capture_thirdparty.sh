#!/usr/bin/env bash
# On the GPU machine (device tool), one call: the third-party kernels' captures and the MUFU.LG2
# probe, packed under OUT_DIR (at most 8 files come back: tarballs of at most 15 MB).
#   usage: scripts/device/capture_thirdparty.sh OUT_DIR   (carry .whl with the fa3-fwd wheel)
# Writes OUT_DIR/captures.tgz.* (experiments/thirdparty/capture.py's outputs for sdpa-flash, fa3-fp8,
# fa3-bf16 on its set, generated there with the inputs' sha256 in set.json) and OUT_DIR/lg2/.
set -uo pipefail
out=${1:?usage: capture_thirdparty.sh OUT_DIR}
mkdir -p "$out/lg2"
if ls .whl/fa3_fwd-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
nvcc -std=c++20 -arch=sm_90a -O3 -o /tmp/sm90_lg2_structure kernels/probes/sm90_lg2_structure.cu &&
  /tmp/sm90_lg2_structure "$out/lg2" && gzip -9 -f "$out/lg2/sm90_lg2_mantissa.delta" 2>/dev/null
work=/tmp/capture
python3 experiments/thirdparty/capture.py inputs "$work/inputs" >/dev/null
cp "$work/inputs/set.json" "$work/set.json"
kernels=(--kernel sdpa-flash)
python3 -c "import fa3_fwd_interface" 2>/dev/null && kernels+=(--kernel fa3-fp8 --kernel fa3-bf16)
PYTHONUNBUFFERED=1 python3 experiments/thirdparty/capture.py run "$work/inputs" "$work/out" "${kernels[@]}" 2>&1 | tee "$work/run.log"
cp "$work/set.json" "$work/run.log" "$work/out/"
tar -C "$work/out" -czf - . | split -b 15M - "$out/captures.tgz."
ls -la "$out" "$out/lg2"
