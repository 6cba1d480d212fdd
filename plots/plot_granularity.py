#!/usr/bin/env python3
"""Attention-output error per quantization granularity and smoothing method (SageAttention2 Tables 3 and 9).

usage: plots/plot_granularity.py [RESULTS_DIR] [--out FILE.png]

Reads RESULTS_DIR/granularity.csv (one row per table, method and head, written by
`lowbit run granularity-qk`; default build/results/granularity-qk, where it writes by default;
the committed record is results/granularity) and draws, per table, each method's cosine
similarity, relative L1 and RMSE: one dot per head, a bar for the mean. The figure's footer
carries the provenance line of the CSV (git SHA, date, host).
"""
import argparse
import csv
import os
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from palette_png import save_png  # noqa: E402

METRICS = [("cosine", "cosine similarity", True), ("relative_l1", "relative L1", False), ("rmse", "RMSE", False)]


def read(path):
    provenance = []
    rows = []
    with open(path, newline="") as f:
        lines = []
        for line in f:
            if line.startswith("#"):
                provenance.append(line[1:].strip())
            else:
                lines.append(line)
    for r in csv.DictReader(lines):
        for key, _, _ in METRICS:
            r[key] = float(r[key])
        rows.append(r)
    if not rows:
        sys.exit(f"{path}: no data rows")
    missing = {"table", "method", "head"} - set(rows[0])
    if missing:
        sys.exit(f"{path}: missing columns {sorted(missing)}")
    return rows, provenance


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default="build/results/granularity-qk")
    parser.add_argument("--out", help="PNG to write (default RESULTS/granularity.png)")
    args = parser.parse_args()
    path = os.path.join(args.results, "granularity.csv")
    if not os.path.exists(path):
        sys.exit(f"{path}: not found (run lowbit run granularity-qk --out {args.results} first)")
    rows, provenance = read(path)

    tables = OrderedDict()
    for r in rows:
        tables.setdefault(r["table"], OrderedDict()).setdefault(r["method"], []).append(r)

    fig, axes = plt.subplots(len(tables), len(METRICS), figsize=(5.2 * len(METRICS), 3.4 * len(tables)), squeeze=False)
    for row, (table, methods) in enumerate(tables.items()):
        names = list(methods)
        for col, (key, label, percent) in enumerate(METRICS):
            ax = axes[row][col]
            for x, name in enumerate(names):
                values = [r[key] * (100 if percent else 1) for r in methods[name]]
                ax.bar(x, sum(values) / len(values), color="#9ecae1", edgecolor="#3182bd")
                ax.plot([x] * len(values), values, "o", color="#08519c", markersize=3)
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel(label + (" (%)" if percent else ""))
            if percent:
                low = min(r[key] for rs in methods.values() for r in rs) * 100
                ax.set_ylim(max(0.0, low - 1.0), 100.0)
            if col == 0:
                ax.set_title(table, fontsize=10, loc="left")
    fig.text(0.01, 0.005, "  ".join(provenance), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    out = args.out or os.path.join(args.results, "granularity.png")
    save_png(fig, out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
