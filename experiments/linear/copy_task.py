#!/usr/bin/env python3
"""The copying task of the proposal's minimum viable experiment: a small GLA trained with its intra-chunk
forward unquantized or with INT4/INT8 scores (per-thread groups, with or without Q+K smoothing) and FP8 P V.

usage: python3 experiments/linear/copy_task.py [--variants LIST] [--steps 1000] [--copy-length 255]
                                               [--device cuda] [--out DIR] [--time-limit 480]

Model (the proposal's MVE): 2 layers, width 256, 2 heads, d_k = 64 and d_v = 128 per head (128 and
256 in all), GLA gates log alpha = logsigmoid(x W1 W2 + b) / 16, chunk 64, sub-chunk 16, an output
gate and a SwiGLU MLP per layer, about 1M parameters. Task: a sequence of `copy-length` random
tokens (16 symbols), a separator, then the same tokens again; the loss is on the copy only
(sequence length 2 * copy-length + 2 = 512 by default). Every variant starts from the same weights
and sees the same batches.

How the quantized forward is emulated (fake quantization in torch ops, fp32 arithmetic):
  - the inter-sub-chunk scores are computed as emulation/linear/gla.hpp computes them: Q~, K~ gated
    against the first row of the query sub-chunk, minus their sub-chunk means (smoothed variants),
    quantized with the per-thread groups of mma.sync m16n8 tiles (Q rows r and r + 8 of a 16-row
    block share a scale; keys 2l, 2l + 1, 2l + 8, 2l + 9 of a 16-key block share one), amax / 7
    (INT4) or / 127 (INT8), round to nearest even, saturate; their product in fp32 (exact integer
    sums up to fp32 rounding), plus qbar . gamma(K~) and Q~ . kbar (both terms: no softmax);
  - P (per row, amax / 448) and V (per channel over the chunk) are cast to float8_e4m3fn and back;
    the FP22 accumulator of the FP8 MMA is not modeled (fp32 sums): in the emulation the flush
    interval changes the intra-chunk error by less than 0.3% (results/linear/table.md, "FP8 P V");
  - gradients pass straight through every quantizer (the forward is quantized, the backward is not:
    the proposal's "INT4 forward + BF16 backward").
The diagonal sub-chunk blocks, the inter-chunk state and everything outside the GLA core are
unquantized fp32 in every variant.

Writes OUT/copy_task.csv (variant, step, train_loss, eval_loss, eval_accuracy) and OUT/summary.md
(final losses, and each variant's final eval loss against the unquantized one: the proposal's
criterion is within 5%). --time-limit stops every variant at the same step count when the budget
would be exceeded (the first variant's speed decides).
"""
import argparse
import csv
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

C, SUB = 64, 16  # chunk, sub-chunk
VARIANTS = {
    # name: (score bits or None, smoothing, FP8 P V)
    "unquantized": (None, False, False),
    "int8-smooth-fp8": (8, True, True),
    "int4-smooth-fp8": (4, True, True),
    "int4-fp8": (4, False, True),
    "int4-smooth": (4, True, False),
}


def straight_through(x, quantized):
    return x + (quantized - x).detach()


def int_fake_quant(x, scale, bits):
    top = 2 ** (bits - 1) - 1
    with torch.no_grad():  # the codes take no gradient: straight through
        q = torch.where(scale > 0, torch.round(x / torch.where(scale > 0, scale, torch.ones_like(scale))), torch.zeros_like(x))
        q = q.clamp(-top - 1, top) * scale
    return straight_through(x, q)


def q_group_scales(x, top):
    """x: (..., 16, d). Rows r and r + 8 share a scale (one thread's rows of the m16n8 accumulator)."""
    amax = x.abs().amax(-1)                                   # (..., 16)
    pair = amax.unflatten(-1, (2, 8)).amax(-2, keepdim=True)  # (..., 1, 8)
    return (pair.expand(*pair.shape[:-2], 2, 8).flatten(-2) / top).unsqueeze(-1)


def k_group_scales(x, top):
    """x: (..., 16 j, d). Keys 2l, 2l + 1, 2l + 8, 2l + 9 of each 16-key block share a scale."""
    amax = x.abs().amax(-1)                                             # (..., 16 j)
    blocks = amax.unflatten(-1, (-1, 2, 4, 2))                          # key = 16 b + 8 h + 2 l + e
    group = blocks.amax(dim=(-3, -1), keepdim=True)                     # (..., j, 1, 4, 1)
    return (group.expand_as(blocks).flatten(-4) / top).unsqueeze(-1)


def fp8_fake_quant(x, dim):
    with torch.no_grad():
        scale = x.abs().amax(dim, keepdim=True) / 448.0
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = (x / safe).to(torch.float8_e4m3fn).to(x.dtype) * scale
    return straight_through(x, q)


