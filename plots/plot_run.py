#!/usr/bin/env python3
"""The plots of one `lowbit run NAME` results folder (what `lowbit plot DIR` runs).

usage: plots/plot_run.py DIR

Reads DIR/metrics.csv, summary.csv and distribution.csv (written by every experiment) and the
files some experiments add, and writes PNG and SVG files into DIR:
  metrics.*         cosine similarity, relative L1 and RMSE per variant and dataset: a bar for the
                    mean over heads (and layers), a dot per head
  error_hist.*      the per-element error distribution of each variant, per dataset: |error| over
                    the RMS of its head's float64 output (so heads and layers of different scales
                    mix), as the fraction of output elements per 0.1-decade bin
  error_cdf.*       the same as cumulative distributions
and, by experiment:
  smoothing         heatmaps.* (|Q| and |K| per channel and token before and after smoothing, the
                    papers' Figures 4 and 5) and int4_codes.* (INT4 codes with and without smoothing)
  accumulator       error_vs_length.* (error against the number of keys)
  attribution       attribution.* (each stage's share: alone, Shapley, removed)
  backward          gradients.* (dQ, dK, dV per variant)
Every figure carries the results' provenance line (git SHA, date, machine) and command in a
footer. Exit status 77 where matplotlib is missing.
"""
import csv
import json
import math
import os
import sys
from collections import OrderedDict, defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from palette_png import save_png
except ImportError as e:  # the caller reports it as "no plots"
    print(f"plot_run.py: {e}", file=sys.stderr)
    sys.exit(77)

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def read_csv(path):
    """Rows (dicts) and the provenance comment lines of one of our CSV files."""
    provenance, lines = [], []
    with open(path, newline="") as f:
        for line in f:
            (provenance if line.startswith("#") else lines).append(line[1:].strip() if line.startswith("#") else line)
    return list(csv.DictReader(lines)), provenance


def footer(fig, provenance, extra=""):
    text = "  |  ".join(provenance[:2])
    if extra:
        text = extra + "\n" + text
    fig.text(0.005, 0.003, text, fontsize=6, color="0.35", ha="left", va="bottom", wrap=True)


def save(fig, out_dir, stem):
    save_png(fig, os.path.join(out_dir, f"{stem}.png"), dpi=130)
    fig.savefig(os.path.join(out_dir, f"{stem}.svg"), dpi=130)
    plt.close(fig)
    print(os.path.join(out_dir, f"{stem}.png"))


def ordered(values):
    return list(OrderedDict.fromkeys(values))


# ---- every experiment ------------------------------------------------------------------------------

METRICS = [("cosine", "cosine similarity (%)", 100.0), ("rel_l1", "relative L1 distance (1)", 1.0),
           ("rmse", "RMSE (units of V)", 1.0)]


