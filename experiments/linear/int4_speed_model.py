#!/usr/bin/env python3
"""INT4 speed of the intra-chunk GLA computation, modeled on paper (issue 14).

usage: experiments/linear/int4_speed_model.py [--measured GPU_CSV] [--chunk 64] [--sub-chunk 16]

Counts the work of one chunk as the kernel of kernels/linear/gla_intra.cu issues it (tensor-core
multiply-adds of the inter-sub-chunk scores and of P V; fp32 operations of the gating, the diagonal
blocks, the quantization and the smoothing corrections) and divides it by published peak rates:

  H100 SXM (dense): bf16 989.4 TFLOPS, FP8 and INT8 1978.9, fp32 66.9 (NVIDIA's H100 figures as
    listed at glennklockwood.com/garden/processors/h100), HBM 3.35 TB/s; no INT4 tensor cores:
    mma.sync s4 runs as a called routine on IMMA s8, 12-20x slower than s8 (our H200 measurement,
    shared/notes/hopper-numerics-facts.md).
  RTX 4090 (Ada, dense, GeForce): bf16 with fp32 accumulation 165.2 TFLOPS, FP8 with fp32
    accumulation 330.3, INT8 660.6 TOPS, INT4 1321.2 TOPS, fp32 82.6, GDDR6X 1.008 TB/s (the Ada
    whitepaper's table as listed at waredb.com/processor/nvidia-geforce-rtx-4090).
Memory: each chunk reads Q, K, V in bf16 and the log gates in fp32, and writes its output in bf16,
whatever the variant: the gate factors of Q~ and K~ depend on the sub-chunk pair, so Q and K can
only be quantized inside the kernel, after gating (no INT4 copies in HBM to read).

Two bounds per variant: "serial" adds the tensor-core, fp32 and memory times (no overlap),
"overlap" takes their maximum (perfect overlap). With --measured (check_linear_gpu's gpu.csv, gpu.json beside it)
it also adds, to the measured time of the int8-smooth-fp8 kernel, the extra pure MMA time that INT4
scores would take on Hopper at peak rate (a lower bound on the INT4 kernel's time), and subtracts half
the pure INT8 score MMA time at peak, for INT4 tensor cores at twice the INT8 rate (Ada's ratio: the
most such MMAs could save).
"""
import argparse
import csv
import json
import os
import sys

TERA = 1e12
# Multiply-adds per second (a FLOP rate / 2) and fp32 operations per second (an FMA counts once).
RATES = {
    "H100": {"bf16": 989.4 * TERA / 2, "fp8": 1978.9 * TERA / 2, "int8": 1978.9 * TERA / 2,
             "int4": (1978.9 * TERA / 2 / 20, 1978.9 * TERA / 2 / 12), "fp32": 66.9 * TERA / 2, "bytes": 3.35 * TERA},
    "RTX 4090": {"bf16": 165.2 * TERA / 2, "fp8": 330.3 * TERA / 2, "int8": 660.6 * TERA / 2,
                 "int4": (1321.2 * TERA / 2, 1321.2 * TERA / 2), "fp32": 82.6 * TERA / 2, "bytes": 1.008 * TERA},
}
# fp32 operations per gate factor exp2(to - from) times x: the kernel's poly_exp2 of degree 5 (round 2,
# reduce 1, 5 fma, exponent add) plus the difference and the product; --exp-ops 4 models MUFU.EX2
# (ex2.approx, a separate pipe at 1/8 of the fma rate) as fla's kernels use it.
EXP2_OPS = 11


def work(C, c, dk, dv, exp_ops=EXP2_OPS):
    """Per chunk: tensor multiply-adds and fp32 operations of each part."""
    n = C // c
    pairs = n * (n - 1) // 2
    w = {
        "qk_macs": pairs * c * c * dk,                       # inter-sub-chunk score blocks
        "pv_macs": C * C * dv,                               # P V over the whole chunk
        "gating_ops": (n * c * dk + pairs * c * dk) * exp_ops,  # Q~ per sub-chunk, K~ per (i, j) pair
        "diagonal_ops": n * c * (c + 1) // 2 * dk * (exp_ops + 1),
        # smoothing and quantization of Q~ (once per i) and K~ (per pair): mean, subtract, amax,
        # divide, round; the two correction dot products per score row/column; the dequantization
        "quant_ops": (n * c * dk + pairs * c * dk) * 10 + 2 * pairs * c * dk + pairs * c * c * 3,
        "p_ops": C * C * 6, "v_ops": C * dv * 6,             # FP8 scales and codes of P and V
        "bytes": C * dk * (2 + 2 + 4) + C * dv * (2 + 2),    # Q, K bf16; gates fp32; V in, output out bf16
    }
    return w


def time(w, rates, qk, pv, int4_rate_index=0):
    r_qk = rates[qk] if qk != "int4" else rates["int4"][int4_rate_index]
    tensor = w["qk_macs"] / r_qk + w["pv_macs"] / rates[pv]
    ops = w["gating_ops"] + w["diagonal_ops"]
    if qk != "bf16":
        ops += w["quant_ops"]
    if pv == "fp8":
        ops += w["p_ops"] + w["v_ops"]
    cuda = ops / rates["fp32"]
    memory = w["bytes"] / rates["bytes"]
    return tensor + cuda + memory, max(tensor, cuda, memory), tensor, cuda, memory


VARIANTS = [("bf16", "bf16", "bf16"), ("int8-smooth-fp8", "int8", "fp8"), ("int4-smooth-fp8 (the proposal)", "int4", "fp8"),
            ("bf16-fp8", "bf16", "fp8"), ("int4-smooth (bf16 P V)", "int4", "bf16")]


