#!/usr/bin/env python3
"""Chunkwise GLA with INT4/INT8 scores and FP8 P V against float64: figures of exp_linear's results.

usage: plots/plot_linear.py [RESULTS_DIR] [--out DIR]

Reads RESULTS_DIR/metrics.csv or metrics.csv.gz (experiment,variant,dataset,head,metric,value after its provenance and
command lines, written by exp_linear; default results/linear) and writes into --out
(default RESULTS_DIR) as PNG and SVG:
  linear_scores    1 - cosine similarity of the quantized intra-chunk scores, every preset and data set,
                   with the proposal's thresholds (99% and 85% cosine)
  linear_output    relative L1 error of the output and of the final state, every preset
  linear_sweeps    the scores' 1 - cosine against the gate temperature; the intra-chunk output's error
                   against the chunk size
Each figure's footer carries the run's provenance (git SHA, date, host) and command. Experiments
absent from the CSV are left out.
"""
import argparse
import csv
import gzip
import os
import sys
from collections import OrderedDict, defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from palette_png import save_png  # noqa: E402

COLUMNS = ["experiment", "variant", "dataset", "head", "metric", "value"]


def read(results):
    """The rows of metrics.csv, and its provenance and command lines (the '#' lines at its head)."""
    path = os.path.join(results, "metrics.csv")
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"  # the committed copy in results/linear is compressed
    if not os.path.exists(path):
        sys.exit(f"{path}: not found (run exp_linear --out {results} first)")
    with (gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")) as f:
        lines = f.read().splitlines()
    head = [line[1:].strip() for line in lines if line.startswith("#")]
    reader = csv.DictReader(line for line in lines if not line.startswith("#"))
    if reader.fieldnames != COLUMNS:
        sys.exit(f"{path}: columns {reader.fieldnames}, expected {COLUMNS}")
    rows = []
    for r in reader:
        try:
            r["value"] = float(r["value"])
        except ValueError:
            sys.exit(f"{path}: value {r['value']!r} of {r['variant']} / {r['metric']} is not a number")
        rows.append(r)
    if not rows:
        sys.exit(f"{path}: no data rows")
    return rows, "\n".join(head)


def values(rows, experiment, metric):
    """{dataset: {variant: [values over heads]}} in first-seen order."""
    out = OrderedDict()
    for r in rows:
        if r["experiment"] == experiment and r["metric"] == metric:
            out.setdefault(r["dataset"], OrderedDict()).setdefault(r["variant"], []).append(r["value"])
    return out


def save(fig, out, name, footer):
    fig.text(0.01, 0.005, footer, fontsize=6.5, color="gray", va="bottom")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    save_png(fig, os.path.join(out, f"{name}.png"), dpi=130)
    fig.savefig(os.path.join(out, f"{name}.svg"), dpi=130)
    plt.close(fig)
    print(f"wrote {os.path.join(out, name)}.png and .svg")


def bars(ax, per_variant, transform, color):
    names = list(per_variant)
    for x, name in enumerate(names):
        v = [transform(y) for y in per_variant[name]]
        ax.bar(x, sum(v) / len(v), color=color, edgecolor="#3182bd", alpha=0.8)
        ax.plot([x] * len(v), v, "o", color="#08519c", markersize=2, alpha=0.6)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=35, ha="right", fontsize=7.5)


