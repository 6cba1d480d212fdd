#!/usr/bin/env python3
"""Where the attention kernel's warps spend the KV loop, from Nsight Compute's per-instruction
warp-state sampling, as Markdown tables.

The input is the source page of one launch in SASS (`ncu --section SourceCounters --section
WarpStateStats --page source --print-source sass --csv`, gzipped or not), or that file reduced by
--reduce. The KV loop is the innermost backward branch around both the IGMMA (Q K^T) and the QGMMA
(P V) instructions (as scripts/sass_attention_loop.py finds it); it is cut at those instructions
and their WARPGROUP.DEPBAR waits into the regions of one KV block: the wait for the stage (and the
K scale's load), Q K^T's issue, what runs before its wait (at d = 64 the refill, by thread 0 of the
unit whose turn it is), the wait, the softmax, P V's issue, what runs before its wait (at d = 128
the refill), the wait, and the rest (step 9, the loop's end). Per region: its instructions, its
share of the loop's samples, the share in which the sampled warp issued (`selected`), and its
largest stall reasons. The source page has no column for some samples (the first wgmma of each
group has most of them: its `gmma` stall, which the raw page counts); they are shown as `unlisted`.

  ncu --kernel-name-base demangled --kernel-name regex:sage2_attention_kernel --launch-count 1 \\
    --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \\
    python3 one_launch.py 128 lanes > d128-source.csv      # scripts/device/ncu_library.sh's one_launch.py
  experiments/bench/ncu_loop_regions.py d128-source.csv --reduce d128-lanes.csv.gz
  experiments/bench/ncu_loop_regions.py results/bench_attention/fa3/in-turn/sampling/d128-lanes.csv.gz

--reduce OUT writes the input's kernel name, each instruction's address (from the kernel's start),
SASS, samples and the stall columns that are not all zero, gzipped: what the records hold (the full
page is about twice the size).
"""
import argparse
import collections
import csv
import gzip
import io
import pathlib
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def read_page(path):
    """(the kernel's name, the header, the instructions as dicts) of a source page or a reduced one."""
    data = path.read_bytes()
    text = gzip.decompress(data).decode() if path.suffix == ".gz" else data.decode()
    rows = [row for row in csv.reader(io.StringIO(text)) if row]
    at = next((k for k, row in enumerate(rows) if "Source" in row and SAMPLES in row), None)
    if at is None:
        sys.exit(f"ncu_loop_regions: {path}: no header with 'Source' and '{SAMPLES}' (not ncu's source page)")
    kernel = next((row[1] for row in rows[:at] if row[0] == "Kernel Name" and len(row) > 1), "?")
    header = rows[at]
    return kernel, header, [dict(zip(header, row)) for row in rows[at + 1:] if len(row) == len(header)]


def reasons_of(header):
    return [h for h in header if h.startswith("stall_") and "Not Issued" not in h]


def reduce(path, out):
    kernel, header, instructions = read_page(path)
    reasons = [r for r in reasons_of(header) if any(int(i[r]) for i in instructions)]
    columns = ["Address", "Source", SAMPLES] + reasons
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["Kernel Name", kernel])
    writer.writerow(columns)
    # Addresses from the kernel's start, in the branches' targets too (the load address is the run's).
    base = int(instructions[0]["Address"], 16)
    relative = {i["Address"]: hex(int(i["Address"], 16) - base) for i in instructions}
    for instruction in instructions:
        row = dict(instruction, Address=relative[instruction["Address"]],
                   Source=" ".join(relative.get(word, word) for word in instruction["Source"].split()))
        writer.writerow([row[c] for c in columns])
    pathlib.Path(out).write_bytes(gzip.compress(text.getvalue().encode(), 9))


def opcode(source):
    words = source.split()
    return words[1] if words and words[0].startswith("@") else (words[0] if words else "")


