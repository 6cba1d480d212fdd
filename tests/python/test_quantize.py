"""quantize() against the attention pipeline's own quantized operands and the quantizer's contract."""

import numpy as np
import pytest

import lowbit


def test_per_token_int8_contract():
    # quant/quantize.hpp: s = amax / 127 in float32, codes = round-to-nearest-even(x / s).
    x = (np.random.default_rng(0).standard_normal((37, 64)) * 3).astype(np.float32)
    r = lowbit.quantize(x, "int8", "per-token")
    amax = np.abs(x).max(axis=1)
    scales = amax / np.float32(127)
    np.testing.assert_array_equal(r["scales"], scales)
    codes = np.rint(x / scales[:, None]).astype(np.int8).view(np.uint8)
    np.testing.assert_array_equal(r["codes"][:37, :64], codes)
    assert r["groups"][:37, 0].tolist() == list(range(37)) and r["element"] == "int8"
    assert r["scale_format"] == "fp32" and r["shape"] == (37, 64)


@pytest.mark.parametrize("role,fmt,granularity", [("q", "int8", "per-thread"), ("k", "int8", "per-thread"),
                                                  ("q", "int8", "per-warp"), ("k", "int4", "per-block")])
def test_equals_the_pipelines_operands(role, fmt, granularity):
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 200, 64)).astype(np.float16)
    k = rng.standard_normal((1, 200, 64)).astype(np.float16)
    v = rng.standard_normal((1, 200, 64)).astype(np.float16)
    instruction = "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32" if fmt == "int4" else None
    stages = {"smooth-k": "off", role: f"{fmt}:{granularity}"}
    if instruction:
        stages["qk"] = instruction
        stages["q" if role == "k" else "k"] = f"{fmt}:per-block"
    r = lowbit.attention(q, k, v, preset="sage2-8b", stages=stages)
    x = (q if role == "q" else k)[0]
    mine = lowbit.quantize(x, fmt, granularity, role=role, instruction=instruction, stages={"smooth-k": "off"})
    theirs = r[role][0]
    np.testing.assert_array_equal(mine["codes"], theirs["codes"])
    np.testing.assert_array_equal(mine["groups"], theirs["groups"])
    if role == "k":  # Q's scales take the softmax scale in the pipeline
        np.testing.assert_array_equal(mine["scales"], theirs["scales"])


def test_per_thread_groups_follow_the_instruction():
    x = np.random.default_rng(2).standard_normal((128, 64)).astype(np.float32)
    r = lowbit.quantize(x, "int8", "per-thread", role="q")
    assert r["instruction"].startswith("mma.sync") or r["instruction"].startswith("wgmma")
    # a row's scale is shared with rows of other thread groups: fewer groups than per-token
    assert r["scales"].size < 128 and (r["groups"] == r["groups"][:, :1]).all()


def test_nvfp4_blocks():
    x = np.random.default_rng(3).standard_normal((16, 64)).astype(np.float32)
    r = lowbit.quantize(x, "e2m1", "nvfp4")
    assert r["scale_format"] == "ue4m3" and r["scales"].size == 16 * 4
    assert r["codes"].max() < 16


def test_bad_inputs():
    x = np.ones((4, 64), np.float32)
    with pytest.raises(ValueError, match="granularity 'per-galaxy' is not one of"):
        lowbit.quantize(x, "int8", "per-galaxy")
    with pytest.raises(ValueError, match="x: expected a 2-D array"):
        lowbit.quantize(x[0], "int8")
    with pytest.raises(ValueError, match="role 'o': expected q, k or v"):
        lowbit.quantize(x, "int8", role="o")
    with pytest.raises(ValueError, match="format 'int99'"):
        lowbit.quantize(x, "int99")
