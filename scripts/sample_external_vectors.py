#!/usr/bin/env python3
"""The sample of Khattak & Mikaitis' tensor-core tiles kept in verification/vectors/external/.

usage: scripts/sample_external_vectors.py SHARED_DIR OUT_DIR [--every 10]

SHARED_DIR holds their 48 data sets converted to our vector format (`<GPU>-<input>-<output>.jsonl.gz`,
2,500 tiles each; ../shared/vectors/external/). Each output file keeps every tenth tile (rows 1,
11, 21, ... of the set), byte for byte, except the A2's: the conversion labels them `arch` sm_80
with `gpu_arch` sm_86, and the registry keys models by the GPU's architecture, so they get
`"arch": "sm_86"`. Output is gzip with a fixed header (same input, same bytes).
"""
import argparse
import gzip
import json
import pathlib
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shared_dir", type=pathlib.Path)
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("--every", type=int, default=10, help="keep tiles 0, N, 2N, ... of each set")
    args = parser.parse_args()
    files = sorted(args.shared_dir.glob("*.jsonl.gz"))
    if not files:
        sys.exit(f"sample_external_vectors: no *.jsonl.gz in {args.shared_dir}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for path in files:
        with gzip.open(path, "rt") as f:
            lines = [line for line in f if line.strip()]
        kept = []
        for line in lines[:: args.every]:
            tile = json.loads(line)
            if tile.get("gpu_arch") == "sm_86" and tile["arch"] == "sm_80":
                line = line.replace('"arch":"sm_80"', '"arch":"sm_86"', 1)
                if json.loads(line)["arch"] != "sm_86":
                    sys.exit(f"sample_external_vectors: {path.name}: cannot relabel the arch of {line[:80]}")
            kept.append(line)
        out = args.out_dir / path.name
        with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as z:
            z.write("".join(kept).encode())
        print(f"{path.name}: {len(kept)} of {len(lines)} tiles")


if __name__ == "__main__":
    main()
