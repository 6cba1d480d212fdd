"""compare() on a released kernel's recorded output (verification/captures/sdpa-flash: PyTorch's
flash attention on an H100), against `lowbit attention --against`'s report."""

import json
import pathlib
import sys

import numpy as np
import pytest

import lowbit
from conftest import ROOT, run_cli

CAPTURES = ROOT / "verification" / "captures" / "sdpa-flash"
sys.path.insert(0, str(ROOT / "experiments" / "thirdparty"))
import capture  # noqa: E402  (the capture set's inputs, made as on the GPU machine)


def recorded(name):
    (q, k, v), entry = capture.make_inputs(name)
    config = {c["name"]: c for c in json.loads((CAPTURES / "set.json").read_text())["configs"]}[name]
    assert entry["sha256"] == config["sha256"], "capture.py no longer makes the captured inputs"
    return q, k, v, config, np.load(CAPTURES / f"{name}.out.npy"), np.load(CAPTURES / f"{name}.lse.npy")


@pytest.mark.parametrize("name", ["tiny-d64-causal", "one-token-d128"])
def test_the_kernel_reproduced(name):
    q, k, v, config, out, lse = recorded(name)
    r = lowbit.attention(q, k, v, preset=f"sdpa-flash-{config['format']}", causal=config["causal"])
    c = lowbit.compare(out, r, lse)
    assert (c["compared"], c["differ"], c["lse_compared"], c["lse_differ"]) == (out.size, 0, lse.size, 0)
    assert c["first"] is None and c["ulps"] == {}


def test_a_difference_located_as_the_cli(cli, tmp_path):
    q, k, v, config, out, lse = recorded("tiny-d64-causal")
    r = lowbit.attention(q, k, v, preset="sdpa-flash-fp16", causal=True)
    moved = out.copy()
    where = (0, 0, 20, 33)
    moved[where] = np.nextafter(moved[where], np.float16(np.inf))  # one fp16 ulp up
    c = lowbit.compare(moved, r, lse)
    assert (c["differ"], c["lse_differ"], c["ulps"]) == (1, 0, {1: 1})
    assert (c["first"]["batch"], c["first"]["head"], c["first"]["row"], c["first"]["column"]) == where
    assert c["first"]["row_lse_differs"] is False
    for name, t in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{name}.npy", t)
    np.save(tmp_path / "moved.npy", moved)
    status, stdout, _ = run_cli(cli, "attention", "--preset", "sdpa-flash-fp16", "--causal", "--q", tmp_path / "q.npy", "--k",
                  tmp_path / "k.npy", "--v", tmp_path / "v.npy", "--against", tmp_path / "moved.npy", "--against-lse",
                  CAPTURES / "tiny-d64-causal.lse.npy", check=False)
    assert status == 1
    assert "1 of 2368 output codes differ" in stdout
    assert "first: [batch 0, head 0, row 20, column 33]" in stdout
    assert "the row's LSE agrees" in stdout


def test_bad_inputs():
    q, k, v, config, out, lse = recorded("tiny-d64-causal")
    r = lowbit.attention(q, k, v, preset="sdpa-flash-fp16", causal=True)
    with pytest.raises(ValueError, match="kernel_output: shape"):
        lowbit.compare(out[..., :32], r)
    with pytest.raises(ValueError, match="kernel_lse: shape"):
        lowbit.compare(out, r, lse[..., :5])
