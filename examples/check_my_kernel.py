#!/usr/bin/env python3
"""Check an attention kernel against the lowbit preset that describes it.

The kernel here is PyTorch's flash attention in float16 on a CUDA GPU (aten's
_scaled_dot_product_flash_attention, which also returns the LSE), described bit for bit by the
preset sdpa-flash-fp16: expect 0 codes and 0 LSE values to differ. Without a GPU it is PyTorch's
SDPA on the CPU (not a flash kernel), compared with the preset fa2-fp16, and without torch a float32
NumPy attention rounded to fp16, compared with the preset fp32: those two follow no preset, so
expect a few codes one ulp apart. lowbit.attention runs the preset on the same inputs, keeping every
stage, and lowbit.compare counts the output codes (and LSE values) that differ, how far in ulps,
and where the first one is.

    python examples/check_my_kernel.py --heads 4 --tokens 512 --dim 64 --causal

To check your own kernel, replace `kernel` with it and pick the preset that describes it
(lowbit.presets(); change stages with stages={...}).
"""

import argparse

import numpy as np

import lowbit

try:
    import torch
except ImportError:
    torch = None


def kernel(q, k, v, causal):
    """The kernel under test: (output as float16 numpy, its LSE or None, the preset that describes it, what ran)."""
    if torch is not None and torch.cuda.is_available():
        t = [torch.from_numpy(x).cuda()[None] for x in (q, k, v)]
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention(*t, 0.0, causal, False)[:2]
        return (o[0].cpu().numpy(), lse[0].cpu().numpy(), "sdpa-flash-fp16",
                f"torch {torch.__version__} flash attention float16 on {torch.cuda.get_device_name()}")
    if torch is not None:
        t = [torch.from_numpy(x) for x in (q, k, v)]
        o = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal)
        return o.numpy(), None, "fa2-fp16", f"torch {torch.__version__} SDPA float16 on the CPU"
    s = q.astype(np.float32) @ k.astype(np.float32).transpose(0, 2, 1) / np.float32(np.sqrt(q.shape[-1]))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    o = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)
    return o.astype(np.float16), None, "fp32", "NumPy float32 attention rounded to float16 (torch is not installed)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    q, k, v = (rng.standard_normal((args.heads, args.tokens, args.dim)).astype(np.float16) for _ in range(3))
    out, lse, preset, what = kernel(q, k, v, args.causal)
    emulated = lowbit.attention(q, k, v, preset=preset, causal=args.causal)
    report = lowbit.compare(out, emulated, lse)
    a, b = out.astype(np.float64).ravel(), emulated["output"].astype(np.float64).ravel()
    cosine = a @ b / np.sqrt((a @ a) * (b @ b))
    print(f"kernel: {what}")
    print(f"preset: {preset} ({emulated['follows']})")
    print(f"output codes that differ: {report['differ']} of {report['compared']}; by ulps {report['ulps']}; "
          f"cosine {cosine:.9f}")
    if lse is not None:
        print(f"LSE values that differ: {report['lse_differ']} of {report['lse_compared']}")
    if report["first"]:
        print(f"first difference: {report['first']}")


if __name__ == "__main__":
    main()
