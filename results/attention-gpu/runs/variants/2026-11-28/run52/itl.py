#!/usr/bin/env python3
"""Per-KV-block timelines of the d = 128 non-causal kernel (variants itl and ptl of run52, itlent of run53).

A file (written where LOWBIT_ITL points): 4 int32 (blocks launched, slots a unit, KV blocks a tile,
blocks a head), a uint32 %smid per block, 4 uint64 per block (%globaltimer and %clock64 at its entry,
then at unit 0's end), then per block and unit `slots` uint32 %clock values: tile after tile, the
top of each KV block (kv of them), the loop's end, the end of the rows (0: not written).

Prints the clock rate, the median cycles of a KV block by its position in the tile (first, later
tiles apart when persistent), the time outside the loop per tile, the means of a tile's period, of
its loop and of a KV block by position, and how far apart the units of a block reach the top of a
KV block.

    python3 itl.py FILE.bin[.gz] ...
"""
import gzip
import struct
import sys
from collections import defaultdict
from statistics import median

import numpy as np

GROUPS = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 8), (8, 12), (12, 16), (16, 32), (32, 48), (48, 64), (64, 96), (96, 128)]


def load(path):
    raw = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    launched, slots, kv, per_head = struct.unpack("4i", raw[:16])
    o = 16
    smid = np.frombuffer(raw, np.uint32, launched, o); o += 4 * launched
    block = np.frombuffer(raw, np.uint64, 4 * launched, o).reshape(launched, 4).astype(np.int64); o += 32 * launched
    data = np.frombuffer(raw, np.uint32, launched * 3 * slots, o).reshape(launched, 3, slots)
    return launched, slots, kv, per_head, smid, block, data


