#!/usr/bin/env python3
"""The host-and-device contract (docs/host-device-contract.md), checked from the sources.

usage: host_device_contract.py ROOT

Every header of emulation/ that a source of kernels/ includes must be listed in the contract's
table, and must define functions for host and device (LOWBIT_HD); every header the table lists
must be included by some kernel. Prints the contract; exits 1 naming each header that breaks it.
"""
import pathlib
import re
import sys


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(sys.argv[1])
    included = {}
    for source in sorted((root / "kernels").rglob("*")):
        if source.suffix in (".cu", ".cuh", ".hpp", ".h", ".cpp"):
            for header in re.findall(r'#include "(emulation/[^"]+)"', source.read_text()):
                included.setdefault(header, []).append(str(source.relative_to(root)))
    table = set(re.findall(r"^\| `(emulation/[^`]+)` \|", (root / "docs" / "host-device-contract.md").read_text(), re.M))
    problems = []
    for header, sources in sorted(included.items()):
        if header not in table:
            problems.append(f"{header}: included by {', '.join(sources)}, but not in docs/host-device-contract.md's table")
        if "LOWBIT_HD" not in (root / header).read_text():
            problems.append(f"{header}: included by {', '.join(sources)}, but defines nothing for the device (LOWBIT_HD)")
    for header in sorted(table - included.keys()):
        problems.append(f"{header}: in docs/host-device-contract.md's table, but no kernel includes it")
    for header, sources in sorted(included.items()):
        print(f"{header}: {len(sources)} kernel source{'s' if len(sources) != 1 else ''}")
    for p in problems:
        print("FAILED: " + p)
    print(f"{len(included)} contract headers, {len(problems)} problems")
    return 1 if problems or not included else 0


if __name__ == "__main__":
    sys.exit(main())
