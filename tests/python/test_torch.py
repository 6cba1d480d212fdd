"""torch tensors in (through DLPack, no copy when contiguous on the CPU) give the numpy results."""

import numpy as np
import pytest

import lowbit


def test_encode_convert(torch):
    x = torch.randn(10000) * 50
    codes = lowbit.encode(x, "e4m3")
    assert isinstance(codes, torch.Tensor) and codes.dtype == torch.uint8
    np.testing.assert_array_equal(codes.numpy(), lowbit.encode(x.numpy(), "e4m3"))
    values = lowbit.convert(x, "e5m2")
    assert values.dtype == torch.float32
    np.testing.assert_array_equal(values.numpy(), lowbit.convert(x.numpy(), "e5m2"))
    # the same as torch's own fp8 casts (saturating to the format's max first, as torch does not)
    np.testing.assert_array_equal(codes.numpy(), x.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8).numpy())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"])
def test_narrow_dtypes(torch, dtype):
    x = (torch.randn(3000) * 8).to(getattr(torch, dtype))
    np.testing.assert_array_equal(lowbit.encode(x, "int8").numpy(), lowbit.encode(x.float().numpy(), "int8"))
    np.testing.assert_array_equal(lowbit.convert(x, "e2m1").numpy(), lowbit.convert(x.float().numpy(), "e2m1"))


def test_non_contiguous(torch):
    x = torch.randn(64, 64)
    np.testing.assert_array_equal(lowbit.encode(x.t(), "e4m3").numpy(), lowbit.encode(x.t().contiguous().numpy(), "e4m3"))


def test_attention(torch):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 80, 64, generator=g).to(torch.bfloat16) for _ in range(3))
    r = lowbit.attention(q, k, v, preset="sage2-8b", causal=True)
    assert isinstance(r["output"], torch.Tensor) and r["output"].shape == (1, 2, 80, 64)
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    as_numpy = [t.float().numpy().astype(ml_dtypes.bfloat16) for t in (q, k, v)]
    expected = lowbit.attention(*as_numpy, preset="sage2-8b", causal=True)
    np.testing.assert_array_equal(r["output"].numpy(), expected["output"])
    np.testing.assert_array_equal(r["lse"].numpy(), expected["lse"])


def test_mma_and_quantize(torch):
    x = torch.randn(32, 64)
    np.testing.assert_array_equal(lowbit.quantize(x, "int8", "per-token")["codes"],
                                  lowbit.quantize(x.numpy(), "int8", "per-token")["codes"])
    a = torch.randint(0, 0x7E, (16, 32), dtype=torch.uint8)
    b = torch.randint(0, 0x7E, (32, 8), dtype=torch.uint8)
    name = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
    np.testing.assert_array_equal(lowbit.mma(name, a, b), lowbit.mma(name, a.numpy(), b.numpy()))


def test_unsupported_dtype(torch):
    with pytest.raises(TypeError, match="torch dtype torch.int32 is not taken"):
        lowbit.encode(torch.ones(3, dtype=torch.int32), "e4m3")
