#!/usr/bin/env python3
"""Where a thread block's time goes outside its loop, from run47's block timelines (variant btl).

A timeline (patches/s10-btl.patch, written when LOWBIT_BLOCK_TIMELINE names a file) is a header of
4 int32 (blocks launched, events a block, blocks a head, padded keys), one uint32 %smid per block,
then 10 uint64 %globaltimer (ns) per block: its entry, then per unit u its loop's start (1 + 3 u),
end (2 + 3 u) and its exit (3 + 3 u). A unit past the last of its head has no loop; its events are
left from an earlier launch and are not read.

Prints per file: the kernel's span; per block (medians) the time from entry to the first loop start,
the loop (first start to last end), the units' spread at start and end, the tail (last end to last
exit); per SM the gap between a block's last exit and the next block's entry, and the SMs' busy
fraction; what a block costs outside its loop, as a fraction of the kernel.

    python3 btl.py btl-8192.bin.gz   (btl-summary.txt: its output on all three)
"""
import gzip
import struct
import sys
from collections import defaultdict
from statistics import median


def load(path):
    raw = gzip.open(path, "rb").read()
    blocks, events, per_head, _ = struct.unpack("4i", raw[:16])
    smid = struct.unpack(f"{blocks}I", raw[16:16 + 4 * blocks])
    times = struct.unpack(f"{blocks * events}Q", raw[16 + 4 * blocks:])
    rows = [times[b * events:(b + 1) * events] for b in range(blocks)]
    return blocks, per_head, smid, rows


def summarize(path):
    blocks, per_head, smid, rows = load(path)
    t0 = min(r[0] for r in rows)
    info = []
    for b, r in enumerate(rows):
        entry = r[0]
        units = [(r[1 + 3 * u], r[2 + 3 * u], r[3 + 3 * u]) for u in range(3)]
        units = [u for u in units if u[0] >= entry and u[1] >= u[0] and u[2] >= u[1]]
        start = min(u[0] for u in units); end = max(u[1] for u in units); leave = max(u[2] for u in units)
        info.append(dict(sm=smid[b], entry=entry - t0, start=start - t0, end=end - t0, leave=leave - t0,
                         start_spread=max(u[0] for u in units) - start, end_spread=end - min(u[1] for u in units)))
    span = max(i["leave"] for i in info)
    print(f"{path}: {blocks} blocks ({per_head} a head), kernel span {span / 1e3:.1f} us")
    med = lambda key: median(key(i) for i in info) / 1e3
    print(f"  per block, median us: entry to loop {med(lambda i: i['start'] - i['entry']):.2f}, loop "
          f"{med(lambda i: i['end'] - i['start']):.2f}, units' start spread {med(lambda i: i['start_spread']):.2f}, "
          f"end spread {med(lambda i: i['end_spread']):.2f}, last loop end to last exit {med(lambda i: i['leave'] - i['end']):.2f}")
    by_sm = defaultdict(list)
    for i in info:
        by_sm[i["sm"]].append(i)
    gaps, busy, first, last = [], [], [], []
    for sm, items in by_sm.items():
        items.sort(key=lambda i: i["entry"])
        gaps += [b["entry"] - a["leave"] for a, b in zip(items, items[1:])]
        busy.append(sum(i["leave"] - i["entry"] for i in items) / span)
        first.append(items[0]["entry"]); last.append(items[-1]["leave"])
    print(f"  per SM ({len(by_sm)}): blocks {min(len(v) for v in by_sm.values())}-{max(len(v) for v in by_sm.values())}, "
          f"gap between blocks median {median(gaps) / 1e3:.2f} us (max {max(gaps) / 1e3:.2f}), "
          f"first entry {min(first) / 1e3:.2f}-{max(first) / 1e3:.2f} us, last exit {min(last) / 1e3:.1f}-{max(last) / 1e3:.1f} us, "
          f"busy {100 * min(busy):.1f}-{100 * max(busy):.1f}% (median {100 * median(busy):.1f}%)")
    outside = median((i["start"] - i["entry"]) + (i["leave"] - i["end"]) for i in info) + median(gaps)
    per_sm = median(len(v) for v in by_sm.values())
    print(f"  outside the loop a block: {outside / 1e3:.2f} us (entry to loop, loop end to exit, gap), "
          f"{100 * outside * per_sm / span:.1f}% of the span at {per_sm} blocks an SM")


for p in sys.argv[1:]:
    summarize(p)
