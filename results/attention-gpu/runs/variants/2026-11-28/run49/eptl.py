#!/usr/bin/env python3
"""Where the end of a unit's rows goes, from run49's block timelines (variant eptl).

A timeline (written when LOWBIT_BLOCK_TIMELINE names a file) is a header of 4 int32 (blocks
launched, events a block, blocks a head, padded keys), one uint32 %smid per block, then 25 uint64
%globaltimer (ns) per block: its entry (0), then per unit u, thread 0's event 1 + 8 u + e: e = 0
loop start, 1 loop end, 2 the LSE known (its bias loaded), 3 the V scales loaded, 4 and 5 the two
passes' pieces stored, 6 the LSE stored, 7 exit (after the unit's barrier). A unit past the last of
its head has no loop; its events are stale and are not read.

Prints per file: per block (medians) entry to first loop start, loop, last loop end to last exit,
the gap to the next block on the SM; then, for the unit whose loop ends last in its block and for
every unit, the median time of each step of the end of the rows.

    python3 eptl.py eptl-8192.bin.gz eptl-16384.bin.gz   (eptl-summary.txt: its output)
"""
import gzip
import struct
import sys
from collections import defaultdict
from statistics import median

STEPS = ["loop end -> LSE known", "-> V scales loaded", "-> pass 0 stored", "-> pass 1 stored",
         "-> LSE stored", "-> exit (unit barrier)"]


def load(path):
    raw = gzip.open(path, "rb").read()
    blocks, events, per_head, _ = struct.unpack("4i", raw[:16])
    smid = struct.unpack(f"{blocks}I", raw[16:16 + 4 * blocks])
    times = struct.unpack(f"{blocks * events}Q", raw[16 + 4 * blocks:])
    return blocks, per_head, smid, [times[b * events:(b + 1) * events] for b in range(blocks)]


def summarize(path):
    blocks, per_head, smid, rows = load(path)
    t0 = min(r[0] for r in rows)
    info, last_steps, all_steps = [], defaultdict(list), defaultdict(list)
    for b, r in enumerate(rows):
        entry = r[0]
        units = [r[1 + 8 * u:9 + 8 * u] for u in range(3)]
        units = [u for u in units if u[0] >= entry and all(u[k + 1] >= u[k] for k in range(7))]
        start = min(u[0] for u in units); end = max(u[1] for u in units); leave = max(u[7] for u in units)
        info.append(dict(sm=smid[b], entry=entry - t0, start=start - t0, end=end - t0, leave=leave - t0))
        last = max(units, key=lambda u: u[1])
        for k in range(6):
            last_steps[k].append(last[k + 2] - last[k + 1])
            for u in units:
                all_steps[k].append(u[k + 2] - u[k + 1])
    span = max(i["leave"] for i in info)
    by_sm = defaultdict(list)
    for i in info:
        by_sm[i["sm"]].append(i)
    gaps = []
    for items in by_sm.values():
        items.sort(key=lambda i: i["entry"])
        gaps += [b["entry"] - a["leave"] for a, b in zip(items, items[1:])]
    med = lambda key: median(key(i) for i in info) / 1e3
    print(f"{path}: {blocks} blocks ({per_head} a head), kernel span {span / 1e3:.1f} us")
    print(f"  per block, median us: entry to loop {med(lambda i: i['start'] - i['entry']):.2f}, loop "
          f"{med(lambda i: i['end'] - i['start']):.2f}, last loop end to last exit {med(lambda i: i['leave'] - i['end']):.2f}, "
          f"gap to the next block on the SM {median(gaps) / 1e3:.2f}")
    print("  the end of the rows, median us (the unit whose loop ends last / every unit):")
    for k, name in enumerate(STEPS):
        print(f"    {name:26s} {median(last_steps[k]) / 1e3:6.2f} / {median(all_steps[k]) / 1e3:6.2f}")


for p in sys.argv[1:]:
    summarize(p)
