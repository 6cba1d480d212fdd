#!/usr/bin/env python3
"""The end-to-end figure: a model's perplexity, argmax agreement and KL divergence per attention variant.

usage: plots/plot_end_to_end.py DIR

Reads DIR/metrics.csv (model, text, preset, metric, value after its provenance and command lines, written by
experiments/end_to_end/smollm2_end_to_end.py) and writes DIR/end_to_end.png and .svg: one row of three panels per
model (perplexity, with the fp32 variant's as a dashed line; argmax agreement with the fp32 variant, %; mean
KL(p_fp32 || p_variant), nats, on a log axis), one horizontal bar per variant and text. The footer carries the
run's provenance and command. Exit status 77 where matplotlib is missing (plot_run.py's helpers).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_run import COLORS, footer, ordered, plt, read_csv, save  # noqa: E402  (exits 77 without matplotlib)

COLUMNS = ["model", "text", "preset", "metric", "value"]
PANELS = [("perplexity", "perplexity", 1.0), ("argmax_agreement", "argmax agreement with fp32 (%)", 100.0),
          ("kl", "KL(fp32 || variant), nats", 1.0)]
REFERENCE = "fp32"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    path = os.path.join(out_dir, "metrics.csv")
    if not os.path.exists(path):
        sys.exit(f"plot_end_to_end.py: {path} not found (experiments/end_to_end/smollm2_end_to_end.py --out {out_dir})")
    rows, provenance = read_csv(path)
    if not rows or list(rows[0]) != COLUMNS:
        sys.exit(f"plot_end_to_end.py: {path}: no rows, or columns other than {COLUMNS}")
    value = {(r["model"], r["text"], r["preset"], r["metric"]): float(r["value"]) for r in rows}
    models = ordered(r["model"] for r in rows)
    texts = ordered(r["text"] for r in rows)
    variants = ordered(r["preset"] for r in rows)
    n, width = len(variants), 0.8 / len(texts)
    fig, axes = plt.subplots(len(models), len(PANELS), figsize=(13, 1.2 + len(models) * (0.3 * n * len(texts) ** 0.5 + 1)),
                             squeeze=False)
    for i, model in enumerate(models):
        for j, (metric, label, factor) in enumerate(PANELS):
            ax = axes[i][j]
            for t, text in enumerate(texts):
                ys = [y + (t - (len(texts) - 1) / 2) * width for y in range(n)]
                xs = [value.get((model, text, v, metric), float("nan")) * factor for v in variants]
                if metric == "kl":  # the reference's own KL is 0: no bar on a log axis
                    xs = [x if x > 0 else float("nan") for x in xs]
                ax.barh(ys, xs, height=width, color=COLORS[t % len(COLORS)], alpha=0.7, label=f"text: {text}")
                if metric == "perplexity":  # differences of 0.1% do not show as lengths
                    for x, y in zip(xs, ys):
                        if math.isfinite(x):  # a variant this model was not run with has no bar
                            ax.text(x, y, f" {x:.2f}", va="center", fontsize=5.5)
                if metric == "perplexity" and (model, text, REFERENCE, metric) in value:
                    ax.axvline(value[(model, text, REFERENCE, metric)], color=COLORS[t % len(COLORS)], ls="--", lw=0.8)
            if metric == "kl":
                ax.set_xscale("log")
            elif metric == "perplexity":
                finite = [value[k] for k in value if k[0] == model and k[3] == metric]
                lo, hi = min(finite), max(finite)
                if hi > 20 * lo:  # a collapsed variant (Qwen's INT4 without smoothing: millions): log axis
                    ax.set_xscale("log")
                    ax.set_xlim(lo / 2, hi * 20)
                else:
                    ax.set_xlim(lo - (hi - lo) * 0.3 - 0.05 * lo, hi + (hi - lo) * 0.15 + 0.01 * hi)
            else:
                finite = [value[k] * factor for k in value if k[0] == model and k[3] == metric]
                ax.set_xlim(min(finite) - (100 - min(finite)) * 0.1 - 0.1, 100.0)
            ax.set_yticks(range(n))
            ax.set_yticklabels(variants if j == 0 else [], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel(label, fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
            ax.grid(axis="x", alpha=0.3)
            if j == 1:
                ax.set_title(f"model: {model}", fontsize=9)
            if i == 0 and j == 0:
                fig.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="upper right", ncol=len(texts))
    fig.suptitle("every layer's attention an emulated pipeline: next-token metrics against the fp32 pipeline",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    footer(fig, provenance[:2], "  |  ".join(provenance[2:]))  # a second model's lines (tagged) above the first's
    save(fig, out_dir, "end_to_end")


if __name__ == "__main__":
    main()
