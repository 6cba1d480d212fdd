#!/usr/bin/env python3
"""The host-and-device contract (docs/host-device-contract.md), checked from the sources.

usage: host_device_contract.py ROOT

Every header of emulation/ that a device source of kernels/ includes must be listed in the contract's
table, and must define functions for host and device (LOWBIT_HD); every header the table lists
must be included by some kernel. The kernels' host side (.cpp files, and headers no .cu or .cuh
includes, directly or through other headers of kernels/) may also include the host-only headers of
the contract's second table ("## The host side"), and only from there. The third ("## Tables the
kernels copy") lists generated constant data a kernel copies to its constant memory: included by
kernels, holding constexpr data and no functions of its own. Prints the contract; exits 1 naming each
header that breaks it.
"""
import pathlib
import re
import sys


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(sys.argv[1])
    sources = [f for f in sorted((root / "kernels").rglob("*")) if f.suffix in (".cu", ".cuh", ".hpp", ".h", ".cpp")]
    text = {str(f.relative_to(root)): f.read_text() for f in sources}
    # The device side: .cu and .cuh files and every header of kernels/ they reach through includes.
    device = {name for name in text if name.endswith((".cu", ".cuh"))}
    frontier = list(device)
    while frontier:
        for header in re.findall(r'#include "(kernels/[^"]+)"', text[frontier.pop()]):
            if header in text and header not in device:
                device.add(header)
                frontier.append(header)
    included, host_included = {}, {}
    for name, body in text.items():
        for header in re.findall(r'#include "(emulation/[^"]+)"', body):
            (included if name in device else host_included).setdefault(header, []).append(name)
    doc = (root / "docs" / "host-device-contract.md").read_text()
    device_doc, _, rest = doc.partition("\n## The host side")
    host_doc, _, data_doc = rest.partition("\n## Tables the kernels copy")
    row = re.compile(r"^\| `(emulation/[^`]+)` \|", re.M)
    table, host_table, data_table = set(row.findall(device_doc)), set(row.findall(host_doc)), set(row.findall(data_doc))
    problems = []
    for header, users in sorted(included.items()):
        body = (root / header).read_text()
        if header in data_table:
            if "constexpr" not in body:
                problems.append(f"{header}: in docs/host-device-contract.md's tables the kernels copy, but holds no constexpr data")
            continue
        if header not in table:
            problems.append(f"{header}: included by {', '.join(users)}, but not in docs/host-device-contract.md's table")
        if "LOWBIT_HD" not in body:
            problems.append(f"{header}: included by {', '.join(users)}, but defines nothing for the device (LOWBIT_HD)")
    for header, users in sorted(host_included.items()):
        if header not in table and header not in host_table:
            problems.append(f"{header}: included by the host side ({', '.join(users)}), but in neither table of "
                            "docs/host-device-contract.md")
    for header in sorted((table | data_table) - included.keys()):
        problems.append(f"{header}: in docs/host-device-contract.md's table, but no kernel includes it")
    for header in sorted(host_table - host_included.keys()):
        problems.append(f"{header}: in docs/host-device-contract.md's host-side table, but no host source of kernels/ includes it")
    for header, users in sorted(included.items()):
        print(f"{header}: {len(users)} kernel source{'s' if len(users) != 1 else ''}")
    for header, users in sorted(host_included.items()):
        print(f"{header}: {len(users)} host-side source{'s' if len(users) != 1 else ''} of kernels/")
    for p in problems:
        print("FAILED: " + p)
    print(f"{len(included)} contract headers, {len(problems)} problems")
    return 1 if problems or not included else 0


if __name__ == "__main__":
    sys.exit(main())
