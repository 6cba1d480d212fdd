#!/usr/bin/env python3
"""One Markdown table of recorded `lowbit verify-gpu` runs.

usage: scripts/verify_gpu_table.py results/gpu/verify-gpu/*.json

One row per instruction and run (file), with the tile families the run cycled through
("standard": the nine default ones), the run's commit, GPU and whether the run finished every
instruction it was asked for (a run cut short by its time limit keeps those it finished).
"""
import json
import sys

STANDARD = ["random", "zero_ab", "narrow_band", "dominant", "random_c0", "exact", "specials", "cancellation",
            "wide_band"]


def main():
    print("| instruction | tiles | passed | failed | exact failed / checked | model | families | run |")
    print("|---|---:|---:|---:|---:|---|---|---|")
    for path in sys.argv[1:]:
        with open(path) as f:
            doc = json.load(f)
        p = doc["provenance"]
        run = f"{path.split('/')[-1]} ({p['gpu']}, {p['git_sha']}{'' if doc.get('complete', True) else ', cut short'})"
        families = doc.get("families", STANDARD)
        families = "standard" if families == STANDARD else ", ".join(families)
        for r in doc["instructions"]:
            modeled = r.get("model", "none") != "none"
            passed = r["passed"] if modeled else "-"
            failed = r["failed"] if modeled else "-"
            print(f"| {r['instruction']} | {r['tiles']} | {passed} | {failed} | "
                  f"{r['exact_failed']} / {r['exact_checked']} | {r.get('model', 'none')} | {families} | {run} |")


if __name__ == "__main__":
    main()
