"""Shared fixtures of the Python package's tests: the lowbit program they compare with, bit for bit.

The program is $LOWBIT_CLI, else build/experiments/lowbit of this checkout. Where LOWBIT_CLI is
set (./dev.sh test sets it) a missing program fails the tests; otherwise they report themselves
skipped.
"""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("LOWBIT_CLI")
    if path:
        if not os.access(path, os.X_OK):
            pytest.fail(f"LOWBIT_CLI={path} is not an executable")
        return path
    path = ROOT / "build" / "experiments" / "lowbit"
    if not os.access(path, os.X_OK):
        pytest.skip(f"no lowbit program at {path} (build it, or set LOWBIT_CLI)")
    return str(path)


def run_cli(cli, *args, stdin=None, check=True):
    """The program's (exit status, stdout, stderr)."""
    p = subprocess.run([cli, *map(str, args)], input=stdin, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"lowbit {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch", reason="torch is not installed (the torch tests need it)")
