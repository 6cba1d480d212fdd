#!/usr/bin/env python3
"""Writes the manifest of the recorded MMA vector files: the number of tiles (lines) of every
*.jsonl.gz / *.jsonl file under verification/vectors/, one file a line, sorted by path.

usage: scripts/vector_manifest.py [DIR] > DIR/manifest.txt      (DIR: verification/vectors)

The ctests verify_vectors_* take their files and expected tile counts from the manifest, and
test_mma_vectors checks it against the files both ways, so a deleted line or file fails a test.
Rewrite it only when vectors are recorded on purpose.
"""
import gzip
import os
import sys


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "verification/vectors"
    rows = []
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".jsonl.gz") or name.endswith(".jsonl"):
                path = os.path.join(folder, name)
                with (gzip.open(path) if name.endswith(".gz") else open(path, "rb")) as f:
                    rows.append((os.path.relpath(path, root), f.read().count(b"\n")))
    if not rows:
        sys.exit(f"{root}: no *.jsonl.gz or *.jsonl files")
    print("# Tiles (lines) of each recorded vector file under verification/vectors/.")
    print("# Written by scripts/vector_manifest.py > verification/vectors/manifest.txt; checked by test_mma_vectors.")
    for path, lines in sorted(rows):
        print(f"{lines} {path}")


if __name__ == "__main__":
    main()
