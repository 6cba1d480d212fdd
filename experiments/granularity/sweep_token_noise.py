#!/usr/bin/env python3
"""Per-thread vs per-token INT4 (SageAttention2 Table 3) as neighbouring tokens grow alike.

usage: experiments/granularity/sweep_token_noise.py [--lowbit PATH] [--lengths L,L,...] [--out DIR]
                                                     [-- GRANULARITY_QK_OPTIONS...]

Runs `lowbit run granularity-qk --tables smooth` once per --token-noise-length (numerics/synthetic.hpp: the
correlation length, in tokens, of each channel's token-to-token variation; 0 is the default
data) on otherwise default synthetic data, and writes DIR/sweep.csv (one row per length: mean
and worst cosine similarity of per-token, per-thread, per-block and per-tensor, the per-thread
gap in points, the per-thread Q step over the per-token one) and DIR/sweep.md, both headed by
the binary's provenance line and this command. Options after -- go to every granularity-qk run
(e.g. -- --heads 2 --tokens 512 for a quick look). Each default-size run takes about a minute.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

GRANULARITIES = ["per-token", "per-thread", "per-block", "per-tensor"]
TABLE = "granularity, smooth Q+K"


def parse_lengths(text):
    try:
        lengths = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        sys.exit(f"--lengths {text!r}: expected numbers separated by commas")
    if not lengths or any(v < 0 for v in lengths):
        sys.exit(f"--lengths {text!r}: expected one or more lengths >= 0")
    return lengths


def run_one(lowbit, length, extra, folder):
    command = [lowbit, "run", "granularity-qk", "--tables", "smooth", "--token-noise-length", f"{length:g}", "--out", folder] + extra
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {done.returncode}):\n{done.stderr.strip()}")
    with open(os.path.join(folder, "granularity.json")) as f:
        result = json.load(f)
    by_method = {s["method"]: s for s in result["summary"] if s["table"] == TABLE}
    missing = [m for m in GRANULARITIES if m not in by_method]
    if missing:
        sys.exit(f"{folder}/granularity.json: no {', '.join(missing)} in table '{TABLE}'")
    with open(os.path.join(folder, "summary.csv")) as f:
        provenance = f.readline().strip()
    return by_method, provenance


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[: argv.index("--")]
    usage = __doc__.split("\n\n")[1].removeprefix("usage: ")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], usage=usage)
    parser.add_argument("--lowbit", default="build/experiments/lowbit", help="the lowbit program")
    parser.add_argument("--lengths", default="0,1,2,4,8,16,32,64,128,256",
                        help="token noise lengths (tokens), comma-separated")
    parser.add_argument("--out", default="build/results/granularity/token-noise",
                        help="folder for sweep.csv and sweep.md (the committed record: results/granularity/token-noise)")
    args = parser.parse_args(argv)
    if not os.access(args.lowbit, os.X_OK):
        sys.exit(f"{args.lowbit}: not an executable (build it: cmake --build build --target lowbit)")
    lengths = parse_lengths(args.lengths)
    command = " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])

    rows, provenance = [], None
    with tempfile.TemporaryDirectory() as scratch:
        for i, length in enumerate(lengths):
            by_method, provenance = run_one(args.lowbit, length, extra, os.path.join(scratch, str(i)))
            token, thread = by_method["per-token"], by_method["per-thread"]
            row = {"token_noise_length": length}
            for m in GRANULARITIES:
                row[f"{m}_mean"] = 100 * by_method[m]["mean"]["cosine"]
                row[f"{m}_worst"] = 100 * by_method[m]["worst"]["cosine"]
            row["gap_mean"] = row["per-token_mean"] - row["per-thread_mean"]
            row["gap_worst"] = row["per-token_worst"] - row["per-thread_worst"]
            row["q_step_ratio"] = thread["mean_q_scale"] / token["mean_q_scale"]
            rows.append(row)
            print(f"[{i + 1}/{len(lengths)}] token noise length {length:g}: per-token {row['per-token_mean']:.2f}%, "
                  f"per-thread {row['per-thread_mean']:.2f}% (gap {row['gap_mean']:.2f} points)", flush=True)

    os.makedirs(args.out, exist_ok=True)
    columns = list(rows[0])
    with open(os.path.join(args.out, "sweep.csv"), "w") as f:
        f.write(f"{provenance}\n# command: {command}\n# cosine similarity in percent; gap = per-token - per-thread\n")
        f.write(",".join(columns) + "\n")
        for r in rows:
            f.write(",".join(f"{r[c]:g}" if c == "token_noise_length" else f"{r[c]:.4f}" for c in columns) + "\n")
    with open(os.path.join(args.out, "sweep.md"), "w") as f:
        f.write(f"<!-- {provenance.lstrip('# ')} -->\n<!-- command: {command} -->\n\n")
        f.write("| token noise length | per-token | per-thread | gap (points) | per-token worst | per-thread worst | "
                "gap worst | per-block | per-tensor | Q step / per-token |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['token_noise_length']:g} | {r['per-token_mean']:.2f}% | {r['per-thread_mean']:.2f}% | "
                    f"{r['gap_mean']:.2f} | {r['per-token_worst']:.2f}% | {r['per-thread_worst']:.2f}% | "
                    f"{r['gap_worst']:.2f} | {r['per-block_mean']:.2f}% | {r['per-tensor_mean']:.2f}% | "
                    f"{r['q_step_ratio']:.3f} |\n")
    print(f"wrote {args.out}/sweep.csv, {args.out}/sweep.md")


if __name__ == "__main__":
    main()
