"""attention() against `lowbit attention --out`, bit for bit, and the stages it keeps."""

import numpy as np
import pytest

import lowbit
from conftest import run_cli


def qkv(shape, dtype, seed=0, kv_heads=None):
    rng = np.random.default_rng(seed)
    kv_shape = list(shape)
    if kv_heads:
        kv_shape[-3] = kv_heads
    q = rng.standard_normal(shape) * 2
    k = rng.standard_normal(kv_shape) * 2 + 1  # a mean for smoothing to remove
    v = rng.standard_normal(kv_shape)
    return [t.astype(np.float32).astype(dtype) for t in (q, k, v)]


def cli_output(cli, tmp_path, q, k, v, preset, causal=False, sets=(), descale=None, key_mean=None):
    for name, t in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{name}.npy", t)
    args = ["attention", "--preset", preset, "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy",
            "--v", tmp_path / "v.npy", "--out", tmp_path / "o.npy", "--threads", 2]
    args += ["--causal"] if causal else []
    if descale is not None:
        np.save(tmp_path / "descale.npy", descale)
        args += ["--descale", tmp_path / "descale.npy"]
    if key_mean is not None:
        np.save(tmp_path / "key_mean.npy", key_mean)
        args += ["--key-mean", tmp_path / "key_mean.npy"]
    for s in sets:
        args += ["--set", s]
    run_cli(cli, *args)
    return np.load(tmp_path / "o.npy")


def bf16():
    return pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed").bfloat16


CASES = [  # (preset, dtype, shape, kv heads, causal, stages)
    ("sage2-8b", np.float16, (2, 150, 64), None, False, ()),
    ("sage2-8b", np.float16, (1, 4, 70, 128), 2, True, ()),
    ("sage2-8b", "bf16", (2, 90, 64), None, True, ("accumulation=two-level:1",)),
    ("fp32", np.float32, (2, 65, 80), None, False, ()),
    ("fa3-fp8", np.float16, (2, 130, 64), None, True, ()),
    ("sage2-4b", np.float16, (1, 2, 100, 64), None, False, ()),
    ("sage3", "bf16", (2, 64, 64), None, False, ()),
    ("sageattn2-sm90", np.float16, (1, 4, 150, 64), 2, True, ()),
    ("sageattn2-sm90-per-warp", "bf16", (2, 130, 128), None, False, ()),
    ("sageattn2-sm89", np.float16, (1, 4, 150, 64), 2, True, ()),
]


@pytest.mark.parametrize("preset,dtype,shape,kv_heads,causal,sets", CASES)
def test_output_equals_cli(cli, tmp_path, preset, dtype, shape, kv_heads, causal, sets):
    dtype = bf16() if dtype == "bf16" else dtype
    q, k, v = qkv(shape, dtype, kv_heads=kv_heads)
    expected = cli_output(cli, tmp_path, q, k, v, preset, causal, sets)
    stages = dict(s.split("=", 1) for s in sets)
    r = lowbit.attention(q, k, v, preset=preset, causal=causal, stages=stages, threads=2)
    assert r["output"].shape == q.shape[:-1] + (v.shape[-1],)
    np.testing.assert_array_equal(r["output"].reshape(expected.shape).view(np.uint32), expected.view(np.uint32))
    # the codes are the output's, in the inputs' format
    np.testing.assert_array_equal(lowbit.decode(r["output_codes"], r["output_format"]), r["output"])
    assert r["lse"].shape == q.shape[:-1]
    assert r["preset"] == preset and dict(r["stages"])["output"] == r["output_format"]
    heads = int(np.prod(q.shape[:-2]))
    assert len(r["q"]) == heads and len(r["k"]) == len(r["v"]) == heads // q.shape[-3] * k.shape[-3]


def test_fa3_descales_equal_the_cli(cli, tmp_path):
    """FlashAttention-3's [3, batch, kv_heads] descales on E4M3 values, as the program's --descale."""
    q, k, v = qkv((2, 4, 90, 64), np.float32, seed=3, kv_heads=2)
    q, k, v = (lowbit.convert(t, "e4m3") for t in (q, k, v))  # E4M3 values, as the kernel reads them
    descale = np.array([[[0.5, 0.25], [1.0, 2.0]], [[0.125, 1.0], [0.5, 0.75]], [[3.0, 1.0], [1.5, 0.5]]], np.float32)
    sets = ("q=e4m3:none", "k=e4m3:none", "v=e4m3:none")
    expected = cli_output(cli, tmp_path, q, k, v, "fa3-fp8", True, sets, descale)
    r = lowbit.attention(q, k, v, preset="fa3-fp8", causal=True, stages=list(sets), descale=descale, threads=2)
    np.testing.assert_array_equal(r["output"].view(np.uint32), expected.view(np.uint32))
    # The descales matter: all ones gives another output.
    ones = lowbit.attention(q, k, v, preset="fa3-fp8", causal=True, stages=list(sets), descale=np.ones_like(descale))
    assert not np.array_equal(ones["output"], r["output"])
    with pytest.raises(ValueError, match=r"\[3, batch, kv_heads\]"):
        lowbit.attention(q, k, v, preset="fa3-fp8", stages=list(sets), descale=descale[:, :1])
    with pytest.raises(ValueError, match="granularity none"):
        lowbit.attention(q, k, v, preset="fa3-fp8", descale=descale)


