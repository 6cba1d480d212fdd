#!/usr/bin/env python3
"""bench_attention on the GPU, with PyTorch SDPA measured in the same run.

Runs the bench_attention binary (lowbit: the kernel on pre-quantized inputs; lowbit_e2e: from fp16,
quantization included; lowbit_ex2, lowbit_ex2_e2e: the same with MUFU.EX2 as the exp2; with --schedule overlapped
also the kernel's overlapped schedule, rows lowbit..._overlapped), then times PyTorch SDPA with the flash backend (sdpa_flash,
FlashAttention-2) and the cuDNN backend (sdpa_cudnn) on fp16 inputs of the same shapes: batch 4,
32 heads, N = 1K .. 32K, d = 64 and 128, causal and not; and, where the PyPI wheel fa3-fwd is
installed, FlashAttention-3's forward in FP8 (fa3_fp8: E4M3 inputs with descales, as it takes them)
and BF16 (fa3_bf16), in its own [batch, tokens, heads, dim] layout. TOPS = 4 B H N^2 d / time, halved for
causal; median of --repeats timed runs (CUDA events around each) after --warmup runs. Writes
<out>/<gpu>.csv (gpu,kernel,d,causal,n,tops), <out>/<gpu>.provenance.json and prints a table.

By default the binary times every shape first, then the others follow shape by shape. At its power
cap a GPU's clock, and so a timing, depends on what ran just before (the same kernel 8-14% apart
in two positions of one process: results/bench_attention/fa3/README.md); --interleave runs the
binary once per shape, right before the others time that shape (--others-first: right after), so
that the kernels compared share their history.
"""
import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_ms(run, warmup, repeats):
    """The benchmark's method: CUDA events around each run, the median of `repeats` after `warmup` runs."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def write_tops_csv(out, gpu, rows):
    """<out>/<gpu slug>.csv with columns gpu,kernel,d,causal,n,tops; returns the slug and the path."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", gpu).strip("-").lower()
    csv = out / f"{slug}.csv"
    with csv.open("w") as f:
        f.write("gpu,kernel,d,causal,n,tops\n")
        for kernel, d, causal, n, tops in rows:
            f.write(f"{gpu},{kernel},{d},{int(causal)},{n},{tops:.1f}\n")
    return slug, csv


def time_sdpa(backend, b, h, n, d, causal, warmup, repeats):
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    with sdpa_kernel(backend):
        return time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal),
                       warmup, repeats)


def time_fa3(fp8, b, h, n, d, causal, warmup, repeats):
    import fa3_fwd_interface as fa3

    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if not fp8:
        return time_ms(lambda: fa3.flash_attn_func(q, k, v, causal=causal), warmup, repeats)
    q, k, v = (t.to(torch.float8_e4m3fn) for t in (q, k, v))
    descale = torch.ones(b, h, device="cuda", dtype=torch.float32)
    return time_ms(lambda: fa3.flash_attn_func(q, k, v, causal=causal, q_descale=descale, k_descale=descale,
                                               v_descale=descale), warmup, repeats)


def fa3_version():
    import importlib.metadata

    try:
        return "fa3-fwd " + importlib.metadata.version("fa3-fwd")
    except importlib.metadata.PackageNotFoundError:
        return None


