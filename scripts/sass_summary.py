#!/usr/bin/env python3
"""Which tensor-core and conversion SASS instructions each kernel of a CUDA binary uses.

usage: cuobjdump -sass BINARY | scripts/sass_summary.py > sass-summary.md

Reads `cuobjdump -sass` output on stdin and prints a Markdown table: one row per kernel
(demangled with c++filt when available), listing the counts of the opcodes that show how the
kernel computes (MMA, conversions, calls to emulation routines).
"""
import collections
import re
import shutil
import subprocess
import sys

# Opcode prefixes that say how a probe computes: tensor-core MMA (HMMA/IMMA for mma.sync,
# HGMMA/QGMMA/IGMMA for wgmma), conversions (F2FP packs, F2F/I2F/F2I), float math a software
# path would use (fp32 and packed fp16), and calls.
INTERESTING = ("HMMA", "IMMA", "HGMMA", "QGMMA", "IGMMA", "F2FP", "F2F", "I2F", "F2I", "FADD", "FFMA", "FMUL", "HADD2",
               "HFMA2", "HMUL2",
               "DADD", "DMUL", "CALL", "WARPGROUP")

function_line = re.compile(r"^\s*Function : (\S+)")
instruction_line = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)")


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out))


def main():
    kernels = collections.OrderedDict()
    current = None
    for line in sys.stdin:
        m = function_line.match(line)
        if m:
            current = kernels.setdefault(m.group(1), collections.Counter())
            continue
        m = instruction_line.search(line)
        if current is not None and m:
            opcode = m.group(1)
            if opcode.startswith(INTERESTING):
                current[opcode] += 1
    names = demangle(list(kernels))
    print("| kernel | opcodes (count) |")
    print("|---|---|")
    for mangled, counts in kernels.items():
        ops = ", ".join(f"{op} ({n})" for op, n in sorted(counts.items())) or "none of interest"
        print(f"| `{names[mangled]}` | {ops} |")


if __name__ == "__main__":
    main()
