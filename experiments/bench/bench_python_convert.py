#!/usr/bin/env python3
"""float32 -> e4m3 (nearest-even, saturating, one code per byte) through the Python package beside
the C++ benchmark, in one run: does the binding keep the core's speed (issue 37: within 1.2x)?

The C++ side is bench_convert's "fast, 8-bit codes" row (its own inputs, median of its rounds, one
core, CPU time of the converting thread). The Python side is lowbit.encode on 2^N float32 values
drawn as bench_convert draws them (normal, sigma = 448 / 8), one thread: into a preallocated array
(out=, as bench_convert reuses its output) and into a new one, median CPU time of this thread over
the rounds (wall time beside it). The two alternate `--repeats` times, so that the load of a shared
machine falls on both; the table gives the median over the repeats and the ratio Python / C++ in
seconds per value. Writes OUT_DIR/bench_python_convert.csv (default build/results).

    experiments/bench/bench_python_convert.py --bench-convert build/experiments/bench_convert
"""

import argparse
import csv
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import lowbit

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cpp_fast_e4m3(bench_convert, log2_count, rounds):
    """bench_convert's float32 -> e4m3 saturate fast path into 8-bit codes: (variant, cpu s, wall s) per 2^N values."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([bench_convert, "--log2-count", str(log2_count), "--repetitions", str(rounds), "--no-peers",
                        "--out-dir", out], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, "bench_convert.csv")) as f:
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    for r in rows:
        if (r["input"], r["format"], r["overflow"], r["path"], r["output"]) == ("float32", "e4m3", "saturate", "fast",
                                                                                 "8-bit codes"):
            return r["variant"], float(r["median_cpu_seconds"]), float(r["median_wall_seconds"])
    raise SystemExit("bench_convert wrote no float32 -> e4m3 saturate fast 8-bit row")


def python_e4m3(x, rounds, preallocated):
    out = np.empty(x.shape, np.uint8) if preallocated else None
    lowbit.encode(x, "e4m3", out=out)  # warm-up: page faults, the fast path's plan
    cpu, wall = [], []
    for _ in range(rounds):
        c0, w0 = time.thread_time(), time.perf_counter()
        lowbit.encode(x, "e4m3", out=out)
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def git_sha():
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench-convert", default=str(ROOT / "build" / "experiments" / "bench_convert"),
                        help="the C++ benchmark (default: build/experiments/bench_convert)")
    parser.add_argument("--log2-count", type=int, default=24, help="2^N inputs (default 24)")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per path and repeat (median)")
    parser.add_argument("--repeats", type=int, default=3, help="alternations of the C++ and the Python timings")
    parser.add_argument("--out-dir", default=str(ROOT / "build" / "results"), help="where the CSV goes")
    args = parser.parse_args()
    if not os.access(args.bench_convert, os.X_OK):
        raise SystemExit(f"--bench-convert {args.bench_convert}: not an executable (build it: cmake --build build "
                         f"--target bench_convert)")

    n = 1 << args.log2_count
    x = np.random.default_rng(0).normal(0, 448 / 8, n).astype(np.float32)
    results = {"C++ bench_convert (fast, 8-bit codes)": [], "Python lowbit.encode(x, out=codes)": [],
               "Python lowbit.encode(x)": []}
    variant = ""
    for repeat in range(args.repeats):
        variant, cpu, wall = cpp_fast_e4m3(args.bench_convert, args.log2_count, args.rounds)
        results["C++ bench_convert (fast, 8-bit codes)"].append((cpu, wall))
        results["Python lowbit.encode(x, out=codes)"].append(python_e4m3(x, args.rounds, True))
        results["Python lowbit.encode(x)"].append(python_e4m3(x, args.rounds, False))
        print(f"repeat {repeat + 1}/{args.repeats} done", file=sys.stderr)

    cpp_cpu = statistics.median(c for c, _ in results["C++ bench_convert (fast, 8-bit codes)"])
    rows = []
    for path, timings in results.items():
        cpu = statistics.median(c for c, _ in timings)
        wall = statistics.median(w for _, w in timings)
        rows.append({"path": path, "conversion": "float32 -> e4m3 nearest-even saturate", "variant": variant,
                     "inputs": n, "rounds": args.rounds, "repeats": args.repeats, "median_cpu_seconds": f"{cpu:.6f}",
                     "median_wall_seconds": f"{wall:.6f}", "values_per_second": f"{n / cpu:.4g}",
                     "ratio_to_cpp": f"{cpu / cpp_cpu:.3f}",
                     "per_repeat_cpu_seconds": " ".join(f"{c:.6f}" for c, _ in timings)})

    print(f"float32 -> e4m3 (nearest-even, saturate), 2^{args.log2_count} inputs, one thread, {variant}; "
          f"medians of {args.rounds} rounds, then of {args.repeats} alternating repeats")
    print(f"{'path':<40} {'CPU s':>9} {'wall s':>9} {'values/s':>10} {'x C++':>6}")
    for r in rows:
        print(f"{r['path']:<40} {r['median_cpu_seconds']:>9} {r['median_wall_seconds']:>9} {r['values_per_second']:>10} "
              f"{r['ratio_to_cpp']:>6}")

    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "bench_python_convert.csv"
    with open(path, "w", newline="") as f:
        f.write(f"# git={git_sha()} date={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} "
                f"command: {' '.join(sys.argv)}\n")
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
