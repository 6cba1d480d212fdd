#!/usr/bin/env python3
"""bench_attention on the GPU, with PyTorch SDPA measured in the same run.

Runs the bench_attention binary (lowbit: the kernel on pre-quantized inputs; lowbit_e2e: from fp16,
quantization included; lowbit_ex2, lowbit_ex2_e2e: the same with MUFU.EX2 as the exp2; with --schedule overlapped
also the kernel's overlapped schedule, rows lowbit..._overlapped), then times PyTorch SDPA with the flash backend (sdpa_flash,
FlashAttention-2) and the cuDNN backend (sdpa_cudnn) on fp16 inputs of the same shapes: batch 4,
32 heads, N = 1K .. 32K, d = 64 and 128, causal and not; and, where the PyPI wheel fa3-fwd is
installed, FlashAttention-3's forward in FP8 (fa3_fp8: E4M3 inputs with descales, as it takes them)
and BF16 (fa3_bf16), in its own [batch, tokens, heads, dim] layout. TOPS = 4 B H N^2 d / time, halved for
causal; median of --repeats timed runs (CUDA events around each, the GPU kept busy while Python enqueues
the run) after --warmup runs. Writes
<out>/<gpu>.csv (gpu,kernel,d,causal,n,tops), <out>/<gpu>.provenance.json and prints a table.

By default the binary times every shape first, then the others follow shape by shape. At its power
cap a GPU's clock, and so a timing, depends on what ran just before (the same kernel 8-14% apart
in two positions of one process: results/bench_attention/fa3/README.md); --interleave runs the
binary once per shape, right before the others time that shape (--others-first: right after), so
that the kernels compared share their history. --library LIB takes lowbit's kernels from
liblowbit_sage2.so in this process instead of the binary (python/lowbit/gpu.py) and times them
launch by launch in turn with FlashAttention-3 and SDPA's flash backend on the same values (--inputs:
random normal, or attention-like as the binary's, with a channel bias largest in K; [batch, tokens,
heads, dim] for all: FA3's layout, which the kernels and SDPA also read), so that every kernel runs
under the same conditions, each round in an order drawn anew (--order fixed: always the same, so a
kernel always starts at the clock one other kernel left); --burst B makes each turn B launches of a kernel,
the first B // 2 not counted (the clock moving from the kernel before to the kernel's own). After
every timed launch the SM clock is measured on the GPU (lowbit.gpu.sm_clock_mhz); every launch's
time and clock go to <out>/launches.json. --row-sum lanes,pv adds the kernels with the row sums by the
P V wgmma (lowbit_ex2_pv, row-sum=pv). --alt-library NAME=PATH adds another build of the library
(a kernel variant) to the turns, its kernels named lowbit...@NAME: two builds side by side under the
same clocks; on operands quantized once only, unless --alt-end-to-end (lowbit..._e2e@NAME too).
"""
import argparse
import importlib.util
import json
import pathlib
import random
import re
import statistics
import subprocess
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


# About 100 us of one thread spinning on the GPU (torch.cuda._sleep): longer than the host takes to call a
# kernel through Python, so that its launch overhead is not in the events' interval.
BUSY_CYCLES = 200_000
# --order shuffled: the seed of each shape's draws (plus N + d + causal), so that a run can be repeated.
ORDER_SEED = 20261207


