#!/usr/bin/env python3
"""The tables of a results README against the commands it gives for them.

Every indented command line of README that runs one of the table programs (experiments/bench/
median_of_calls.py, ncu_stalls.py, launch_clocks.py, ncu_loop_regions.py) is run from the
repository root with bash; each Markdown table row it prints must appear in README as printed. Fails where README gives no such
command, where one fails, or where a row differs or is missing.

  tests/experiments/readme_tables.py results/bench_attention/fa3/README.md
"""
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
PROGRAMS = ("experiments/bench/median_of_calls.py", "experiments/bench/ncu_stalls.py", "experiments/bench/launch_clocks.py",
            "experiments/bench/ncu_loop_regions.py")


def main(readme):
    text = (REPO / readme).read_text()
    rows_in_readme = {line.strip() for line in text.splitlines() if line.strip().startswith("|")}
    commands = [line.strip() for line in text.splitlines() if line.startswith("    ") and line.strip().startswith(PROGRAMS)]
    if not commands:
        print(f"{readme}: no command of {', '.join(PROGRAMS)}")
        return 1
    failures = 0
    for command in commands:
        run = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAILED ({run.returncode}): {command}\n{run.stderr}")
            failures += 1
            continue
        rows = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith("|")]
        missing = [row for row in rows if row not in rows_in_readme]
        print(f"{command}: {len(rows)} table rows, {len(rows) - len(missing)} in {readme}")
        for row in missing:
            print(f"  not in {readme}: {row}")
        failures += bool(missing) or not rows
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
