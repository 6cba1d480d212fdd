#!/usr/bin/env python3
"""SageAttention2's Tables 3 and 9 (lowbit run granularity-qk) on the captured SmolLM2 layers and synthetic presets.

usage: experiments/data/granularity_real.py [--lowbit PATH] [--dir DIR] [--presets NAME,...] [--out DIR]
                                            [--scratch DIR] [-- GRANULARITY_QK_OPTIONS...]

For each layerLL_{q,k,v}.npy in DIR ([1, heads, tokens, d], as capture_smollm2.py writes them),
repeats each key and value head for the query heads that attend with it (GQA: query head h uses
key head h // (query heads / key heads)), writes [heads, tokens, d] float32 copies to --scratch
(default build/smollm2-mha, so the runs' recorded commands name files this script remakes) and runs
`lowbit run granularity-qk --data` on them (non-causal attention, as granularity-qk computes it; the
model itself is causal); then runs it on each synthetic --presets at the
preset's own size. Each run's files go to OUT/NAME/ (layerLL or synthetic-PRESET); OUT/summary.md
and OUT/summary.csv put the mean and worst cosine similarity of every method side by side, with
"real, all layers" pooling the heads of every layer. Options after -- go to every run.
"""
import argparse
import csv
import os
import re
import subprocess
import sys

import numpy as np

TABLES = ["smoothing methods, per-thread", "granularity, smooth Q+K"]


def run(lowbit, args, folder):
    command = [lowbit, "run", "granularity-qk", "--tables", "methods,smooth", "--out", folder] + args
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {done.returncode}):\n{done.stderr.strip()}")
    rows = []
    with open(os.path.join(folder, "granularity.csv")) as f:
        provenance = f.readline().strip()
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            rows.append(row)
    return rows, provenance


def mha_copies(dir_, layer, scratch):
    """The layer's Q, K, V as [heads, tokens, d] float32, K and V repeated per query head."""
    arrays = {}
    for name in "qkv":
        path = os.path.join(dir_, f"layer{layer}_{name}.npy")
        a = np.load(path)
        if a.ndim != 4 or a.shape[0] != 1:
            sys.exit(f"{path}: shape {a.shape}, expected [1, heads, tokens, d]")
        arrays[name] = a[0].astype(np.float32)
    group = arrays["q"].shape[0] // arrays["k"].shape[0]
    paths = []
    for name in "qkv":
        a = arrays[name] if name == "q" else np.repeat(arrays[name], group, axis=0)
        paths.append(os.path.join(scratch, f"layer{layer}_{name}.npy"))
        np.save(paths[-1], a)
    return paths


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[: argv.index("--")]
    usage = __doc__.split("\n\n")[1].removeprefix("usage: ")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], usage=usage)
    parser.add_argument("--lowbit", default="build/experiments/lowbit", help="the lowbit program")
    parser.add_argument("--dir", default="experiments/data/smollm2-135m", help="folder of layerLL_{q,k,v}.npy")
    parser.add_argument("--presets", default="smollm2", help="synthetic presets, comma-separated (empty: none)")
    parser.add_argument("--out", default="build/results/data-granularity", help="output folder")
    parser.add_argument("--scratch", default="build/smollm2-mha", help="folder for the [heads, tokens, d] copies")
    args = parser.parse_args(argv)
    if not os.access(args.lowbit, os.X_OK):
        sys.exit(f"{args.lowbit}: not an executable (build it: cmake --build build --target lowbit)")
    layers = sorted(m.group(1) for f in os.listdir(args.dir) if (m := re.fullmatch(r"layer(\d+)_q\.npy", f)))
    if not layers:
        sys.exit(f"{args.dir}: no layerLL_q.npy files")
    command = " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])

    results = {}  # dataset -> rows
    provenance = None
    os.makedirs(args.scratch, exist_ok=True)
    for layer in layers:
        name = f"layer{layer}"
        print(f"{name} ...", file=sys.stderr)
        results[name], provenance = run(args.lowbit, ["--data", *mha_copies(args.dir, layer, args.scratch)] + extra,
                                        os.path.join(args.out, name))
    for preset in filter(None, args.presets.split(",")):
        print(f"synthetic {preset} ...", file=sys.stderr)
        results[f"synthetic-{preset}"], _ = run(args.lowbit, ["--preset", preset] + extra,
                                                os.path.join(args.out, f"synthetic-{preset}"))

    pooled = [row for name in results if name.startswith("layer") for row in results[name]]
    datasets = ["real, all layers"] + list(results)
    rows_of = {"real, all layers": pooled, **results}
    methods = []
    for row in pooled:
        if row["table"] in TABLES and (row["table"], row["method"]) not in methods:
            methods.append((row["table"], row["method"]))

    def cosines(rows, table, method):
        return [float(r["cosine"]) for r in rows if r["table"] == table and r["method"] == method]

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.csv"), "w", newline="") as f:
        f.write(f"{provenance}\n# command: {command}\n")
        w = csv.writer(f)
        w.writerow(["table", "method", "dataset", "heads", "cosine_mean", "cosine_worst"])
        for table, method in methods:
            for d in datasets:
                c = cosines(rows_of[d], table, method)
                w.writerow([table, method, d, len(c), f"{np.mean(c):.8f}", f"{np.min(c):.8f}"])
    md = [f"<!-- {provenance} -->", f"<!-- command: {command} -->", ""]
    for table in TABLES:
        md += [f"### INT4 Q, K (P, V float64): {table}; cosine similarity, mean over heads (worst head)", "",
               "| Method | " + " | ".join(datasets) + " |", "|---|" + "---|" * len(datasets)]
        for t, method in methods:
            if t != table:
                continue
            cells = []
            for d in datasets:
                c = cosines(rows_of[d], table, method)
                cells.append(f"{100 * np.mean(c):.2f}% ({100 * np.min(c):.2f}%)")
            md.append(f"| {method} | " + " | ".join(cells) + " |")
        md.append("")
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    print(f"wrote {args.out}/summary.md, summary.csv and one folder per dataset", file=sys.stderr)


if __name__ == "__main__":
    main()