def time_in_turn(runs, warmup, repeats, burst=1, clock=None, shuffle=None):
    """Each of runs (name -> function) in turn: `warmup` rounds untimed, then `repeats` rounds in which
    each runs `burst` launches back to back, CUDA events around every launch and, with `clock` (a
    function returning MHz), the SM clock read after it. The first burst // 2 launches of a turn are the
    clock's move from the kernel before: recorded, not counted. With `shuffle` (a random.Random) each
    timed round takes the kernels in an order of its drawing, so that no kernel always follows the same
    one (a kernel starts at the clock the one before left). Before each launch the GPU spins on one
    thread while the host enqueues, so the events time the kernels, not Python's launch overhead.
    Returns name -> {"ms": [...], "mhz": [...], "counted": [...], "after": [...]}, one entry per timed
    launch in order ("after": the kernel launched just before, None for the first)."""
    for _ in range(warmup):
        for run in runs.values():
            for _ in range(burst):
                run()
    record = {name: {"ms": [], "mhz": [], "counted": [], "after": []} for name in runs}
    before = None
    for _ in range(repeats):
        for name in shuffle.sample(list(runs), len(runs)) if shuffle else list(runs):
            for launch in range(burst):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(BUSY_CYCLES)  # the GPU busy while the host enqueues: events time the kernels alone
                start.record()
                runs[name]()
                stop.record()
                stop.synchronize()
                record[name]["ms"].append(start.elapsed_time(stop))
                record[name]["mhz"].append(clock() if clock else None)
                record[name]["counted"].append(launch >= burst // 2)
                record[name]["after"].append(before)
                before = name
    return record


def counted_median(record, key):
    """The median of a time_in_turn record's counted values of `key` ("ms" or "mhz")."""
    return statistics.median(v for v, counted in zip(record[key], record["counted"]) if counted)


def time_ms(run, warmup, repeats):
    """The benchmark's method: CUDA events around each run, the median of `repeats` after `warmup` runs
    (time_in_turn with one kernel)."""
    return statistics.median(time_in_turn({"run": run}, warmup, repeats)["run"]["ms"])


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


def load_gpu_module():
    """python/lowbit/gpu.py from this checkout (ctypes only: it needs no lowbit build for this Python)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "python" / "lowbit" / "gpu.py"
    spec = importlib.util.spec_from_file_location("lowbit_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --inputs attention-like: the channel bias amplitudes of Q, K and V, those of the binary's inputs
# (experiments/bench/bench_attention_inputs.hpp: K's channel bias, which SageAttention2 smooths away).
ATTENTION_LIKE_BIAS = (1.0, 8.0, 2.0)


def attention_like(shape, amplitude):
    """fp16 values as kernels::fill_attention_like draws them (kernels/random_fill.hpp): a bias per
    channel, uniform in [-amplitude, amplitude), plus the sum of four uniforms in [0, 1) minus 2."""
    x = (torch.rand(shape[-1], device="cuda") * 2 - 1) * amplitude - 2
    for _ in range(4):
        x = x + torch.rand(shape, device="cuda")
    return x.to(torch.float16)


def cosine(x, y):
    x, y = x.double().flatten(), y.double().flatten()
    return float(x @ y / (x.norm() * y.norm()))


def library_kernels(args):
    """(exp2, schedule, row_sum) of each library kernel to time: every combination of --exp2, --schedule
    and --row-sum that has an instance (row sums by P V: sm90-ex2, serial)."""
    return [(exp2, schedule, row_sum) for exp2 in args.exp2.split(",") for schedule in args.schedule.split(",")
            for row_sum in args.row_sum.split(",")
            if row_sum == "lanes" or (exp2 == "sm90-ex2" and schedule == "serial")]


def time_shape_in_turn(gpu, libraries, args, d, causal, n):
    """lowbit's kernels (each exp2 unit and schedule: the kernel on operands quantized once, and end to
    end; from each library of `libraries`, suffix -> Library, "" the main one and "@NAME" the
    --alt-library NAME), FA3 FP8 and BF16 where installed, and SDPA flash, launched in turn on one
    shape's values.
    Returns (name -> its time_in_turn record, with the SM clock after every launch; name -> the cosine
    similarity of its output to SDPA's)."""
    b, h = args.batch, args.heads
    if args.inputs == "normal":
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
    else:
        q, k, v = (attention_like((b, n, h, d), amplitude) for amplitude in ATTENTION_LIKE_BIAS)
    outputs, runs = {}, {}
    for suffix, library in libraries.items():
        for exp2, schedule, row_sum in library_kernels(args):
            name = (("lowbit_ex2" if exp2 == "sm90-ex2" else "lowbit") + ("_pv" if row_sum == "pv" else "")
                    + ("" if schedule == "serial" else "_" + schedule))
            attn = gpu.Sage2Attention(b, h, n, d, causal=causal, layout="bnhd", schedule=schedule, library=library,
                                      exp2="polynomial" if exp2 == "poly5" else exp2, row_sum=row_sum)
            out, lse = attn(q, k, v)
            outputs[name + suffix] = out
            runs[name + suffix] = lambda attn=attn, out=out, lse=lse: attn.attention_quantized(out, lse)
            if not suffix or args.alt_end_to_end:
                runs[name + "_e2e" + suffix] = lambda attn=attn, out=out, lse=lse: attn(q, k, v, out, lse)
    if have_fa3():
        import fa3_fwd_interface as fa3

        q8, k8, v8 = (t.to(torch.float8_e4m3fn) for t in (q, k, v))
        qb, kb, vb = (t.to(torch.bfloat16) for t in (q, k, v))
        descale = torch.ones(b, h, device="cuda", dtype=torch.float32)
        fp8 = lambda: fa3.flash_attn_func(q8, k8, v8, causal=causal, q_descale=descale, k_descale=descale, v_descale=descale)
        bf16 = lambda: fa3.flash_attn_func(qb, kb, vb, causal=causal)
        runs["fa3_fp8"], runs["fa3_bf16"] = fp8, bf16
        outputs["fa3_fp8"], outputs["fa3_bf16"] = (first(run()) for run in (fp8, bf16))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        reference = sdpa().transpose(1, 2)
        runs["sdpa_flash"] = sdpa
        shuffle = random.Random(ORDER_SEED + n + d + causal) if args.order == "shuffled" else None
        times = time_in_turn(runs, args.warmup, args.repeats, args.burst, lambda: gpu.sm_clock_mhz(library=libraries[""]),
                             shuffle)
    return times, {name: cosine(out, reference) for name, out in outputs.items()}


def first(result):
    """FA3's output tensor (some versions return (out, lse))."""
    return result[0] if isinstance(result, (tuple, list)) else result


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
    parser.add_argument("--binary", help="the bench_attention executable")
    parser.add_argument("--library", help="liblowbit_sage2.so: lowbit's kernels timed in this process, in turn with the others")
    parser.add_argument("--alt-library", action="append", default=[], metavar="NAME=PATH",
                        help="with --library: another build of it whose kernels join the turns as lowbit...@NAME (repeatable)")
    parser.add_argument("--alt-end-to-end", action="store_true",
                        help="with --alt-library: time its builds end to end too (lowbit..._e2e@NAME), not only their "
                             "kernels on operands quantized once")
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
    parser.add_argument("--row-sum", default="lanes",
                        help="with --library: the kernels' row sums, lanes and/or pv (the P V wgmma's: lowbit_ex2_pv, "
                             "with sm90-ex2 and the serial schedule)")
    parser.add_argument("--inputs", choices=("normal", "attention-like"), default="normal",
                        help="with --library: the values every kernel gets: random normal, or the binary's kind "
                             "(a channel bias in Q, K and V, the largest in K)")
    parser.add_argument("--order", choices=("shuffled", "fixed"), default="shuffled",
                        help="with --library: each round's order of the kernels, drawn anew (seeded) or always the same")
    parser.add_argument("--burst", type=int, default=1,
                        help="with --library: launches of a kernel per turn, the first half not counted (the clock's move)")
    parser.add_argument("--interleave", action="store_true",
                        help="run the binary once per shape, right before the other kernels time that shape")
    parser.add_argument("--others-first", action="store_true",
                        help="with --interleave: the binary right after the other kernels time each shape")
    args = parser.parse_args()
    if args.others_first and not args.interleave:
        parser.error("--others-first orders the kernels of each shape: it needs --interleave")
    if (args.binary is None) == (args.library is None):
        parser.error("give one of --binary (the bench_attention program) and --library (liblowbit_sage2.so)")
    if args.library and args.interleave:
        parser.error("--library already times every kernel in turn, launch by launch: --interleave is for --binary")
    if args.burst < 1 or args.burst > 1 and not args.library:
        parser.error("--burst takes a count >= 1, with --library")
    if args.inputs != "normal" and not args.library:
        parser.error("--inputs chooses the values of --library's run (the binary makes its own)")
    if args.order != "shuffled" and not args.library:
        parser.error("--order orders --library's turns")
    if not set(args.row_sum.split(",")) <= {"lanes", "pv"}:
        parser.error(f"--row-sum {args.row_sum}: lanes and/or pv")
    if args.row_sum != "lanes" and not args.library:
        parser.error("--row-sum chooses --library's kernels (the binary has the lanes' row sums)")
    alternatives = dict(entry.partition("=")[::2] for entry in args.alt_library)
    if args.alt_library and not args.library:
        parser.error("--alt-library joins --library's turns")
    if args.alt_end_to_end and not args.alt_library:
        parser.error("--alt-end-to-end times the --alt-library builds end to end: name one")
    if len(alternatives) != len(args.alt_library) or not all(name.isidentifier() and path for name, path in alternatives.items()):
        parser.error(f"--alt-library takes NAME=PATH, each NAME a different word: {args.alt_library}")
    args.alternatives = alternatives
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.library:
        rows = run_in_turn(args, out)
    else:
        rows = run_with_binary(args, out)
    print_table(rows)
    return 0


def run_in_turn(args, out):
    """--library: every shape's kernels launched in turn in this process; the CSV, launches.json and
    the provenance written; returns the rows."""
    gpu = load_gpu_module()
    library = gpu.load(args.library)
    libraries = {"": library, **{"@" + name: gpu.load(path) for name, path in args.alternatives.items()}}
    gpu_name = torch.cuda.get_device_name()
    rows, launches = [], []
    for d in map(int, args.dims.split(",")):
        for causal in (False, True):
            for n in map(int, args.tokens.split(",")):
                ops = 4.0 * args.batch * args.heads * n * n * d / (2 if causal else 1)
                records, cosines = time_shape_in_turn(gpu, libraries, args, d, causal, n)
                for name, record in records.items():
                    rows.append((name, d, causal, n, ops / (counted_median(record, "ms") * 1e-3) / 1e12))
                launches.append({"d": d, "causal": causal, "n": n, "launches": records, "cosine_to_sdpa_flash": cosines})
                print(f"d={d} causal={int(causal)} n={n}: " + ", ".join(
                    f"{k} {counted_median(r, 'ms'):.3f} ms at {counted_median(r, 'mhz'):.0f} MHz" for k, r in records.items()),
                      flush=True)
                wrong = {k: c for k, c in cosines.items() if k.startswith("lowbit") and not c > 0.99}
                if wrong:
                    raise SystemExit(f"bench_attention.py: d={d} causal={causal} n={n}: lowbit's output is not attention "
                                     f"(cosine similarity to SDPA {wrong}): the library's inputs or outputs are wired wrong")
                torch.cuda.empty_cache()
    slug, _ = write_tops_csv(out, gpu_name, rows)
    (out / "launches.json").write_text(json.dumps(launches) + "\n")
    provenance = {"lowbit": library.provenance, "library": args.library,
                  **({"alternatives": {name: {"library": path, "lowbit": libraries["@" + name].provenance}
                                       for name, path in args.alternatives.items()}} if args.alternatives else {}),
                  "torch": torch.__version__,
                  "cudnn": torch.backends.cudnn.version(), "fa3": fa3_version(),
                  "method": f"in one process, every kernel of a shape launched in turn ({args.warmup} rounds of warmup, "
                            f"{args.repeats} timed, each in a {args.order} order"
                            + (f" (seed {ORDER_SEED} + N + d + causal)" if args.order == "shuffled" else "")
                            + f", {args.burst} launch(es) a turn, the first {args.burst // 2} of each turn "
                            "not counted), CUDA events around each launch and the SM clock measured after it, the median "
                            f"of the counted launches; the same values for all ({args.inputs}; [batch, tokens, heads, dim]; "
                            "fp16, FA3's as E4M3 with unit descales and as BF16); lowbit's kernels from "
                            "liblowbit_sage2.so; every launch's time and clock in launches.json",
                  "command": " ".join(sys.argv)}
    (out / f"{slug}.provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return rows


def run_with_binary(args, out):
    """The bench_attention binary's measurements, then SDPA's and FA3's; the CSV and provenance written;
    returns the rows."""
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
                                               "in the same run, the GPU kept busy while Python enqueues each run"
                            + (f"; interleaved: the binary run once per shape, right {'after' if args.others_first else 'before'} "
                               "the others time it" if args.interleave else ""),
                  "command": " ".join(sys.argv)}
    (out / f"{slug}.provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return rows


def print_table(rows):
    """The TOPS of every kernel per shape, and lowbit's ratios to the others."""
    table = {}
    for kernel, d, causal, n, tops in rows:
        table.setdefault((d, causal, n), {})[kernel] = tops
    kernels = ["lowbit", "lowbit_e2e", "lowbit_ex2", "lowbit_ex2_e2e"]
    kernels += [k for k in sorted({r[0] for r in rows}) if k.startswith("lowbit") and k not in kernels]  # schedules, builds
    kernels += ["sdpa_flash", "sdpa_cudnn", "fa3_fp8", "fa3_bf16"]
    # The other schedules', row sums' and builds' (--alt-library) ratios to FA3 FP8 too.
    scheduled = [k for k in kernels if k.startswith(("lowbit_ex2_overlapped", "lowbit_ex2_pv", "lowbit_ex2@"))]
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


if __name__ == "__main__":
    sys.exit(main())
