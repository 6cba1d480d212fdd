#!/usr/bin/env python3
"""The record of a whole test run: what ctest reported, and the counts the README cites.

usage: scripts/test_record.py [BUILD_DIR] > results/tests/test-run.md        (BUILD_DIR: build)

Run it right after `./dev.sh test`. It reads BUILD_DIR/Testing/ctest-console.log (ctest's console
output, which dev.sh keeps) and BUILD_DIR/Testing/Temporary/LastTest.log (every test's output),
and writes Markdown: the commit the tests were built from, the machine, ctest's summary (passed,
failed, skipped with each reason, total time) and the lines in which the tests behind the
README's figures state what they compared.
"""
import os
import platform
import re
import sys

# The tests whose own output backs a README figure, and the lines that state their counts.
CITED = [
    ("test_cuda_oracle", r"^test_cuda_oracle:", r"compared|inputs"),
    ("cross_check (ml_dtypes, gfloat)", r"^cross_check:(ml_dtypes|gfloat):", r"checked|documented difference"),
    ("exhaustive_fastconv", r"^fastconv_exhaustive:", r"mismatches in|SKIPPED|recomputed"),
    ("test_fastconv_boundaries", r"^test_fastconv_boundaries:", r"combinations"),
    ("test_wide_formats", r"^test_wide_formats:", r"inputs"),
    ("test_mma_vectors", r"^test_mma_vectors:", r"recorded tiles of|files, \d+ tiles"),
]


def fail(message):
    sys.exit(f"test_record.py: {message}")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError as e:
        fail(f"{e} (run ./dev.sh test first)")


def test_outputs(last_test_log):
    """name -> output lines, from LastTest.log."""
    outputs = {}
    pattern = re.compile(r'^\d+/\d+ Test: ([^\n]*)\n.*?^Output:\n-+\n(.*?)^<end of output>', re.S | re.M)
    for match in pattern.finditer(last_test_log):
        outputs[match.group(1)] = match.group(2).splitlines()
    return outputs


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    console = read(os.path.join(build, "Testing", "ctest-console.log"))
    outputs = test_outputs(read(os.path.join(build, "Testing", "Temporary", "LastTest.log")))
    sha = re.search(r'LOWBIT_GIT_SHA "([^"]+)"', read(os.path.join(build, "generated", "lowbit_git_sha.h"))).group(1)
    summary = re.search(r"^\d+% tests passed, \d+ tests failed out of \d+$", console, re.M)
    total = re.search(r"^Total Test time \(real\) = +(\S+) sec$", console, re.M)
    if not summary or not total:
        fail(f"{build}/Testing/ctest-console.log has no ctest summary (was the run cut short?)")
    statuses = re.findall(r"^\s*\d+/\d+ Test +#\d+: (.*?) \.+\s*(\**\w+(?: Run)?)\s+[\d.]+ sec$", console, re.M)
    cpu = next((line.split(":", 1)[1].strip() for line in read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.processor())

    print("# A whole test run (`./dev.sh test`)\n")
    print(f"Written by `scripts/test_record.py {build}` after `./dev.sh test`. Built from git `{sha}`; "
          f"{os.cpu_count()} cores, {cpu}.\n")
    print(f"ctest: **{summary.group(0)}**; {len(statuses)} results; "
          f"total time {float(total.group(1)) / 60:.1f} minutes (real).\n")
    skipped = [name for name, status in statuses if status == "***Skipped"]
    failed = [f"{name} ({status.strip('*')})" for name, status in statuses if status not in ("Passed", "***Skipped")]
    if failed:
        print("Failed:\n\n" + "\n".join(f"- {name}" for name in failed) + "\n")
    print(f"Skipped ({len(skipped)}), each with the reason it printed:\n")
    for name in skipped:
        reason = next((line.strip() for line in reversed(outputs.get(name, [])) if line.strip()), "(no output)")
        print(f"- `{name}`: {reason}")
    print("\n## What the tests behind the README's figures compared\n")
    for title, name_pattern, line_pattern in CITED:
        print(f"### {title}\n")
        lines = [line.strip() for name in sorted(outputs) if re.search(name_pattern, name)
                 for line in outputs[name] if re.search(line_pattern, line)]
        print("```\n" + ("\n".join(lines) if lines else "(nothing: not run)") + "\n```\n")


if __name__ == "__main__":
    main()