def summarize(path):
    launched, slots, kv, per_head, smid, block, data = load(path)
    per_tile = kv + 2
    mhz = median(((block[:, 3] - block[:, 1]) / (block[:, 2] - block[:, 0]) * 1e3)[block[:, 2] > block[:, 0]])
    durations = defaultdict(list)  # (first tile?, position) -> cycles
    outside, epilogue, loops, spreads = [], [], [], defaultdict(list)
    tiles_seen = 0
    for b in range(launched):
        tiles = []
        for t in range(slots // per_tile):
            chunk = data[b, :, t * per_tile:(t + 1) * per_tile].astype(np.int64)
            live = [u for u in range(3) if chunk[u].all()]
            if not live:
                break
            tiles.append((chunk, live))
        for t, (chunk, live) in enumerate(tiles):
            tiles_seen += 1
            first = t == 0
            for u in live:
                c = chunk[u]
                d = np.diff(c[:kv + 1]) % (1 << 32)
                for i, x in enumerate(d):
                    durations[(first, i)].append(int(x))
                loops.append(int((c[kv] - c[0]) % (1 << 32)))
                epilogue.append(int((c[kv + 1] - c[kv]) % (1 << 32)))
                if t + 1 < len(tiles) and u in tiles[t + 1][1]:
                    outside.append(int((tiles[t + 1][0][u][0] - c[kv + 1]) % (1 << 32)))
            if len(live) == 3:
                for i in range(kv):
                    tops = chunk[:, i]
                    spreads[i].append(int((tops.max() - tops.min()) % (1 << 32)))
    print(f"{path}: {launched} blocks, {tiles_seen} tiles, {kv} KV blocks a tile; clock {mhz:.0f} MHz (median over blocks)")
    steady = median(x for i in range(16, max(17, kv - 8)) for x in durations[(False, i)] or durations[(True, i)]) \
        if any(durations[(False, i)] for i in range(kv)) else median(x for i in range(16, max(17, kv - 8)) for x in durations[(True, i)])
    for first in (True, False):
        if not any(durations[(first, i)] for i in range(kv)):
            continue
        label = "first tile of a block" if first else "later tiles"
        row, excess = [], 0.0
        for lo, hi in GROUPS:
            if lo >= kv:
                break
            xs = [x for i in range(lo, min(hi, kv)) for x in durations[(first, i)]]
            if xs:
                row.append(f"{lo}-{min(hi, kv) - 1}: {median(xs):.0f}" if hi - lo > 1 else f"{lo}: {median(xs):.0f}")
        for i in range(kv):
            if durations[(first, i)]:
                excess += median(durations[(first, i)]) - steady
        n = sum(len(durations[(first, i)]) for i in range(kv)) // kv
        print(f"  {label} ({n} unit-tiles), median cycles of a KV block by position: " + ", ".join(row))
        print(f"    sum over positions of (median - steady {steady:.0f}): {excess:.0f} cycles = {excess / mhz:.2f} us")
    entry = [int((min(int(data[b, u, 0]) for u in range(3) if data[b, u, 0]) - int(block[b, 1])) % (1 << 32))
             for b in range(launched) if data[b, :, 0].any() and block[b, 1]]
    print(f"  block entry -> first unit's first KV block top: median {median(entry):.0f} cycles = {median(entry) / mhz:.2f} us")
    full = [b for b in range(launched) if data[b, :, 0].all() and data[b, :, kv + 1].all()]
    order = [sorted(range(3), key=lambda u: (int(data[b, u, 0]) - int(block[b, 1])) % (1 << 32)) for b in full]
    firsts = [sum(o[0] == u for o in order) for u in range(3)]
    lasts = [sum(o[-1] == u for o in order) for u in range(3)]
    tail = [(max(int(data[b, u, kv + 1]) for u in range(3)) - max(int(data[b, u, kv]) for u in range(3))) % (1 << 32) for b in full]
    print(f"  first tile: blocks whose unit 0, 1, 2 reaches its first KV block first {firsts}, last {lasts}; "
          f"the block's last loop end -> its last end of rows: median {median(tail):.0f} cycles")
    print(f"  loop median {median(loops):.0f} cycles = {median(loops) / mhz:.2f} us; loop end -> end of rows {median(epilogue):.0f} cycles = {median(epilogue) / mhz:.2f} us")
    if outside:
        print(f"  end of rows -> next tile's first KV block top (same unit): median {median(outside):.0f} cycles = {median(outside) / mhz:.2f} us")
    else:
        by_sm = defaultdict(list)
        for b in range(launched):
            c0 = int(data[b, 0, 0])
            if c0:
                by_sm[int(smid[b])].append((int(block[b, 0]), int(block[b, 1]), b))
        gaps = []
        for items in by_sm.values():
            items.sort()
            for (t0, k0, b0), (t1, k1, b1) in zip(items, items[1:]):
                ends = [int(data[b0, u, kv + 1]) for u in range(3) if data[b0, u, kv + 1]]
                gaps.append(((int(data[b1, 0, 0]) - max(ends)) % (1 << 32)))
        print(f"  end of rows (last unit) -> next block's first KV block top on the SM: median {median(gaps):.0f} cycles = {median(gaps) / mhz:.2f} us")
    # Means: the period of a tile on its SM (block entry to the next block's entry on the SM; persistent,
    # a unit's first KV block top to its next tile's) and of its loop, and by position in the tile.
    periods, loop_sums = [], []
    if outside:
        for b in range(launched):
            for u in range(3):
                tops = [int(data[b, u, t * per_tile]) for t in range(slots // per_tile) if data[b, u, t * per_tile]]
                periods += [(y - x) % (1 << 32) for x, y in zip(tops, tops[1:])]
    else:
        by_sm = defaultdict(list)
        for b in range(launched):
            by_sm[int(smid[b])].append(int(block[b, 1]))
        for entries in by_sm.values():
            entries.sort()
            periods += [y - x for x, y in zip(entries, entries[1:])]
    means = {i: sum(durations[(False, i)] or durations[(True, i)]) / len(durations[(False, i)] or durations[(True, i)])
             for i in range(kv)}
    print(f"  means: a tile's period {sum(periods) / len(periods):.0f} cycles, its loop {sum(loops) / len(loops):.0f}; "
          f"a KV block by position ({'later tiles' if outside else 'every block'}): " +
          ", ".join(f"{lo}-{min(hi, kv) - 1}: {sum(means[i] for i in range(lo, min(hi, kv))) / (min(hi, kv) - lo):.0f}"
                    if hi - lo > 1 else f"{lo}: {means[lo]:.0f}" for lo, hi in GROUPS + [(kv - 4, kv - 3), (kv - 3, kv - 2), (kv - 1, kv)] if lo < kv))
    row = []
    for lo, hi in GROUPS:
        if lo >= kv:
            break
        xs = [x for i in range(lo, min(hi, kv)) for x in spreads[i]]
        if xs:
            row.append(f"{lo}-{min(hi, kv) - 1}: {median(xs):.0f}" if hi - lo > 1 else f"{lo}: {median(xs):.0f}")
    print("  units' spread at a KV block's top (max - min over the 3 units), median cycles: " + ", ".join(row))


for p in sys.argv[1:]:
    summarize(p)