def paper(C, c, shapes, exp_ops):
    print(f"## On paper: one chunk of C = {C}, sub-chunk c = {c}\n")
    for dk, dv in shapes:
        w = work(C, c, dk, dv, exp_ops)
        print(f"### d_k = {dk}, d_v = {dv}: score MACs {w['qk_macs']:,}, P V MACs {w['pv_macs']:,} "
              f"(scores are {w['qk_macs'] / (w['qk_macs'] + w['pv_macs']):.0%} of the tensor work); fp32 operations: "
              f"gating {w['gating_ops']:,}, diagonal {w['diagonal_ops']:,}, quantization {w['quant_ops']:,}\n")
        print("| GPU | variant | tensor-core time (ns) | fp32 time (ns) | memory time (ns) | speed vs bf16, serial | "
              "speed vs bf16, overlap |")
        print("|---|---|---|---|---|---|---|")
        for gpu, rates in RATES.items():
            base = time(w, rates, "bf16", "bf16")
            for name, qk, pv in VARIANTS:
                slow, fast = time(w, rates, qk, pv, 0), time(w, rates, qk, pv, 1)
                speed = lambda b, t: b / t
                if qk == "int4" and rates["int4"][0] != rates["int4"][1]:
                    serial = f"{speed(base[0], slow[0]):.2f}x .. {speed(base[0], fast[0]):.2f}x"
                    overlap = f"{speed(base[1], slow[1]):.2f}x .. {speed(base[1], fast[1]):.2f}x"
                    tensor = f"{fast[2] * 1e9:.1f} .. {slow[2] * 1e9:.1f}"
                else:
                    serial, overlap, tensor = f"{speed(base[0], fast[0]):.2f}x", f"{speed(base[1], fast[1]):.2f}x", f"{fast[2] * 1e9:.1f}"
                print(f"| {gpu} | {name} | {tensor} | {fast[3] * 1e9:.1f} | {fast[4] * 1e9:.1f} | {serial} | {overlap} |")
        print()


def measured(path, C, c):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    meta_path = os.path.join(os.path.dirname(path), "gpu.json")
    with open(meta_path) as f:
        meta = json.load(f)
    chunks = meta["heads"] * meta["tokens"] // C
    gpu = meta["provenance"].get("gpu", "?")
    print(f"## From the measured kernels ({gpu}, {meta['heads']} heads x {meta['tokens']} tokens = {chunks} chunks)\n")
    print("INT4 scores on Hopper add at least the pure MMA time of s4 over s8 at peak rate (s4 12-20x slower than s8);\n"
          "with INT4 tensor cores at twice the INT8 rate (Ada's ratio), the scores' MMA time at peak would at most halve.\n"
          "Score MMA share: the inter-sub-chunk MACs at H100's INT8 peak over the measured int8-smooth-fp8 time.\n")
    print("| d_k x d_v | bf16 ms | int8-smooth ms | bf16-fp8 ms | int8-smooth-fp8 ms (speed vs bf16) | score MMA share | "
          "int4-smooth-fp8 on Hopper, modeled ms (speed vs bf16) | int4-smooth-fp8 with INT4 at 2x INT8, modeled ms "
          "(speed vs bf16) |")
    print("|---|---|---|---|---|---|---|---|")
    shapes = sorted({(int(r["dk"]), int(r["dv"])) for r in rows})
    h100 = RATES["H100"]
    for dk, dv in shapes:
        t = {r["kernel"]: float(r["ms"]) for r in rows if int(r["dk"]) == dk and int(r["dv"]) == dv}
        if not all(k in t for k in ("bf16", "int8-smooth", "bf16-fp8", "int8-smooth-fp8")):
            continue
        qk = work(C, c, dk, dv)["qk_macs"] * chunks
        extra = [qk * (1 / h100["int4"][i] - 1 / h100["int8"]) * 1e3 for i in (1, 0)]  # ms: 12x, 20x
        i4 = [t["int8-smooth-fp8"] + e for e in extra]
        int8_mma = qk / h100["int8"] * 1e3  # ms
        ada_like = t["int8-smooth-fp8"] - int8_mma / 2
        print(f"| {dk}x{dv} | {t['bf16']:.4f} | {t['int8-smooth']:.4f} | {t['bf16-fp8']:.4f} | "
              f"{t['int8-smooth-fp8']:.4f} ({t['bf16'] / t['int8-smooth-fp8']:.2f}x) | "
              f"{int8_mma / t['int8-smooth-fp8']:.2%} | "
              f"{i4[0]:.4f} .. {i4[1]:.4f} ({t['bf16'] / i4[0]:.2f}x .. {t['bf16'] / i4[1]:.2f}x) | "
              f"{ada_like:.4f} ({t['bf16'] / ada_like:.2f}x) |")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measured", help="check_linear_gpu's gpu.csv (gpu.json beside it)")
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--sub-chunk", type=int, default=16)
    parser.add_argument("--exp-ops", type=int, default=EXP2_OPS, help="fp32 operations per gate factor (default: the kernel's)")
    args = parser.parse_args()
    if args.chunk % args.sub_chunk:
        sys.exit(f"--chunk {args.chunk} is not a multiple of --sub-chunk {args.sub_chunk}")
    print(f"fp32 operations per gate factor: {args.exp_ops}\n")
    paper(args.chunk, args.sub_chunk, [(64, 64), (128, 128), (128, 256)], args.exp_ops)
    if args.chunk != 128:
        print("The proposal's shape (C = 128, d_k = 128, d_v = 256):\n")
        paper(128, args.sub_chunk, [(128, 256)], args.exp_ops)
    if args.measured:
        if not os.path.exists(args.measured):
            sys.exit(f"{args.measured}: not found")
        measured(args.measured, args.chunk, args.sub_chunk)


if __name__ == "__main__":
    main()
