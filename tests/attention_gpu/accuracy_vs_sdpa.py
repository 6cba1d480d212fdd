#!/usr/bin/env python3
"""Accuracy of the sage2-8b kernel beside PyTorch SDPA, on the same inputs.

For every folder check_sage2_gpu wrote under <dir>/accuracy/<config>/ (q, k, v and the kernel's
output out_gpu as float32 .npy, [batch, heads, tokens, dim], and config.json): the reference is
PyTorch SDPA in float32 (math backend, TF32 off) on the fp16/bf16 inputs; beside the kernel, SDPA
in the inputs' own format (fp16/bf16, flash backend where it runs) is measured against the same
reference, and FlashAttention-3 (PyPI fa3-fwd, where it is installed) in FP8 and BF16: FP8 on E4M3
operands with one descale per (batch, KV head), as experiments/thirdparty/capture.py gives it them. Metrics as the SageAttention papers define them: cosine similarity and relative L1
(sum|r - a| / sum|r|) over the whole tensor. Writes <dir>/accuracy.json and prints a table.

Needs torch and numpy (the GPU machine has both).
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "experiments" / "thirdparty"))
import capture  # noqa: E402  (FlashAttention-3's runs, as the captures make them)

try:
    import fa3_fwd_interface  # noqa: F401
    HAVE_FA3 = True
except ImportError:
    HAVE_FA3 = False


def metrics(ref: torch.Tensor, approx: torch.Tensor) -> dict:
    r, a = ref.double().flatten(), approx.double().flatten()
    cosine = float((r * a).sum() / torch.sqrt((r * r).sum() * (a * a).sum()))
    rel_l1 = float((r - a).abs().sum() / r.abs().sum())
    return {"cosine": cosine, "relative_l1": rel_l1, "max_abs": float((r - a).abs().max())}


def sdpa(q, k, v, causal, backend):
    if k.shape[1] != q.shape[1]:  # GQA: repeat each KV head over its group of Q heads
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    with sdpa_kernel(backend):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", help="check_sage2_gpu's --out folder")
    args = parser.parse_args()
    root = pathlib.Path(args.dir)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []
    for folder in sorted((root / "accuracy").iterdir()):
        config = json.loads((folder / "config.json").read_text())
        load = lambda name: torch.from_numpy(np.load(folder / f"{name}.npy")).cuda()
        q, k, v, out = load("q"), load("k"), load("v"), load("out_gpu")
        causal = config["causal"]
        reference = sdpa(q, k, v, causal, SDPBackend.MATH)
        low = torch.float16 if config["dtype"] == "fp16" else torch.bfloat16
        try:
            native = sdpa(q.to(low), k.to(low), v.to(low), causal, SDPBackend.FLASH_ATTENTION)
            native_backend = "flash"
        except RuntimeError:
            native = sdpa(q.to(low), k.to(low), v.to(low), causal, SDPBackend.MATH)
            native_backend = "math"
        native_key = f"sdpa_{config['dtype']}_{native_backend}"
        row = {
            "config": config["name"],
            "d": config["d"], "causal": causal, "n": config["n"], "heads_q": config["heads_q"],
            "heads_kv": config["heads_kv"], "dtype": config["dtype"], "data": config["data"],
            "reference": "torch SDPA float32 (math backend, TF32 off) on the same inputs",
            "lowbit_sage2_8b": metrics(reference, out),
            native_key: metrics(reference, native.float()),
        }
        if HAVE_FA3:
            arrays = [t.cpu().numpy() for t in (q, k, v)]
            for key, fp8 in (("fa3_fp8", True), ("fa3_bf16", False)):
                fa3_out = capture.run_fa3(torch, *arrays, causal, config["dtype"], fp8)[0]
                row[key] = metrics(reference, torch.from_numpy(fa3_out).cuda())
        rows.append(row)
        line = f"{config['name']:<52}"
        for key in ("lowbit_sage2_8b", native_key, "fa3_fp8", "fa3_bf16"):
            if key in row:
                line += f" | {key} cos {row[key]['cosine']:.6f} L1 {row[key]['relative_l1']:.5f}"
        print(line)
    doc = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "configurations": rows}
    (root / "accuracy.json").write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
