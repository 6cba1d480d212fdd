"""mma() against the recorded GPU tiles (verification/vectors/), bit for bit, as `lowbit verify-vectors`."""

import gzip
import itertools
import json

import numpy as np
import pytest

import lowbit
from conftest import ROOT

FILES = ["sm90-mma-sync.jsonl.gz", "sm90-wgmma.jsonl.gz", "sm90/mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16.jsonl.gz",
         "sm90/mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16.jsonl.gz"]
TILES_PER_INSTRUCTION = 10


def words(hex_text, count):
    digits = len(hex_text) // count
    return np.array([int(hex_text[i:i + digits], 16) for i in range(0, len(hex_text), digits)], np.uint32)


def tiles():
    for name in FILES:
        seen = {}
        with gzip.open(ROOT / "verification" / "vectors" / name, "rt") as f:
            for line in f:
                t = json.loads(line)
                if seen.setdefault(t["instruction"], 0) < TILES_PER_INSTRUCTION:
                    seen[t["instruction"]] += 1
                    yield t


@pytest.mark.parametrize("tile", list(tiles()), ids=lambda t: t["instruction"])
def test_recorded_tile(tile):
    m, n, k = tile["m"], tile["n"], tile["k"]
    a = words(tile["a"], m * k).reshape(m, k)
    b = words(tile["b"], k * n).reshape(k, n)
    c = words(tile["c"], m * n).reshape(m, n).view(np.float32)  # f16 accumulators widened to binary32
    d = words(tile["d"], m * n).reshape(m, n).view(np.float32)
    info = lowbit.instruction(tile["instruction"], tile["arch"])
    if info["c"] == "fp16":
        c = c.astype(np.float16)
    got = lowbit.mma(tile["instruction"], a, b, c, arch=tile["arch"])
    expected = d.astype(np.float16) if info["d"] == "fp16" else d
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), expected.view(f"u{got.itemsize}"))


def test_values_in_and_integer_instruction():
    name = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    b = rng.integers(-128, 128, (32, 8)).astype(np.int8)
    c = rng.integers(-1000, 1000, (16, 8)).astype(np.int32)
    d = lowbit.mma(name, a, b, c)
    np.testing.assert_array_equal(d, a.astype(np.int64) @ b.astype(np.int64) + c)
    # float values of the operand format are taken as values, and give the codes' result
    fp8 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
    x = lowbit.convert(rng.standard_normal((16, 32)).astype(np.float32), "e4m3")
    y = lowbit.convert(rng.standard_normal((32, 8)).astype(np.float32), "e4m3")
    np.testing.assert_array_equal(lowbit.mma(fp8, x, y), lowbit.mma(fp8, lowbit.encode(x, "e4m3"), lowbit.encode(y, "e4m3")))


def test_wgmma_atom():
    name = "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"
    info = lowbit.instruction(name)
    assert (info["m"], info["n"], info["k"], info["issue"]) == (64, 256, 32, "wgmma")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (64, 32)).astype(np.uint8) & 0x7E | 0x30
    b = rng.integers(0, 256, (32, 256)).astype(np.uint8) & 0x7E | 0x30
    d = lowbit.mma(name, a, b)
    assert d.shape == (64, 256) and d.dtype == np.float32
    # each column block of 8 is the m64n8 instruction on the same rows
    small = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"
    np.testing.assert_array_equal(d[:, 8:16], lowbit.mma(small, a, b[:, 8:16]))


def test_bad_inputs():
    fp8 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
    with pytest.raises(ValueError, match="a has shape \\[16, 16\\]; .* takes a as 16 x 32"):
        lowbit.mma(fp8, np.zeros((16, 16), np.uint8), np.zeros((32, 8), np.uint8))
    with pytest.raises(ValueError, match=r"a\[0, 0\] = 0.3 is not a value of e4m3"):
        lowbit.mma(fp8, np.full((16, 32), 0.3), np.zeros((32, 8), np.uint8))
    with pytest.raises(ValueError, match="mma.sync.m99"):
        lowbit.mma("mma.sync.m99", np.zeros((16, 32), np.uint8), np.zeros((32, 8), np.uint8))
    assert any("wgmma" in line for line in lowbit.instructions())