def plot_scores(rows, out, footer):
    data = values(rows, "accuracy", "scores_cosine")
    if not data:
        return
    fig, axes = plt.subplots(1, len(data), figsize=(5.0 * len(data), 4.4), squeeze=False)
    for ax, (dataset, per_variant) in zip(axes[0], data.items()):
        bars(ax, per_variant, lambda c: max(1 - c, 1e-9), "#9ecae1")
        ax.set_yscale("log")
        ax.axhline(0.01, color="#2ca02c", linestyle="--", linewidth=1, label="cosine 99% (proposal: INT4 smoothed above)")
        ax.axhline(0.15, color="#d62728", linestyle="--", linewidth=1, label="cosine 85% (proposal: INT4 unsmoothed below)")
        ax.set_ylabel("1 - cosine similarity vs float64 (log scale)")
        ax.set_title(dataset, fontsize=10)
        ax.legend(fontsize=6.5, loc="upper left")
    fig.suptitle("Intra-chunk Q K^T after gating (inter-sub-chunk blocks): error of each preset; bar = mean, dots = heads",
                 fontsize=10)
    save(fig, out, "linear_scores", footer)


def plot_output(rows, out, footer):
    output = values(rows, "accuracy", "output_rel_l1")
    state = values(rows, "accuracy", "state_rel_l1")
    if not output:
        return
    fig, axes = plt.subplots(2, len(output), figsize=(5.0 * len(output), 7.6), squeeze=False)
    for col, dataset in enumerate(output):
        for row, (per, what) in enumerate([(output, "output"), (state, "final state")]):
            ax = axes[row][col]
            bars(ax, per[dataset], lambda e: max(e, 1e-12), "#fdae6b" if row == 0 else "#a1d99b")
            ax.set_yscale("log")
            ax.set_ylabel(f"{what}: relative L1 error vs float64 (log scale)")
            ax.set_title(f"{dataset}: {what}", fontsize=10)
    fig.suptitle("Chunkwise GLA output and final state: relative L1 error of each preset; bar = mean, dots = heads",
                 fontsize=10)
    save(fig, out, "linear_output", footer)


def split(variant):
    """'int4-smooth tau=4' -> ('int4-smooth', 4.0); 'bf16 C=128' -> ('bf16', 128.0)."""
    name, _, setting = variant.rpartition(" ")
    return name, float(setting.split("=")[1])


def mean(v):
    return sum(v) / len(v)


def plot_sweeps(rows, out, footer):
    temperature = values(rows, "temperature", "scores_cosine")
    chunk = values(rows, "chunk", "intra_rel_l1")
    panels = [(d, temperature[d], "tau") for d in temperature] + [(d, chunk[d], "C") for d in chunk]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), squeeze=False)
    for ax, (dataset, per_variant, kind) in zip(axes[0], panels):
        lines = defaultdict(list)
        for variant, v in per_variant.items():
            name, x = split(variant)
            lines[name].append((x, mean(v)))
        for name, points in lines.items():
            points.sort()
            xs, ys = zip(*points)
            ys = [max(1 - y, 1e-9) for y in ys] if kind == "tau" else list(ys)
            ax.plot(xs, ys, "o-", label=name, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        if kind == "tau":
            ax.set_xlabel("gate temperature tau (log alpha = log sigmoid(.) / tau; GLA: 16)")
            ax.set_ylabel("scores: 1 - cosine vs float64 (log scale)")
            ax.axhline(0.01, color="gray", linestyle="--", linewidth=1)
            ax.set_title(f"{dataset}: scores vs gate temperature", fontsize=9.5)
        else:
            ax.set_xlabel("chunk size C (tokens; sub-chunk 16)")
            ax.set_ylabel("intra-chunk output: relative L1 vs float64 (log)")
            ax.set_title(f"{dataset}: intra-chunk output vs chunk size", fontsize=9.5)
        ax.legend(fontsize=7)
    fig.suptitle("Sweeps: mean over heads and seeds", fontsize=10)
    save(fig, out, "linear_sweeps", footer)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default="results/linear")
    parser.add_argument("--out", help="folder for the figures (default RESULTS)")
    args = parser.parse_args()
    rows, footer = read(args.results)
    out = args.out or args.results
    os.makedirs(out, exist_ok=True)
    plot_scores(rows, out, footer)
    plot_output(rows, out, footer)
    plot_sweeps(rows, out, footer)


if __name__ == "__main__":
    main()
