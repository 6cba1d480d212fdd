#!/usr/bin/env python3
"""Where a d = 128 unit's KV block goes, from the in-kernel timelines of runs 39-41.

A timeline (variants `tl`, `st`, `iltl`, `reltl`: patches/s9-*.patch, written when LOWBIT_TIMELINE
names a file) is a header of 6 int32 (blocks, warps, iterations, events recorded; the launch's
blocks; padded keys), then one uint32 %smid per block, then %clock (32 bits) of lane 0 of every warp
at 8 events of every KV block: loop top, stage landed, S in, row maximum, P's codes packed, R in,
unit barrier passed, o updated. Blocks (x, 0, 0) only; each block fills its SM (3 units of 4 warps;
warp j of every unit on scheduler j).

Prints, over KV blocks 4-59 of every recorded thread block: the cycles of a warp's iteration and of
each phase between events; how many of a scheduler's 3 warps are in their exponential phase at once;
how many units wait on a wgmma at once; how far apart the 4 warps of a unit pass each event, and
which warp is the last to issue Q K^T and P V.

    python3 timeline.py run40/timeline-tl-8192.bin.gz run41/timeline-reltl-8192.bin.gz
"""
import gzip
import struct
import sys

import numpy as np

PHASES = ["stage", "QK", "max", "exp", "PV", "barrier", "o", "loop"]
FIRST, LAST = 4, 60  # the KV blocks summarized (the first ones start the pipeline)


def load(path):
    raw = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    recorded, warps, iterations, events, blocks, _ = struct.unpack("6i", raw[:24])
    data = np.frombuffer(raw[24 + 4 * recorded:], dtype=np.uint32).reshape(recorded, warps, iterations, events)
    n = min(recorded, blocks)
    t = data[:n].astype(np.int64) - data[:n, :1, :1, :1].astype(np.int64)
    return (t + 2**31) % 2**32 - 2**31  # 32-bit clocks, relative to each block's first event


def occupancy(t, spans, members):
    """The fraction of time during which 0, 1, 2, 3 of `members` are inside one of their spans."""
    hist = np.zeros(4)
    for block in t:
        lo = max(block[w, FIRST, 0] for w in members)
        hi = min(block[w, LAST - 1, 7] for w in members)
        grid = np.arange(lo, hi, 8)
        count = np.zeros(len(grid), dtype=int)
        for w in members:
            inside = np.zeros(len(grid), dtype=bool)
            for start, end in spans:
                for i in range(FIRST, LAST):
                    inside |= (grid >= block[w, i, start]) & (grid < block[w, i, end])
            count += inside
        hist += np.bincount(count, minlength=4)[:4]
    return hist / hist.sum()


def summarize(path):
    t = load(path)
    print(f"{path}: {len(t)} thread blocks")
    steady = t[:, :, FIRST:LAST, :]
    durations = [steady[..., k + 1] - steady[..., k] for k in range(7)]
    durations.append(t[:, :, FIRST + 1:LAST + 1, 0] - t[:, :, FIRST:LAST, 7])
    iteration = (t[:, :, LAST, 0] - t[:, :, FIRST, 0]) / (LAST - FIRST)
    print(f"  cycles per warp and KV block: median {np.median(iteration):.0f}")
    print("  phases, median cycles: " + ", ".join(f"{n} {np.median(d):.0f}" for n, d in zip(PHASES, durations)))
    exp = np.mean([occupancy(t, [(3, 4)], [j, j + 4, j + 8]) for j in range(4)], axis=0)
    print("  warps of one scheduler in their exponentials at once: " + ", ".join(f"{k}: {v:.2f}" for k, v in enumerate(exp)))
    mma = occupancy(t, [(1, 2), (4, 5)], [0, 4, 8])
    print("  units waiting on a wgmma at once: " + ", ".join(f"{k}: {v:.2f}" for k, v in enumerate(mma)))
    units = steady.reshape(len(t), 3, 4, LAST - FIRST, 8)
    spread = [int(np.median(units[..., e].max(2) - units[..., e].min(2))) for e in range(8)]
    print("  spread of a unit's 4 warps at each event, median cycles: " + ", ".join(map(str, spread)))
    for name, e in (("Q K^T", 1), ("P V", 4)):
        last = np.bincount(np.argmax(units[..., e], axis=2).ravel(), minlength=4) / units[..., e].size * 4
        print(f"  the last warp to issue {name}: " + ", ".join(f"warp {j}: {v:.2f}" for j, v in enumerate(last)))


if __name__ == "__main__":
    for path in sys.argv[1:]:
        summarize(path)
