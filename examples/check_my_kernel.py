#!/usr/bin/env python3
"""Check an attention kernel against the lowbit preset that describes it.

The kernel here is PyTorch's scaled_dot_product_attention in float16 (on the GPU where there is
one, else the CPU), described by the preset fa2-fp16 (FlashAttention-2: fp16 Q K^T and P V with
fp32 accumulation, the output rounded to fp16); without torch, a float32 NumPy attention rounded
to fp16, described by the preset fp32. lowbit.attention runs the preset on the same inputs,
keeping every stage; the script counts the output codes that differ and how far (in fp16 ulps),
and prints the cosine similarity of the two outputs. A kernel that follows its preset exactly
differs in no code; SDPA is not written to follow one, so expect a few codes one ulp apart.

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
    """The kernel under test: (output as float16 numpy, the preset that describes it, what ran)."""
    if torch is not None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        t = [torch.from_numpy(x).to(device) for x in (q, k, v)]
        o = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal)
        return o.cpu().numpy(), "fa2-fp16", f"torch {torch.__version__} SDPA float16 on {device}"
    s = q.astype(np.float32) @ k.astype(np.float32).transpose(0, 2, 1) / np.float32(np.sqrt(q.shape[-1]))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    o = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)
    return o.astype(np.float16), "fp32", "NumPy float32 attention rounded to float16 (torch is not installed)"


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
    out, preset, what = kernel(q, k, v, args.causal)
    emulated = lowbit.attention(q, k, v, preset=preset, causal=args.causal)

    mine = out.view(np.uint16).astype(np.int64)
    theirs = emulated["output_codes"].astype(np.int64)
    # fp16 codes as a monotone integer line (negative values mirrored), so that a difference is in ulps
    line = lambda c: np.where(c & 0x8000, -(c & 0x7FFF), c)
    ulps = np.abs(line(mine) - line(theirs))
    a, b = out.astype(np.float64).ravel(), emulated["output"].astype(np.float64).ravel()
    cosine = a @ b / np.sqrt((a @ a) * (b @ b))
    print(f"kernel: {what}")
    print(f"preset: {preset} ({emulated['follows']})")
    print(f"output codes that differ: {int((ulps != 0).sum())} of {ulps.size}; largest difference {int(ulps.max())} "
          f"fp16 ulp(s); cosine {cosine:.9f}")
    if (ulps != 0).any():
        i = np.unravel_index(int(np.argmax(ulps)), ulps.shape)
        print(f"largest at [head, token, channel] = {list(map(int, i))}: kernel {float(out[i])!r}, preset "
              f"{float(emulated['output'][i])!r} (LSE of that row: {float(emulated['lse'][i[:2]])!r})")


if __name__ == "__main__":
    main()