def gla_chunkwise(q, k, v, g, variant):
    """q, k, g: (B, H, T, dk); v: (B, H, T, dv); T a multiple of C. Returns (B, H, T, dv)."""
    bits, smooth, fp8 = VARIANTS[variant]
    B, H, T, dk = q.shape
    N = T // C
    q, k, v, g = (x.unflatten(2, (N, C)) for x in (q, k, v, g))  # (B, H, N, C, d)
    g = g.cumsum(-2)
    # Intra-chunk scores P (B, H, N, C, C).
    P = q.new_zeros(B, H, N, C, C)
    for i in range(C // SUB):
        qs, qe = i * SUB, (i + 1) * SUB
        qi, gi = q[..., qs:qe, :], g[..., qs:qe, :]
        # Diagonal block in log space; exponents above the diagonal set to -inf (0, gradient 0).
        upper = torch.ones(SUB, SUB, dtype=torch.bool, device=q.device).triu(1).unsqueeze(-1)
        log_decay = (gi.unsqueeze(-2) - gi.unsqueeze(-3)).masked_fill(upper, float("-inf"))
        diag = (qi.unsqueeze(-2) * k[..., qs:qe, :].unsqueeze(-3) * log_decay.exp()).sum(-1)
        P[..., qs:qe, qs:qe] = diag
        if i == 0:
            continue
        n = g[..., qs:qs + 1, :]
        q_t = qi * (gi - n).exp()                          # Q~ (.., 16, dk)
        k_t = k[..., :qs, :] * (n - g[..., :qs, :]).exp()  # K~ strip (.., 16 i, dk)
        if bits is None:
            S = q_t @ k_t.transpose(-1, -2)
        else:
            top = 2 ** (bits - 1) - 1
            q_mean = q_t.mean(-2, keepdim=True) if smooth else torch.zeros_like(q_t[..., :1, :])
            k_blocks = k_t.unflatten(-2, (i, SUB))
            k_mean = k_blocks.mean(-2, keepdim=True) if smooth else torch.zeros_like(k_blocks[..., :1, :])
            q_res, k_res = q_t - q_mean, (k_blocks - k_mean).flatten(-3, -2)
            q_hat = int_fake_quant(q_res, q_group_scales(q_res.detach(), top), bits)
            k_hat = int_fake_quant(k_res, k_group_scales(k_res.detach(), top), bits)
            S = q_hat @ k_hat.transpose(-1, -2)
            if smooth:  # + qbar . gamma(K~_s) + Q~_t . kbar_j
                S = S + q_mean @ k_res.transpose(-1, -2) + (q_t @ k_mean.squeeze(-2).transpose(-1, -2)).repeat_interleave(SUB, -1)
        P[..., qs:qe, :qs] = S
    if fp8:
        o_intra = fp8_fake_quant(P, -1) @ fp8_fake_quant(v, -2)
    else:
        o_intra = P @ v
    # Inter-chunk: the state before each chunk.
    state = q.new_zeros(B, H, dk, v.shape[-1])
    outputs = []
    for c in range(N):
        gc = g[:, :, c]
        outputs.append((q[:, :, c] * gc.exp()) @ state + o_intra[:, :, c])
        last = gc[..., -1:, :]
        state = last.transpose(-1, -2).exp() * state + (k[:, :, c] * (last - gc).exp()).transpose(-1, -2) @ v[:, :, c]
    return torch.stack(outputs, 2).flatten(2, 3)


class GlaLayer(nn.Module):
    def __init__(self, d, heads, dk, dv, gate_rank=16):
        super().__init__()
        self.h, self.dk, self.dv = heads, dk, dv
        self.q, self.k = nn.Linear(d, heads * dk, bias=False), nn.Linear(d, heads * dk, bias=False)
        self.v, self.r = nn.Linear(d, heads * dv, bias=False), nn.Linear(d, heads * dv, bias=False)
        self.g = nn.Sequential(nn.Linear(d, gate_rank, bias=False), nn.Linear(gate_rank, heads * dk))
        self.o = nn.Linear(heads * dv, d, bias=False)
        self.norm = nn.RMSNorm(dv)

    def forward(self, x, variant):
        B, T, _ = x.shape
        split = lambda t, d: t.view(B, T, self.h, d).transpose(1, 2)
        q = split(self.q(x), self.dk) * self.dk ** -0.5
        k, v = split(self.k(x), self.dk), split(self.v(x), self.dv)
        g = split(F.logsigmoid(self.g(x)) / 16, self.dk)
        o = self.norm(gla_chunkwise(q, k, v, g, variant)).transpose(1, 2).reshape(B, T, -1)
        return self.o(F.silu(self.r(x)) * o)


class Model(nn.Module):
    def __init__(self, vocab, d=256, layers=2, heads=2, dk=64, dv=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({
                "n1": nn.RMSNorm(d), "gla": GlaLayer(d, heads, dk, dv), "n2": nn.RMSNorm(d),
                "up": nn.Linear(d, 2 * d, bias=False), "gate": nn.Linear(d, 2 * d, bias=False),
                "down": nn.Linear(2 * d, d, bias=False)}))
        self.norm, self.head = nn.RMSNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, tokens, variant):
        x = self.embed(tokens)
        for b in self.blocks:
            x = x + b["gla"](b["n1"](x), variant)
            h = b["n2"](x)
            x = x + b["down"](F.silu(b["gate"](h)) * b["up"](h))
        return self.head(self.norm(x))


