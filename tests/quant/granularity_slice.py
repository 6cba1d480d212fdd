#!/usr/bin/env python3
"""Regenerates a slice of the committed granularity results and compares it with them.

usage: granularity_slice.py LOWBIT COMMITTED_DIR OUT_DIR [--heads N]

Reads the configuration of the recorded run from COMMITTED_DIR/granularity.json and runs
`LOWBIT run granularity-qk` with it, but for the first N heads only (default 1), writing to
OUT_DIR. The synthetic generator seeds every head on its own (numerics/synthetic.cpp), so head h of the short
run is head h of the recorded one; the regenerated granularity.json must show the recorded
configuration in every field but the head count, or the slice is not faithful. Then every value
of every regenerated row of granularity.csv must equal, as printed, the committed row of the
same table, method and head; and the committed file must have no other row for those heads.
Last, one value is changed in a copy of the regenerated rows, and the comparison must report it.

Exit 0: equal; 1: a difference (each listed with the numeric difference); 2: bad input.
"""
import argparse
import copy
import csv
import json
import os
import subprocess
import sys

# Fields of the configuration that are not options: what granularity-qk always does.
FIXED = ("rounding", "p_and_v", "reference")
# Fields of the configuration that repeat the synthetic generator's.
DERIVED = ("heads", "tokens", "dim")
KEY = ("table", "method", "head")


def fail(message, code=2):
    print(f"granularity_slice: {message}", file=sys.stderr)
    sys.exit(code)


def flag(name):
    return "--" + name.replace("_", "-")


def options_of(config, heads):
    """The granularity-qk options that reproduce `config` for the first `heads` heads."""
    if "data" in config:
        fail("the recorded run read .npy files (config 'data'); only synthetic runs are regenerated")
    options = []
    for name, value in config.items():
        if name in FIXED or name in DERIVED or name == "synthetic":
            continue
        options += [flag(name), ",".join(value) if isinstance(value, list) else str(value)]
    for name, value in config["synthetic"].items():
        options += synthetic_option(name, str(heads) if name == "heads" else value)
    return options


def synthetic_option(name, value):
    """The options that set one recorded field of the synthetic generator: a flag for a true
    boolean, none for false or null (the generator's default: unset), else the flag and value."""
    if isinstance(value, bool):
        return [flag(name)] if value else []
    if value is None:
        return []
    return [flag(name), value if isinstance(value, str) else json.dumps(value)]


def without_heads(config):
    config = copy.deepcopy(config)
    config.pop("heads", None)
    config.get("synthetic", {}).pop("heads", None)
    return config


def read_rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    reader = csv.DictReader(lines)
    return reader.fieldnames, list(reader)


def differences(committed, regenerated, columns):
    """Every way the regenerated rows differ from the committed rows of the same key."""
    found = []
    for row in regenerated:
        key = tuple(row[k] for k in KEY)
        name = f"{key[0]} / {key[1]} / head {key[2]}"
        if key not in committed:
            found.append(f"{name}: no such row in the committed results")
            continue
        for column in columns:
            if column in KEY or row[column] == committed[key][column]:
                continue
            try:
                delta = f" (difference {float(row[column]) - float(committed[key][column]):+.3g})"
            except ValueError:
                delta = ""
            found.append(f"{name}: {column}: committed {committed[key][column]}, regenerated {row[column]}{delta}")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lowbit", help="the lowbit program")
    parser.add_argument("committed", help="the committed results folder (results/granularity)")
    parser.add_argument("out", help="where the regenerated slice goes")
    parser.add_argument("--heads", type=int, default=1, help="how many heads, from head 0")
    args = parser.parse_args()

    try:
        with open(os.path.join(args.committed, "granularity.json")) as f:
            recorded = json.load(f)["config"]
        columns, committed_rows = read_rows(os.path.join(args.committed, "granularity.csv"))
    except (OSError, ValueError, KeyError) as e:
        fail(f"{args.committed}: {e}")
    if not 1 <= args.heads <= recorded["synthetic"]["heads"]:
        fail(f"--heads {args.heads}: the recorded run has {recorded['synthetic']['heads']} heads")

    command = [args.lowbit, "run", "granularity-qk"] + options_of(recorded, args.heads) + ["--out", args.out]
    print(" ".join(command), flush=True)
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"lowbit run granularity-qk failed (exit {run.returncode}):\n{run.stderr.strip()}", 1)

    with open(os.path.join(args.out, "granularity.json")) as f:
        regenerated = json.load(f)["config"]
    if without_heads(regenerated) != without_heads(recorded):
        fail("the regenerated configuration differs from the recorded one beyond the head count:\n"
             f"recorded    {json.dumps(without_heads(recorded), sort_keys=True)}\n"
             f"regenerated {json.dumps(without_heads(regenerated), sort_keys=True)}", 1)
    regenerated_columns, rows = read_rows(os.path.join(args.out, "granularity.csv"))
    if regenerated_columns != columns:
        fail(f"columns differ: committed {columns}, regenerated {regenerated_columns}", 1)

    committed = {tuple(r[k] for k in KEY): r for r in committed_rows}
    found = differences(committed, rows, columns)
    expected_rows = sum(int(r["head"]) < args.heads for r in committed_rows)
    if len(rows) != expected_rows:
        found.append(f"{len(rows)} rows regenerated, the committed file has {expected_rows} for heads < {args.heads}")
    if found:
        print(f"FAIL: {len(found)} differences from {args.committed}/granularity.csv:")
        print("\n".join(found))
        sys.exit(1)
    values = len(rows) * (len(columns) - len(KEY))
    print(f"{len(rows)} rows ({values} values) of heads 0..{args.heads - 1} equal "
          f"{args.committed}/granularity.csv as printed")

    # The comparison must see a change in the last printed digit.
    changed = copy.deepcopy(rows)
    value = changed[0]["cosine"]
    changed[0]["cosine"] = value[:-1] + ("1" if value[-1] != "1" else "2")
    if not differences(committed, changed, columns):
        fail("the comparison missed a changed digit", 1)
    print(f"and a changed last digit ({value} -> {changed[0]['cosine']}) is reported")


if __name__ == "__main__":
    main()
