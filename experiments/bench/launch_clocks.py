#!/usr/bin/env python3
"""The clocks behind bench_attention.py --library's times: per shape and kernel, the median time and SM
clock of the counted launches over the calls, and the cycles one kernel takes against another's.

Each FILE is one call's launches.json (or launches.json.gz): per shape, every timed launch's ms, the
SM clock in MHz measured right after it, and whether it counted. For each (d, causal, N) it prints a
Markdown row: for the two --kernels MINE,OTHER (default lowbit_ex2,fa3_fp8; lowbit_ex2@NAME is an
--alt-library build's) the median over every counted launch of the calls of the time (ms) and the
clock (MHz), the ratio of the times (OTHER's over MINE's: above 1 MINE is faster), and the ratio of
the cycles (time x clock; above 1 MINE takes fewer), which takes the clocks out.

  experiments/bench/launch_clocks.py results/bench_attention/fa3/in-turn/shuffled/launches-*.json.gz
  experiments/bench/launch_clocks.py --kernels lowbit_ex2@variant,lowbit_ex2 OUT/in-turn-*/launches.json
"""
import argparse
import gzip
import json
import pathlib
import statistics
import sys

def read(path):
    path = pathlib.Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt") as f:
            return json.load(f)
    except (OSError, EOFError, json.JSONDecodeError) as e:
        raise SystemExit(f"{path}: not a readable launches.json ({e})")


def tokens(n):
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE", help="launches.json(.gz) of bench_attention.py --library")
    parser.add_argument("--kernels", default="lowbit_ex2,fa3_fp8", metavar="MINE,OTHER", help="the two kernels compared")
    args = parser.parse_args()
    kernels = tuple(args.kernels.split(","))
    if len(kernels) != 2:
        parser.error(f"--kernels takes two names, MINE,OTHER: {args.kernels}")
    counted = {}  # (d, causal, n) -> kernel -> [(ms, mhz)]
    for path in args.files:
        for shape in read(path):
            try:
                key = (shape["d"], shape["causal"], shape["n"])
                for kernel in kernels:
                    r = shape["launches"][kernel]
                    counted.setdefault(key, {}).setdefault(kernel, []).extend(
                        (ms, mhz) for ms, mhz, c in zip(r["ms"], r["mhz"], r["counted"]) if c)
            except (KeyError, TypeError) as e:
                raise SystemExit(f"{path}: a shape without {e} (not bench_attention.py --library's launches.json, "
                                 "or a kernel it did not time)")
    mine, other = kernels
    header = ["d", "causal", "N"] + [f"{k} ms" for k in kernels] + [f"{k} MHz" for k in kernels]
    header += [f"time: {other} / {mine}", f"cycles: {other} / {mine}"]
    print(f"the median of {len(args.files)} calls' counted launches:\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for (d, causal, n), by_kernel in sorted(counted.items()):
        ms = {k: statistics.median(m for m, _ in v) for k, v in by_kernel.items()}
        mhz = {k: statistics.median(c for _, c in v) for k, v in by_kernel.items()}
        cells = [str(d), "yes" if causal else "no", tokens(n)]
        cells += [f"{ms[k]:.2f}" for k in kernels] + [f"{mhz[k]:.0f}" for k in kernels]
        cells += [f"{ms[other] / ms[mine]:.2f}x", f"{ms[other] * mhz[other] / (ms[mine] * mhz[mine]):.2f}x"]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