def plot_metrics(out_dir, experiment, rows, provenance, variants=None):
    datasets = ordered(r["dataset"] for r in rows)
    variants = variants or ordered(r["variant"] for r in rows)
    values = defaultdict(list)
    for r in rows:
        values[(r["variant"], r["dataset"], r["metric"])].append(float(r["value"]))
    n = len(variants)
    fig, axes = plt.subplots(len(datasets), len(METRICS), figsize=(13, 0.8 + len(datasets) * (0.32 * n + 0.9)),
                             squeeze=False)
    for i, d in enumerate(datasets):
        for j, (metric, label, factor) in enumerate(METRICS):
            ax = axes[i][j]
            ys = np.arange(n)
            means = [np.mean(values[(v, d, metric)]) * factor if values[(v, d, metric)] else np.nan for v in variants]
            color = COLORS[i % len(COLORS)]
            if metric == "cosine":  # no bars: a cosine axis has no zero to start them from
                ax.plot(means, ys, "D", ms=5, color=color, label="mean over heads", zorder=3)
            else:
                ax.barh(ys, means, color=color, alpha=0.45, height=0.7, label="mean over heads")
            for y, v in zip(ys, variants):
                pts = np.array(values[(v, d, metric)]) * factor
                ax.plot(pts, np.full(len(pts), y), "o", ms=2.2, color="0.15", alpha=0.6,
                        label="one head" if y == 0 else None)
            finite = [x * factor for v in variants for x in values[(v, d, metric)] if math.isfinite(x)]
            if finite:
                lo, hi = min(finite), max(finite)
                pad = (hi - lo) * 0.08 or abs(hi) * 0.01 or 1e-6
                ax.set_xlim(lo - pad if metric == "cosine" else 0, min(hi + pad, 100.0 + pad / 4) if metric == "cosine" else hi + pad)
            ax.set_yticks(ys)
            ax.set_yticklabels(variants if j == 0 else [], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel(label, fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
            ax.grid(axis="x", alpha=0.3)
            if j == 1:
                ax.set_title(f"dataset: {d}", fontsize=9)
            if i == 0 and j == 0:
                ax.legend(fontsize=6, loc="best")
    fig.suptitle(f"{experiment}: attention-output error against float64, per variant", fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    footer(fig, provenance)
    save(fig, out_dir, "metrics")


def read_distribution(out_dir):
    rows, provenance = read_csv(os.path.join(out_dir, "distribution.csv"))
    hist = defaultdict(dict)  # (variant, dataset) -> {log10_low: count}
    for r in rows:
        hist[(r["variant"], r["dataset"])][r["log10_low"]] = int(r["count"])
    return hist, provenance


def plot_distributions(out_dir, experiment, provenance, variants=None):
    hist, _ = read_distribution(out_dir)
    datasets = ordered(d for _, d in hist)
    variants = variants or ordered(v for v, _ in hist)
    # The legend below the plots: as many columns as its longest name lets fit the width, and the
    # figure as tall as its rows need.
    width = 5.2 * len(datasets)
    named = [v for v in variants if any(hist.get((v, d)) for d in datasets)]
    columns = max(1, min(4, int(width // (0.045 * max((len(v) for v in named), default=1) + 0.6))))
    legend_rows = math.ceil(len(named) / columns)
    height = 3.8 + 0.145 * legend_rows
    for kind in ("hist", "cdf"):
        fig, axes = plt.subplots(1, len(datasets), figsize=(width, height), squeeze=False)
        for i, d in enumerate(datasets):
            ax = axes[0][i]
            for k, v in enumerate(variants):
                h = hist.get((v, d))
                if not h:
                    continue
                total = sum(h.values())
                bins = sorted((float(b), c) for b, c in h.items() if b not in ("-inf",) and math.isfinite(float(b))
                              and float(b) < 3)
                if not bins:
                    continue
                lows = np.array([b for b, _ in bins])
                counts = np.array([c for _, c in bins], dtype=float) / total
                style = dict(color=COLORS[k % len(COLORS)], lw=1.2, label=v,
                             ls="-" if k < len(COLORS) else "--")
                if kind == "hist":
                    ax.step(lows, counts, where="post", **style)
                    ax.set_ylabel("fraction of output elements per 0.1 decade", fontsize=8)
                else:
                    below = h.get("-inf", 0) / total
                    ax.plot(np.concatenate([lows, [lows[-1] + 0.1]]),
                            below + np.concatenate([[0], np.cumsum(counts)]), **style)
                    ax.set_ylabel("fraction of output elements with |error| < x", fontsize=8)
                    ax.set_ylim(0, 1.01)
            ax.set_xlabel("log10 (|emulated - float64| / RMS of the head's float64 output)", fontsize=8)
            ax.set_title(f"dataset: {d}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
        legend = {}  # every dataset's lines, a name once
        for ax in axes[0]:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                legend.setdefault(label, handle)
        fig.legend(list(legend.values()), list(legend), fontsize=6.5, loc="lower center", ncol=columns,
                   bbox_to_anchor=(0.5, 0.15 / height))
        what = "histogram" if kind == "hist" else "cumulative distribution"
        fig.suptitle(f"{experiment}: per-element error, {what} (all heads)", fontsize=11)
        fig.tight_layout(rect=(0, (0.3 + 0.145 * legend_rows) / height, 1, 1 - 0.25 / height))
        footer(fig, provenance)
        save(fig, out_dir, f"error_{kind}")


# ---- by experiment -----------------------------------------------------------------------------------


def experiment_plots(out_dir, experiment, provenance):
    plotter = {"smoothing": plot_smoothing, "accumulator": plot_accumulator, "attribution": plot_attribution,
               "backward": plot_backward}.get(experiment)
    if plotter:
        plotter(out_dir, experiment, provenance)


def plot_smoothing(out_dir, experiment, provenance):
    maps = os.path.join(out_dir, "heatmaps.json")
    if os.path.exists(maps):
        with open(maps) as f:
            index = json.load(f)
        for entry in index:
            fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
            for row, tensor in enumerate(("Q", "K")):
                maps = {stage: np.load(os.path.join(out_dir, entry[f"{tensor.lower()}_{stage}"]))
                        for stage in ("before", "after")}
                vmax = max(float(m.max()) for m in maps.values())  # one color scale per tensor: compare
                for col, stage in enumerate(("before", "after")):
                    a = maps[stage]
                    ax = axes[row][col]
                    per = entry["tokens_per_column"]
                    im = ax.imshow(a.T, aspect="auto", cmap="viridis", interpolation="nearest", vmin=0, vmax=vmax,
                                   extent=(entry["first_token"], entry["first_token"] + a.shape[0] * per, a.shape[1], 0))
                    ax.set_xlabel(f"token (each column: the largest |x| of {per} tokens)", fontsize=8)
                    ax.set_ylabel("channel", fontsize=8)
                    what = "raw" if stage == "before" else entry[f"{tensor.lower()}_smoothing"]
                    ax.set_title(f"|{tensor}|, {what}", fontsize=9)
                    ax.tick_params(labelsize=7)
                    fig.colorbar(im, ax=ax).set_label(f"|{tensor}| (units of {tensor})", fontsize=7)
            fig.suptitle(f"|Q| and |K| per channel and token before and after smoothing: {entry['dataset']}, "
                         f"head {entry['head']}", fontsize=11)
            fig.tight_layout(rect=(0, 0.04, 1, 0.96))
            footer(fig, provenance)
            save(fig, out_dir, f"heatmaps_{entry['dataset']}")
    codes_path = os.path.join(out_dir, "int4_codes.csv")
    if os.path.exists(codes_path):
        rows, _ = read_csv(codes_path)
        datasets = ordered(r["dataset"] for r in rows)
        variants = ordered(r["variant"] for r in rows)
        fig, axes = plt.subplots(2, len(datasets), figsize=(5 * len(datasets), 7), squeeze=False)
        for i, d in enumerate(datasets):
            for row, tensor in enumerate(("Q", "K")):
                ax = axes[row][i]
                width = 0.8 / len(variants)
                for k, v in enumerate(variants):
                    pts = [(int(r["code"]), int(r["count"])) for r in rows
                           if r["dataset"] == d and r["variant"] == v and r["tensor"] == tensor]
                    if not pts:
                        continue
                    codes = np.array([c for c, _ in pts])
                    counts = np.array([n for _, n in pts], dtype=float)
                    ax.bar(codes + (k - (len(variants) - 1) / 2) * width, counts / counts.sum(), width=width,
                           color=COLORS[k % len(COLORS)], label=v)
                ax.set_xticks(range(-7, 8))
                ax.set_xlabel(f"INT4 code of {tensor} (per-thread scales)", fontsize=8)
                ax.set_ylabel("fraction of elements", fontsize=8)
                ax.set_title(f"{tensor}, dataset: {d}", fontsize=9)
                ax.tick_params(labelsize=7)
                ax.legend(fontsize=7)
                ax.grid(axis="y", alpha=0.3)
        fig.suptitle("INT4 codes of Q and K with and without smoothing (the paper's Figure 5)", fontsize=11)
        fig.tight_layout(rect=(0, 0.04, 1, 0.96))
        footer(fig, provenance)
        save(fig, out_dir, "int4_codes")


def plot_accumulator(out_dir, experiment, provenance):
    rows, _ = read_csv(os.path.join(out_dir, "summary.csv"))
    series = defaultdict(list)  # (dataset, variant without the length) -> [(keys, rel_l1, worst)]
    # --device gpu: a variant's GPU rows ("NAME (GPU)") are drawn only where it has no emulated ones (--no-check).
    plain = {(r["dataset"], r["variant"]) for r in rows}
    for r in rows:
        variant = r["variant"]
        if variant.endswith(" (GPU)"):
            if (r["dataset"], variant[: -len(" (GPU)")]) in plain:
                continue
            variant = variant[: -len(" (GPU)")]
        if " @ " not in variant:
            continue
        name, keys = variant.rsplit(" @ ", 1)
        series[(r["dataset"], name)].append((int(keys.split()[0]), float(r["rel_l1_mean"]), float(r["rmse_mean"])))
    datasets = ordered(d for d, _ in series)
    names = ordered(n for _, n in series)
    # One colour per accumulator, the line style says smooth V (12 series outrun the palette).
    accumulators = ordered(n.rsplit(", smooth V", 1)[0] for n in names)
    fig, axes = plt.subplots(2, len(datasets), figsize=(5.5 * len(datasets), 7.5), squeeze=False)
    for i, d in enumerate(datasets):
        for row, (col, label) in enumerate(((1, "relative L1 distance (1), mean over heads"),
                                             (2, "RMSE (units of V), mean over heads"))):
            ax = axes[row][i]
            for n in names:
                pts = sorted(series.get((d, n), []))
                if not pts:
                    continue
                ax.plot([p[0] for p in pts], [p[col] for p in pts], marker="o", ms=3, color=COLORS[accumulators.index(n.rsplit(", smooth V", 1)[0]) % len(COLORS)],
                        ls="-" if "smooth V on" not in n else "--", label=n)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("keys attended per query (sequence length)", fontsize=8)
            ax.set_ylabel(label, fontsize=8)
            ax.set_title(f"dataset: {d}", fontsize=9)
            ax.grid(alpha=0.3, which="both")
            ax.tick_params(labelsize=7)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=3, bbox_to_anchor=(0.5, 0.035))
    fig.suptitle("P V accumulation error against sequence length (SageAttention2 §3.4)", fontsize=11)
    fig.tight_layout(rect=(0, 0.12, 1, 0.95))
    footer(fig, provenance)
    save(fig, out_dir, "error_vs_length")


def plot_attribution(out_dir, experiment, provenance):
    rows, _ = read_csv(os.path.join(out_dir, "attribution.csv"))
    groups = ordered((r["pipeline"], r["dataset"]) for r in rows)
    metric = "mse"
    fig, axes = plt.subplots(1, len(groups), figsize=(4.6 * len(groups), 4.8), squeeze=False)
    for i, (pipeline, dataset) in enumerate(groups):
        ax = axes[0][i]
        mine = [r for r in rows if r["pipeline"] == pipeline and r["dataset"] == dataset and r["metric"] == metric]
        factors = [r["factor"] for r in mine]
        total = float(mine[0]["total"]) if mine else 1.0
        ys = np.arange(len(factors))
        for k, (col, label) in enumerate((("added", "alone (injected into exact)"), ("shapley", "Shapley value"),
                                          ("removed", "removed from the full pipeline"))):
            vals = np.array([float(r[col]) for r in mine]) / total * 100
            ax.barh(ys + (k - 1) * 0.27, vals, height=0.27, color=COLORS[k], label=label)
        ax.set_yticks(ys)
        ax.set_yticklabels(factors, fontsize=8)
        ax.invert_yaxis()
        ax.axvline(0, color="0.3", lw=0.6)
        ax.set_xlabel("share of the output's mean squared error (%)", fontsize=8)
        ax.set_title(f"{pipeline} on {dataset}\n(MSE {total:.3g}, units of V squared)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=7)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=3, bbox_to_anchor=(0.5, 0.035))
    fig.suptitle("Where the error comes from: each stage's share of the output error", fontsize=11)
    fig.tight_layout(rect=(0, 0.1, 1, 0.93))
    footer(fig, provenance)
    save(fig, out_dir, "attribution")


def plot_backward(out_dir, experiment, provenance):
    rows, _ = read_csv(os.path.join(out_dir, "summary.csv"))
    datasets = ordered(r["dataset"] for r in rows)
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4.2), squeeze=False)
    for i, d in enumerate(datasets):
        ax = axes[0][i]
        mine = [r for r in rows if r["dataset"] == d]
        variants = ordered(r["variant"].split(": ")[0] for r in mine)
        grads = ordered(r["variant"].split(": ")[1] for r in mine)
        width = 0.8 / len(variants)
        for k, v in enumerate(variants):
            vals = [next((float(r["cosine_mean"]) * 100 for r in mine if r["variant"] == f"{v}: {g}"), np.nan) for g in grads]
            ax.bar(np.arange(len(grads)) + (k - (len(variants) - 1) / 2) * width, vals, width=width,
                   color=COLORS[k % len(COLORS)], label=v)
        ax.set_xticks(range(len(grads)))
        ax.set_xticklabels(grads)
        lo = min(float(r["cosine_mean"]) * 100 for r in mine)
        ax.set_ylim(max(0, lo - (100 - lo) * 0.3), 100)
        ax.set_ylabel("cosine similarity with float64 (%), mean over heads", fontsize=8)
        ax.set_title(f"dataset: {d}", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("SageBwd's gradients against float64 (SageAttention3 Table 1c)", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.93))
    footer(fig, provenance)
    save(fig, out_dir, "gradients")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    path = os.path.join(out_dir, "metrics.csv")
    if not os.path.exists(path):
        sys.exit(f"plot_run.py: {path} not found (lowbit run NAME --out {out_dir} writes it)")
    rows, provenance = read_csv(path)
    if not rows:
        sys.exit(f"plot_run.py: {path} has no rows")
    experiment = rows[0]["experiment"]
    shown = None
    plot_index = os.path.join(out_dir, "plot_variants.json")
    if os.path.exists(plot_index):  # experiments with many variants name the ones worth a bar
        with open(plot_index) as f:
            shown = json.load(f)
    plot_metrics(out_dir, experiment, rows, provenance, shown)
    plot_distributions(out_dir, experiment, provenance, shown)
    experiment_plots(out_dir, experiment, provenance)


if __name__ == "__main__":
    main()
