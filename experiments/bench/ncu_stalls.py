#!/usr/bin/env python3
"""Issue rate and warp stalls of kernels side by side, from Nsight Compute's raw metrics.

Each input is the CSV of one launch (`ncu --csv --page raw --metrics M ...`, the lines starting
with a quote), M holding at least the metrics below: the warps a scheduler holds, the share of
cycles in which it issued, the cycles between a warp's instructions split by stall reason (their
sum is the cycles per issued instruction), the XU pipe (MUFU, conversions), the instructions
executed; the registers a thread where launch__registers_per_thread was asked for, the L2's busiest
unit (lts__throughput, % of its peak) where that was. The name of a
row is its file's name (without .csv, .txt, .gz). Writes the table as CSV to stdout, or with
--markdown as a Markdown table. The metrics that results/bench_attention/fa3/schedules/ncu/ holds:

  ncu --kernel-name regex:sage2_attention_kernel --launch-count 1 --csv --page raw --metrics \\
    'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio|smsp__inst_executed\\.sum|sm__cycles_elapsed\\.avg|sm__inst_executed_pipe_xu\\.avg\\.pct_of_peak_sustained_active' \\
    bench_attention --dims 128 --tokens 8192 --causal no --exp2 sm90-ex2 --schedule serial --warmup 0 --repeats 1

  experiments/bench/ncu_stalls.py --markdown results/bench_attention/fa3/schedules/ncu/*.csv

With --opcodes SCORES it shows instead what the kernels execute, opcode by opcode: each opcode's
thread instructions a score (its warp instructions x 32 / SCORES, the attention scores of the
profiled launch, B H N^2 without a mask), from sass__inst_executed_per_opcode, which ncu writes
with --print-metric-instances details; the opcodes of at least 0.05 a score in some kernel, the
rest as "other", and the total. Inputs may be gzipped.
"""
import argparse
import csv
import gzip
import pathlib
import re
import sys

STALL = "smsp__average_warps_issue_stalled_"
L2 = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
PER_ISSUE = "_per_issue_active.ratio"
# The stall reasons shown on their own (the others are summed into "other"), largest first in the
# kernels of issue 40.
SHOWN = ["wait", "selected", "barrier", "not_selected", "mio_throttle", "dispatch_stall", "gmma", "math_pipe_throttle",
         "long_scoreboard", "short_scoreboard"]


def read_launch(path):
    """{metric: value} of the one launch in an ncu raw CSV."""
    try:
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise SystemExit(f"{path}: unreadable ({error})")
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(lines))
    if len(rows) < 3:
        raise SystemExit(f"{path}: not an ncu --csv --page raw file of one launch (header, units, values)")
    if len(rows) > 3:
        raise SystemExit(f"{path}: {len(rows) - 2} launches; one expected (ncu --launch-count 1)")
    return dict(zip(rows[0], rows[2]))


def kernel_name(path):
    """A row's name: its file's name without .csv, .txt or .gz."""
    return re.sub(r"(\.(csv|txt))?(\.gz)?$", "", path.name)


def number(metrics, name, path):
    if name not in metrics:
        raise SystemExit(f"{path}: no metric {name} (see this program's --help for the ncu command)")
    try:  # with --print-metric-instances details a value is followed by its instances: "168 (0: 168)"
        return float(metrics[name].split(" (")[0].replace(",", ""))
    except ValueError:
        raise SystemExit(f"{path}: {name} = {metrics[name]!r} is not a number")


def summarize(path):
    m = read_launch(path)
    stalls = {k[len(STALL):-len(PER_ISSUE)]: number(m, k, path) for k in m if k.startswith(STALL) and k.endswith(PER_ISSUE)}
    if not stalls:
        raise SystemExit(f"{path}: no {STALL}*{PER_ISSUE} metrics")
    cycles, hz = number(m, "sm__cycles_elapsed.avg", path), number(m, "sm__cycles_elapsed.avg.per_second", path)
    row = {"kernel": kernel_name(path), "duration_ms": f"{1e3 * cycles / hz:.3f}", "sm_mhz": f"{hz / 1e6:.0f}",
           "registers": f"{number(m, 'launch__registers_per_thread', path):.0f}" if "launch__registers_per_thread" in m else "",
           "warps_per_scheduler": f"{number(m, 'smsp__maximum_warps_avg_per_active_cycle', path):.0f}",
           "issue_slots_busy_pct": f"{number(m, 'smsp__inst_executed.sum.pct_of_peak_sustained_active', path):.1f}",
           "cycles_per_issued_instruction": f"{sum(stalls.values()):.2f}",
           "xu_pipe_pct": f"{number(m, 'sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active', path):.1f}",
           "instructions_executed": f"{number(m, 'smsp__inst_executed.sum', path):.0f}",
           "l2_pct": f"{number(m, L2, path):.1f}" if L2 in m else ""}
    row.update({f"stall_{s}": f"{stalls.get(s, 0.0):.2f}" for s in SHOWN})
    row["stall_other"] = f"{sum(v for s, v in stalls.items() if s not in SHOWN):.2f}"
    return row


OPCODES = "sass__inst_executed_per_opcode"
SHOWN_PER_SCORE = 0.05


def opcode_counts(path):
    """{opcode: warp instructions} of the launch, from ncu's instances "TOTAL (OP: n; OP: n; ...)"."""
    m = read_launch(path)
    if OPCODES not in m:
        raise SystemExit(f"{path}: no metric {OPCODES} (ncu --metrics {OPCODES} --print-metric-instances details)")
    pairs = re.findall(r"([A-Z0-9_.]+): ([0-9,]+)", m[OPCODES])
    if not pairs:
        raise SystemExit(f"{path}: {OPCODES} = {m[OPCODES][:80]!r} has no per-opcode instances (--print-metric-instances details)")
    return {op: int(n.replace(",", "")) for op, n in pairs}


def opcode_rows(paths, scores):
    """Rows of opcode, then per kernel its thread instructions a score."""
    per_score = {kernel_name(p): {op: 32 * n / scores for op, n in opcode_counts(p).items()}
                 for p in paths}
    shown = sorted({op for counts in per_score.values() for op, v in counts.items() if v >= SHOWN_PER_SCORE},
                   key=lambda op: -max(c.get(op, 0.0) for c in per_score.values()))
    rows = [{"opcode": op, **{k: f"{c.get(op, 0.0):.2f}" for k, c in per_score.items()}} for op in shown]
    rows.append({"opcode": "other", **{k: f"{sum(v for op, v in c.items() if op not in shown):.2f}" for k, c in per_score.items()}})
    rows.append({"opcode": "total", **{k: f"{sum(c.values()):.2f}" for k, c in per_score.items()}})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=pathlib.Path, help="ncu --csv --page raw output, one launch each")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table instead of CSV")
    parser.add_argument("--opcodes", type=float, metavar="SCORES",
                        help="the opcodes executed a score instead, SCORES being the launch's attention scores")
    args = parser.parse_args()
    for f in args.files:
        if not f.is_file():
            raise SystemExit(f"{f}: no such file")
    if args.opcodes is not None and args.opcodes <= 0:
        raise SystemExit(f"--opcodes {args.opcodes}: the scores of the launch, a positive count")
    rows = opcode_rows(args.files, args.opcodes) if args.opcodes else [summarize(f) for f in args.files]
    columns = list(rows[0])
    if args.markdown:
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for row in rows:
            print("| " + " | ".join(row[c] for c in columns) + " |")
    else:
        writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