def have_fa3():
    try:
        import fa3_fwd_interface  # noqa: F401
        return True
    except ImportError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True, help="the bench_attention executable")
    parser.add_argument("--out", default="build/results/bench_attention")
    parser.add_argument("--tokens", default="1024,2048,4096,8192,16384,32768")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--exp2", default="poly5,sm90-ex2", help="the kernels' exp2 units (bench_attention --exp2)")
    parser.add_argument("--schedule", default="serial",
                        help="the attention kernel's schedules (bench_attention --schedule): serial, overlapped")
    parser.add_argument("--interleave", action="store_true",
                        help="run the binary once per shape, right before the other kernels time that shape")
    parser.add_argument("--others-first", action="store_true",
                        help="with --interleave: the binary right after the other kernels time each shape")
    args = parser.parse_args()
    if args.others_first and not args.interleave:
        parser.error("--others-first orders the kernels of each shape: it needs --interleave")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lowbit_json = out / "lowbit.json"

    def run_binary(dims, causal, tokens):
        """The binary's measurements of these shapes (its --dims, --causal, --tokens lists)."""
        subprocess.run([args.binary, "--batch", str(args.batch), "--heads", str(args.heads), "--tokens", tokens,
                        "--dims", dims, "--causal", causal, "--warmup", str(args.warmup), "--repeats",
                        str(args.repeats), "--exp2", args.exp2, "--schedule", args.schedule, "--json", str(lowbit_json)],
                       check=True)
        return json.loads(lowbit_json.read_text())

    lowbit = None if args.interleave else run_binary(args.dims, "no,yes", args.tokens)
    measurements = [] if args.interleave else lowbit["measurements"]

    def run_binary_on_shape(d, causal, n):  # --interleave: one shape's run of the binary
        nonlocal lowbit
        lowbit = run_binary(str(d), "yes" if causal else "no", str(n))
        measurements.extend(lowbit["measurements"])

    gpu = torch.cuda.get_device_name()
    others = [("sdpa_flash", lambda *a: time_sdpa(SDPBackend.FLASH_ATTENTION, *a)),
              ("sdpa_cudnn", lambda *a: time_sdpa(SDPBackend.CUDNN_ATTENTION, *a))]
    if have_fa3():
        others += [("fa3_fp8", lambda *a: time_fa3(True, *a)), ("fa3_bf16", lambda *a: time_fa3(False, *a))]
    rows = []
    for d in map(int, args.dims.split(",")):
        for causal in (False, True):
            for n in map(int, args.tokens.split(",")):
                ops = 4.0 * args.batch * args.heads * n * n * d / (2 if causal else 1)
                if args.interleave and not args.others_first:
                    run_binary_on_shape(d, causal, n)
                for name, timed in others:
                    try:
                        ms = timed(args.batch, args.heads, n, d, causal, args.warmup, args.repeats)
                        rows.append((name, d, causal, n, ops / (ms * 1e-3) / 1e12))
                    except RuntimeError as e:
                        print(f"{name} d={d} causal={causal} n={n}: not run ({str(e).splitlines()[0]})")
                    torch.cuda.empty_cache()
                if args.others_first:
                    run_binary_on_shape(d, causal, n)
    if args.interleave:  # every shape's measurements in one record, as without --interleave
        lowbit_json.write_text(json.dumps({**lowbit, "measurements": measurements}, indent=2) + "\n")
    rows = [(m["kernel"], m["d"], m["causal"], m["n"], m["tops"]) for m in measurements] + rows
    slug, csv = write_tops_csv(out, gpu, rows)
    provenance = {"lowbit": lowbit["provenance"], "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                  "fa3": fa3_version(),
                  "method": lowbit["method"] + "; SDPA (and FlashAttention-3) timed the same way with torch.cuda.Event "
                                               "in the same run"
                            + (f"; interleaved: the binary run once per shape, right {'after' if args.others_first else 'before'} "
                               "the others time it" if args.interleave else ""),
                  "command": " ".join(sys.argv)}
    (out / f"{slug}.provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    table = {}
    for kernel, d, causal, n, tops in rows:
        table.setdefault((d, causal, n), {})[kernel] = tops
    kernels = ["lowbit", "lowbit_e2e", "lowbit_ex2", "lowbit_ex2_e2e"]
    kernels += [k for k in sorted({r[0] for r in rows}) if k.startswith("lowbit") and k not in kernels]  # other schedules
    kernels += ["sdpa_flash", "sdpa_cudnn", "fa3_fp8", "fa3_bf16"]
    scheduled = [k for k in kernels if k.startswith("lowbit_ex2_overlapped")]  # their ratios to FA3 FP8 too
    print(f"{'d':>4} {'causal':>6} {'n':>6} " + " ".join(f"{k:>14}" for k in kernels)
          + f" {'ex2 x flash':>11} {'ex2 x cudnn':>11} {'ex2e2e x fl':>11} {'ex2 x fa3':>11} {'e2e x fa3':>11}"
          + "".join(f" {k.replace('lowbit_ex2_', '') + ' x fa3':>18}" for k in scheduled))
    for (d, causal, n), t in sorted(table.items()):
        ratio = lambda mine, other: t.get(mine, 0) / t[other] if t.get(other) else float("nan")
        print(f"{d:>4} {int(causal):>6} {n:>6} " + " ".join(f"{t.get(k, float('nan')):>14.1f}" for k in kernels)
              + f" {ratio('lowbit_ex2', 'sdpa_flash'):>11.2f} {ratio('lowbit_ex2', 'sdpa_cudnn'):>11.2f}"
              + f" {ratio('lowbit_ex2_e2e', 'sdpa_flash'):>11.2f} {ratio('lowbit_ex2', 'fa3_fp8'):>11.2f}"
              + f" {ratio('lowbit_ex2_e2e', 'fa3_fp8'):>11.2f}"
              + "".join(f" {ratio(k, 'fa3_fp8'):>18.2f}" for k in scheduled))
    return 0


if __name__ == "__main__":
    sys.exit(main())