def loop_regions(path, instructions):
    """[(name, first, end)] of the KV loop's regions, instruction indices."""
    ops = [opcode(i["Source"]) for i in instructions]
    igmma = [k for k, op in enumerate(ops) if op.startswith("IGMMA")]
    qgmma = [k for k, op in enumerate(ops) if op.startswith("QGMMA")]
    waits = [k for k, op in enumerate(ops) if op.startswith("WARPGROUP.DEPBAR")]
    if not igmma or not qgmma:
        sys.exit(f"ncu_loop_regions: {path}: no IGMMA and QGMMA (not the sage2-8b attention kernel)")
    qk_wait = next((k for k in waits if k > igmma[-1]), None)
    pv_wait = next((k for k in waits if k > qgmma[-1]), None)
    if qk_wait is None or pv_wait is None:
        sys.exit(f"ncu_loop_regions: {path}: no WARPGROUP.DEPBAR after the IGMMA and the QGMMA instructions")
    # The loop: a branch after P V's wait whose target (an address in the source page, the
    # instructions' order) is at or before the first IGMMA; the innermost is the first such.
    sources = [i["Source"].split() for i in instructions]
    addresses = [i.get("Address") for i in instructions]
    first = end = None
    for k in range(pv_wait, len(instructions)):
        target = sources[k][-1] if ops[k] == "BRA" else ""
        if target in addresses and addresses.index(target) <= igmma[0]:
            first, end = addresses.index(target), k + 1
            break
    if first is None:
        sys.exit(f"ncu_loop_regions: {path}: no branch back to the first IGMMA after P V's wait")
    return [("the stage's wait (and the K scale)", first, igmma[0]), ("Q K^T's issue", igmma[0], igmma[-1] + 1),
            ("after it (d = 64: the refill)", igmma[-1] + 1, qk_wait), ("Q K^T's wait", qk_wait, qk_wait + 1),
            ("softmax", qk_wait + 1, qgmma[0]), ("P V's issue", qgmma[0], qgmma[-1] + 1),
            ("after it (d = 128: the refill)", qgmma[-1] + 1, pv_wait), ("P V's wait", pv_wait, pv_wait + 1),
            ("step 9, the loop's end", pv_wait + 1, end)]


def table(path):
    kernel, header, instructions = read_page(path)
    reasons = reasons_of(header)
    regions = loop_regions(path, instructions)
    total = sum(int(i[SAMPLES]) for i in instructions)
    first, end = regions[0][1], regions[-1][2]
    in_loop = sum(int(i[SAMPLES]) for i in instructions[first:end])
    lines = [f"{path.name}: {kernel.split('(')[0].split('::')[-1]}...; {total} samples, {100 * in_loop / total:.1f}% in the "
             f"KV loop ({end - first} instructions)", "",
             "| region | instructions | share of the loop's samples | issuing | largest stall reasons (share of the region's samples) |",
             "|---|---|---|---|---|"]
    for name, a, b in regions:
        samples = sum(int(i[SAMPLES]) for i in instructions[a:b])
        by_reason = collections.Counter({r[len("stall_"):]: sum(int(i[r]) for i in instructions[a:b]) for r in reasons})
        by_reason["unlisted"] = samples - sum(by_reason.values())
        issuing = by_reason.pop("selected", 0)
        largest = ", ".join(f"{r} {100 * v / max(samples, 1):.0f}%" for r, v in by_reason.most_common(3) if v > 0)
        lines.append(f"| {name} | {b - a} | {100 * samples / in_loop:.1f}% | {100 * issuing / max(samples, 1):.0f}% | {largest} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("pages", nargs="+", type=pathlib.Path, help="ncu source pages (CSV, .gz or not)")
    parser.add_argument("--reduce", metavar="OUT", help="write the one page given, reduced, to OUT (gzipped)")
    args = parser.parse_args()
    for page in args.pages:
        if not page.is_file():
            parser.error(f"{page}: no such file")
    if args.reduce:
        if len(args.pages) != 1:
            parser.error("--reduce takes one page")
        reduce(args.pages[0], args.reduce)
        return 0
    print("\n\n".join(table(page) for page in args.pages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