def batch(generator, size, length, symbols, device):
    """[x, SEP, x, PAD...] padded to a multiple of the chunk; targets: the copy."""
    sep, pad = symbols, symbols + 1
    x = torch.randint(0, symbols, (size, length), generator=generator)
    seq = torch.cat([x, torch.full((size, 1), sep), x], 1)
    total = math.ceil((seq.shape[1] + 1) / C) * C
    tokens = torch.full((size, total), pad)
    tokens[:, :seq.shape[1]] = seq
    targets = torch.full((size, total), -100)
    targets[:, length:2 * length] = x  # position length (the separator) predicts x_1, ...
    return tokens.to(device), targets.to(device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="unquantized,int8-smooth-fp8,int4-smooth-fp8,int4-fp8")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--copy-length", type=int, default=255)
    parser.add_argument("--symbols", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--time-limit", type=float, default=480, help="seconds for all variants together")
    parser.add_argument("--out", default="build/results/linear-copy")
    args = parser.parse_args()
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            parser.error(f"unknown variant {v!r} (known: {', '.join(VARIANTS)})")
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    init = Model(args.symbols + 2).state_dict()
    params = sum(t.numel() for t in init.values())
    eval_gen = torch.Generator().manual_seed(10_000 + args.seed)
    eval_set = [batch(eval_gen, args.batch, args.copy_length, args.symbols, args.device) for _ in range(4)]
    rows, final, steps = [], {}, args.steps
    # Rows are written as they come, so that a run cut short keeps what it measured.
    log = open(os.path.join(args.out, "copy_task.csv"), "w", newline="")
    writer = csv.writer(log)
    writer.writerow(["variant", "step", "train_loss", "eval_loss", "eval_accuracy"])
    start = time.time()
    print(f"{params:,} parameters; device {args.device}; sequence {eval_set[0][0].shape[1]} tokens")
    for n, variant in enumerate(variants):
        model = Model(args.symbols + 2).to(args.device)
        model.load_state_dict(init)
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        gen = torch.Generator().manual_seed(args.seed)
        for step in range(1, steps + 1):
            tokens, targets = batch(gen, args.batch, args.copy_length, args.symbols, args.device)
            loss = F.cross_entropy(model(tokens, variant).flatten(0, 1), targets.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            # The first variant's speed over steps 11-30 (after the warm-up) fixes every variant's step count.
            if n == 0 and step in (10, 30) and args.device.startswith("cuda"):
                torch.cuda.synchronize()
            if n == 0 and step == 10:
                t0 = time.time()
            if n == 0 and step == 30:
                per_step = (time.time() - t0) / 20
                steps = min(steps, max(30, int(args.time_limit / len(variants) / per_step)))
                print(f"{per_step * 1e3:.1f} ms per step: {steps} steps per variant")
            if step % args.eval_every == 0 or step == steps:
                with torch.no_grad():
                    losses, correct, count = [], 0, 0
                    for tok, tgt in eval_set:
                        logits = model(tok, variant)
                        losses.append(F.cross_entropy(logits.flatten(0, 1), tgt.flatten()).item())
                        mask = tgt != -100
                        correct += (logits.argmax(-1)[mask] == tgt[mask]).sum().item()
                        count += mask.sum().item()
                rows.append((variant, step, loss.item(), sum(losses) / len(losses), correct / count))
                writer.writerow(rows[-1])
                log.flush()
                print(f"{variant:>18} step {step:5d} train {loss.item():.4f} eval {rows[-1][3]:.4f} "
                      f"accuracy {rows[-1][4]:.3f} ({time.time() - start:.0f} s)")
            if step == steps:
                break
        final[variant] = rows[-1]
    log.close()
    base = final.get("unquantized")
    lines = [f"# Copying task ({params:,} parameters, {steps} steps, batch {args.batch}, copy length "
             f"{args.copy_length}, {args.device})", "",
             "| variant | final eval loss | eval accuracy | eval loss vs unquantized |", "|---|---|---|---|"]
    for v, r in final.items():
        rel = f"{(r[3] - base[3]) / base[3]:+.1%}" if base else "n/a"
        lines.append(f"| {v} | {r[3]:.4f} | {r[4]:.3f} | {rel} |")
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
