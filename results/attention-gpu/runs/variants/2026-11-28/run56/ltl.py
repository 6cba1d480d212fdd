#!/usr/bin/env python3
"""Light block timelines of the d = 128 non-causal kernel (variants ltlold and ltlent, run56).

The file format of run52's itl.py, with three %clock stamps a unit: slot 0 just before its KV loop,
slot kv at its loop's end, slot kv + 1 at the end of its rows (none inside the loop). Prints, per
file, medians and means (cycles) of: a block's entry to its first unit's loop start and to its last
unit's, a unit's loop, the block's last loop end to its last end of rows, and the block's period on
its SM (its entry to the next block's entry there).

    python3 ltl.py FILE.bin[.gz] ...
"""
import gzip
import struct
import sys
from collections import defaultdict
from statistics import mean, median

import numpy as np

M = 1 << 32


def load(path):
    raw = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    launched, slots, kv, per_head = struct.unpack("4i", raw[:16])
    o = 16
    smid = np.frombuffer(raw, np.uint32, launched, o); o += 4 * launched
    block = np.frombuffer(raw, np.uint64, 4 * launched, o).reshape(launched, 4).astype(np.int64); o += 32 * launched
    data = np.frombuffer(raw, np.uint32, launched * 3 * slots, o).reshape(launched, 3, slots).astype(np.int64)
    return launched, kv, smid, block, data


def summarize(path):
    launched, kv, smid, block, data = load(path)
    first, last, loops, tails, by_sm = [], [], [], [], defaultdict(list)
    for b in range(launched):
        live = [u for u in range(3) if data[b, u, 0] and data[b, u, kv] and data[b, u, kv + 1]]
        if not live:
            continue
        entry = int(block[b, 1]) % M
        starts = [(int(data[b, u, 0]) - entry) % M for u in live]
        first.append(min(starts)), last.append(max(starts))
        loops += [(int(data[b, u, kv]) - int(data[b, u, 0])) % M for u in live]
        tails.append((max(int(data[b, u, kv + 1]) for u in live) - max(int(data[b, u, kv]) for u in live)) % M)
        by_sm[int(smid[b])].append(int(block[b, 1]))
    periods = [y - x for entries in by_sm.values() for x, y in zip(sorted(entries), sorted(entries)[1:])]
    row = lambda name, xs: f"  {name}: median {median(xs):.0f}, mean {mean(xs):.0f}"
    print(f"{path}: {launched} blocks, {kv} KV blocks a unit")
    for name, xs in (("entry -> first unit's loop start", first), ("entry -> last unit's loop start", last),
                     ("a unit's loop", loops), ("last loop end -> last end of rows", tails),
                     ("a block's period on its SM", periods)):
        print(row(name, xs))
    print(f"  outside the loop (period - mean loop): {mean(periods) - mean(loops):.0f} cycles, "
          f"{100 * (1 - mean(loops) / mean(periods)):.1f}% of the period")


for p in sys.argv[1:]:
    summarize(p)