def test_sageattn2_key_mean_equals_the_cli(cli, tmp_path):
    """SageAttention2's wrapper's K mean, [batch, kv_heads, 1, dim] as torch keeps it, as the program's --key-mean."""
    q, k, v = qkv((1, 4, 200, 64), np.float16, seed=5, kv_heads=2)
    key_mean = (k.astype(np.float32).mean(axis=2, keepdims=True) + 0.25).astype(np.float16)  # not the emulated one
    expected = cli_output(cli, tmp_path, q, k, v, "sageattn2-sm90", True, key_mean=key_mean)
    r = lowbit.attention(q, k, v, preset="sageattn2-sm90", causal=True, key_mean=key_mean, threads=2)
    np.testing.assert_array_equal(r["output"].view(np.uint16), expected.view(np.uint16))
    assert r["k"][0]["mean"].tolist() == key_mean[0, 0, 0].astype(np.float32).tolist()
    emulated = lowbit.attention(q, k, v, preset="sageattn2-sm90", causal=True, threads=2)
    assert not np.array_equal(emulated["k"][0]["mean"], r["k"][0]["mean"])
    with pytest.raises(ValueError, match=r"\[batch, kv_heads, head_dim\] = \[1, 2, 64\]"):
        lowbit.attention(q, k, v, preset="sageattn2-sm90", key_mean=key_mean[:, :1])
    with pytest.raises(ValueError, match="smooth-k=off"):
        lowbit.attention(q, k, v, preset="sageattn2-sm90", stages={"smooth-k": "off", "key-mean-format": "fp32",
                                                                   "key-residual-format": "fp32"}, key_mean=key_mean)


def test_stages_kept():
    q, k, v = qkv((2, 100, 64), np.float16)
    r = lowbit.attention(q, k, v, preset="sage2-8b")
    s = dict(r["stages"])
    assert s["q"].startswith("int8") and s["smooth-k"] == "on"
    q0 = r["q"][0]
    assert q0["element"] == "int8" and q0["codes"].dtype == np.uint8
    assert q0["codes"].shape[0] >= 100 and q0["groups"].shape == q0["codes"].shape
    assert q0["scales"].size == q0["groups"].max() + 1
    k0 = r["k"][0]
    np.testing.assert_allclose(k0["mean"], k[0].astype(np.float64).mean(axis=0), rtol=1e-5, atol=1e-6)
    # the rounded output is the unrounded one in fp16, to nearest even
    np.testing.assert_array_equal(r["output"], r["output_unrounded"].astype(np.float16).astype(np.float32))
    assert r["macs"] > 0
    assert lowbit.attention(q, k, v, keep_operands=False)["q"] == []


def test_threads_do_not_change_the_result():
    q, k, v = qkv((4, 80, 64), np.float16, seed=3)
    one = lowbit.attention(q, k, v, threads=1)
    two = lowbit.attention(q, k, v, threads=2)
    np.testing.assert_array_equal(one["output"], two["output"])
    np.testing.assert_array_equal(one["lse"], two["lse"])


def cli_error(cli, tmp_path, q, k, v, *args):
    for name, t in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{name}.npy", t)
    status, _, err = run_cli(cli, "attention", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v",
                             tmp_path / "v.npy", *args, check=False)
    assert status != 0
    return err.strip().removeprefix("lowbit: error: ")


def test_errors_as_the_cli(cli, tmp_path):
    q, k, v = qkv((2, 40, 64), np.float16)
    why = cli_error(cli, tmp_path, q, k, v, "--preset", "sage9")
    with pytest.raises(ValueError) as e:
        lowbit.attention(q, k, v, preset="sage9")
    assert str(e.value) == why
    why = cli_error(cli, tmp_path, q, k, v, "--preset", "sage2-8b", "--set", "accumulation=sideways")
    with pytest.raises(ValueError) as e:
        lowbit.attention(q, k, v, stages={"accumulation": "sideways"})
    assert str(e.value) == why.removeprefix("--set accumulation=sideways: ")  # the stage names itself
    why = cli_error(cli, tmp_path, q, k, v, "--preset", "sage2-8b", "--set", "q=e4m3:per-thread")
    with pytest.raises(ValueError) as e:
        lowbit.attention(q, k, v, stages=["q=e4m3:per-thread"])
    assert str(e.value) == why


def test_bad_inputs():
    q, k, v = qkv((2, 40, 64), np.float16)
    with pytest.raises(ValueError, match=r"q: expected \[heads, tokens, dim\] or \[batch, heads, tokens, dim\]"):
        lowbit.attention(q[0], k, v)
    with pytest.raises(ValueError, match="k"):
        lowbit.attention(q, k[:, :30], v)
    with pytest.raises(TypeError, match="q: dtype int32 is not taken"):
        lowbit.attention(q.astype(np.int32), k, v)
    with pytest.raises(ValueError, match="attention takes float32, float16 or bfloat16"):
        lowbit.attention(q.astype(np.float64), k, v)
    bad = q.astype(np.float32)
    bad[1, 3, 5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        lowbit.attention(bad, k.astype(np.float32), v.astype(np.float32))
