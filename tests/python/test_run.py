"""run() against `lowbit run NAME`: the same tables from the same tensors."""

import numpy as np
import pytest

import lowbit
from conftest import run_cli


def tables_without_provenance(folder):
    """Every CSV of a folder, its '#' lines (date, command) left out."""
    return {p.name: [l for l in p.read_text().splitlines() if not l.startswith("#")] for p in sorted(folder.glob("*.csv"))}


def test_smoothing_equals_cli(cli, tmp_path):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 128, 64)).astype(np.float16) for _ in range(3))
    r = lowbit.run("smoothing", q, k, v, out=tmp_path / "python", threads=2, dataset_name="mine")
    inputs = tmp_path / "python" / "inputs"
    run_cli(cli, "run", "smoothing", "--no-plots", "--q", inputs / "q.npy", "--k", inputs / "k.npy", "--v",
            inputs / "v.npy", "--out", tmp_path / "cli", "--threads", 2, "--dataset-name", "mine")
    assert tables_without_provenance(tmp_path / "python") == tables_without_provenance(tmp_path / "cli")
    assert r["folder"] == str(tmp_path / "python") and r["headline"]
    assert r["table"] and all(row["dataset"] == "mine" for row in r["table"] if "dataset" in row)
    assert "metrics.csv" in r["tables"]


def test_errors():
    with pytest.raises(ValueError, match="unknown experiment 'smoothie'"):
        lowbit.run("smoothie")
    with pytest.raises(ValueError, match="q, k and v go together"):
        lowbit.run("smoothing", q=np.zeros((1, 8, 64), np.float32))
    with pytest.raises(RuntimeError, match="lowbit run smoothing exited"):
        lowbit.run("smoothing", tokens="many")
    assert "smoothing" in lowbit.experiments()
