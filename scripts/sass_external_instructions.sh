#!/usr/bin/env bash
# Which SASS tensor-core instructions nvcc makes of the instructions behind Khattak & Mikaitis'
# tiles, per architecture: compiles scripts/sass_external_instructions.cu to a cubin for each and
# counts the MMA, unpack (F2FP) and add (FADD, HADD2) opcodes of every kernel.
#   usage: scripts/sass_external_instructions.sh > verification/vectors/external/sass.txt
# Needs nvcc and nvdisasm (the CUDA toolkit's, or PyPI's nvidia-cuda-nvdisasm: NVDISASM=path).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nvdisasm=${NVDISASM:-nvdisasm}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# $(nvcc --version | tail -1); $("$nvdisasm" --version | tail -1)"
for arch in sm_80 sm_86 sm_89 sm_90 sm_100 sm_100a; do
  nvcc -std=c++17 -cubin -arch="$arch" -o "$work/$arch.cubin" "$here/sass_external_instructions.cu"
  echo "== $arch"
  "$nvdisasm" "$work/$arch.cubin" | awk '
    /^\s*\.text\.[A-Za-z0-9_]+:/ { kernel = $1; sub(/^\.text\./, "", kernel); sub(/:$/, "", kernel); next }
    kernel != "" { if (match($0, /(HMMA|QMMA|IMMA|F2FP|FADD|HADD2)[A-Z0-9._]*/)) count[kernel " " substr($0, RSTART, RLENGTH)]++ }
    END { for (k in count) print k, count[k] }' | sort
done
