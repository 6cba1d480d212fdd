#!/usr/bin/env python3
"""The median of several bench_attention.py calls, as a table and one CSV of every measurement.

Each CALL folder is one call's --out of experiments/bench/bench_attention.py (its <gpu>.csv:
gpu,kernel,d,causal,n,tops). Writes OUT/calls.csv (gpu,call,kernel,d,causal,n,tops: every
measurement, the call numbered in the order given) and prints a Markdown table per (d, causal, N):
the median TOPS of each kernel over the calls (lowbit_ex2...@NAME: another build's, from
bench_attention.py --alt-library), the ratio of the medians of each lowbit_ex2 kernel to
FlashAttention-3 FP8's (fa3_fp8), and the spread: the largest distance of a call's value from its
median, as a share of the median, over the kernels shown. The calls must come from one GPU kind.

  experiments/bench/median_of_calls.py --out results/bench_attention/fa3 OUT/bench-1 OUT/bench-2 OUT/bench-3
  experiments/bench/median_of_calls.py --from-calls results/bench_attention/fa3/calls.csv   # the table again
"""
import argparse
import csv
import pathlib
import statistics
import sys

# The columns, in this order, where any call measured them.
KERNELS = ["lowbit_ex2", "lowbit_ex2_overlapped", "lowbit_ex2_pv", "lowbit_ex2_e2e", "lowbit_ex2_overlapped_e2e",
           "lowbit_ex2_pv_e2e", "fa3_fp8", "fa3_bf16", "sdpa_flash"]
REFERENCE = "fa3_fp8"


def read_rows(path, columns):
    """(the call column's value or None, (gpu, kernel, d, causal, n, tops)) of each row of a CSV."""
    rows = []
    with path.open() as f:
        reader = csv.DictReader(f)
        missing = set(columns) - set(reader.fieldnames or [])
        if missing:
            raise SystemExit(f"{path}: not a bench_attention.py CSV (no column {', '.join(sorted(missing))})")
        for line, row in enumerate(reader, start=2):
            try:
                tops = float(row["tops"])
                rows.append((row.get("call"), (row["gpu"], row["kernel"], int(row["d"]), int(row["causal"]),
                                               int(row["n"]), tops)))
            except (TypeError, ValueError):
                raise SystemExit(f"{path}:{line}: a missing value or not a number in {row}")
            if not tops > 0:
                raise SystemExit(f"{path}:{line}: TOPS {row['tops']} is not a positive number")
    return rows


def read_call(folder):
    """The rows of one call's folder (its one CSV): (gpu, kernel, d, causal, n, tops)."""
    folder = pathlib.Path(folder)
    csvs = sorted(folder.glob("*.csv"))
    if len(csvs) != 1:
        raise SystemExit(f"{folder}: expected one bench_attention.py CSV there, found {len(csvs)}")
    return [row for _, row in read_rows(csvs[0], ["gpu", "kernel", "d", "causal", "n", "tops"])]


def read_calls_csv(path):
    """Each call's rows of a calls.csv that this program wrote, in the order of their numbers."""
    by_call = {}
    for call, row in read_rows(pathlib.Path(path), ["gpu", "call", "kernel", "d", "causal", "n", "tops"]):
        by_call.setdefault(int(call), []).append(row)
    return [by_call[c] for c in sorted(by_call)]


def tokens(n):
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def table(calls):
    """The Markdown lines of the median table of calls (a list of each call's rows)."""
    measured = {}  # (d, causal, n) -> kernel -> [tops of each call]
    for rows in calls:
        for _, kernel, d, causal, n, tops in rows:
            measured.setdefault((d, causal, n), {}).setdefault(kernel, []).append(tops)
    kernels = [k for k in KERNELS if any(k in by_kernel for by_kernel in measured.values())]
    kernels += sorted({k for by_kernel in measured.values() for k in by_kernel if "@" in k and k.startswith("lowbit_ex2")})
    ratios = [k for k in kernels if k.startswith("lowbit_ex2")]
    header = ["d", "causal", "N"] + kernels + [f"{k} / {REFERENCE}" for k in ratios] + ["spread"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (d, causal, n), by_kernel in sorted(measured.items()):
        median = {k: statistics.median(v) for k, v in by_kernel.items()}
        spread = max((max(abs(t - median[k]) for t in by_kernel[k]) / median[k] for k in kernels if k in by_kernel),
                     default=0.0)
        cells = [str(d), "yes" if causal else "no", tokens(n)]
        cells += [f"{median[k]:.0f}" if k in median else "" for k in kernels]
        cells += [f"{median[k] / median[REFERENCE]:.2f}x" if k in median and REFERENCE in median else "" for k in ratios]
        cells.append(f"{100 * spread:.1f}%")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("calls", nargs="*", metavar="CALL", help="a bench_attention.py --out folder, one per call")
    parser.add_argument("--from-calls", metavar="CSV", help="read the calls from a calls.csv this program wrote")
    parser.add_argument("--out", help="where calls.csv goes (default: nowhere)")
    args = parser.parse_args()
    if bool(args.calls) == bool(args.from_calls):
        parser.error("give either call folders or --from-calls")
    calls = read_calls_csv(args.from_calls) if args.from_calls else [read_call(folder) for folder in args.calls]
    gpus = sorted({row[0] for rows in calls for row in rows})
    if len(gpus) != 1:
        raise SystemExit(f"the calls ran on {len(gpus)} GPU kinds ({', '.join(gpus) or 'none'}): their medians do not mix")
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with (out / "calls.csv").open("w") as f:
            f.write("gpu,call,kernel,d,causal,n,tops\n")
            for call, rows in enumerate(calls, start=1):
                for gpu, kernel, d, causal, n, tops in rows:
                    f.write(f"{gpu},{call},{kernel},{d},{causal},{n},{tops:.1f}\n")
    print(f"{gpus[0]}, the median of {len(calls)} calls (TOPS):\n")
    print("\n".join(table(calls)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
