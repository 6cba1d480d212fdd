"""formats, Format, encode, decode and convert against the lowbit program, bit for bit."""

import re

import numpy as np
import pytest

import lowbit
from conftest import run_cli

# (format, rounding, overflow, seed, random bits): each runs through `lowbit convert` and encode().
CASES = [
    ("e4m3", "nearest-even", "saturate", 0, 32),
    ("e4m3", "toward-zero", "nan", 0, 32),
    ("e5m2", "nearest-even", "inf", 0, 32),
    ("e5m2fnuz", "nearest-away", "saturate", 0, 32),
    ("e2m1", "nearest-even", "saturate", 0, 32),
    ("e2m3", "toward-positive", "saturate", 0, 32),
    ("bf16", "toward-negative", "inf", 0, 32),
    ("fp16", "odd", "inf", 0, 32),
    ("ue8m0", "toward-positive", "saturate", 0, 32),
    ("int4", "nearest-even", "saturate", 0, 32),
    ("int8", "toward-zero", "saturate", 0, 32),
    ("e3m4", "nearest-even", "inf", 0, 32),
    ("e8m13", "toward-zero", "inf", 0, 32),
    ("p3109:k=8:p=3", "nearest-even", "saturate", 0, 32),
    ("e4m3", "stochastic", "saturate", 7, 8),
]


def inputs(spec, n_random=3000, seed=0):
    """float32 values: random bit patterns (NaN, Inf, subnormals included), every value of the
    format with its float32 neighbours, and the midpoints between consecutive values."""
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 2**32, n_random, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f = lowbit.Format(spec)
    values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.3], np.float32)
    if f.bits <= 16:
        v = np.unique(f.values()[~np.isnan(f.values())]).astype(np.float32)
        with np.errstate(over="ignore"):
            mid = ((v[:-1].astype(np.float64) + v[1:]) / 2).astype(np.float32)
        values = np.concatenate([values, v, mid, np.nextafter(v, np.inf), np.nextafter(v, -np.inf),
                                 np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)])
    return np.concatenate([patterns, values]).astype(np.float32)


def cli_codes(cli, x, spec, rounding, overflow, seed, random_bits, from_double=False):
    width = 16 if from_double else 8
    words = x.view(np.uint64 if from_double else np.uint32)
    text = "".join(f"0x{w:0{width}x}\n" for w in words)
    args = ["convert", "--to", spec, "--rounding", rounding, "--overflow", overflow, "--seed", seed,
            "--random-bits", random_bits] + (["--from-double"] if from_double else [])
    _, out, _ = run_cli(cli, *args, stdin=text)
    return np.array([int(line.split()[0], 16) for line in out.splitlines()], np.uint64)


@pytest.mark.parametrize("spec,rounding,overflow,seed,random_bits", CASES)
def test_encode_equals_cli(cli, spec, rounding, overflow, seed, random_bits):
    x = inputs(spec)
    expected = cli_codes(cli, x, spec, rounding, overflow, seed, random_bits)
    codes = lowbit.encode(x, spec, rounding, overflow, seed=seed, random_bits=random_bits)
    assert codes.shape == x.shape
    assert codes.dtype == {1: np.uint8, 2: np.uint16, 4: np.uint32}[codes.dtype.itemsize]
    np.testing.assert_array_equal(codes.astype(np.uint64), expected)
    # Two threads split the input; stochastic rounding keys each element by its index.
    np.testing.assert_array_equal(lowbit.encode(x, spec, rounding, overflow, seed=seed, random_bits=random_bits,
                                                threads=2), codes)
    # convert = decode(encode)
    values = lowbit.convert(x, spec, rounding, overflow, seed=seed, random_bits=random_bits)
    expected_values = lowbit.decode(codes, spec)
    np.testing.assert_array_equal(values.view(np.uint32 if values.dtype == np.float32 else np.uint64),
                                  expected_values.view(np.uint32 if values.dtype == np.float32 else np.uint64))


def test_large_input_threads_and_out():
    x = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32) * 100
    one = lowbit.encode(x, "e4m3")
    out = np.empty_like(one)
    assert lowbit.encode(x, "e4m3", out=out, threads=0) is out
    np.testing.assert_array_equal(out, one)
    with pytest.raises(ValueError, match="out: e4m3 codes need an unsigned 8-bit array"):
        lowbit.encode(x, "e4m3", out=np.empty(x.shape, np.uint16))


def test_array_likes():
    x = np.array([1.3, -500, 2.0**-12], np.float32)
    expected = lowbit.encode(x, "e4m3")
    np.testing.assert_array_equal(lowbit.encode(x.astype(">f4"), "e4m3"), expected)  # big-endian: swapped first
    np.testing.assert_array_equal(lowbit.encode(x[::-1], "e4m3"), expected[::-1])  # strided: a contiguous copy
    np.testing.assert_array_equal(lowbit.encode([1.3, -500], "e4m3"), expected[:2])  # a list: float64 values
    assert lowbit.encode(np.float32(1.3), "e4m3") == expected[0]


def test_float64_equals_cli_from_double(cli):
    x = np.random.default_rng(2).standard_normal(2000) * np.float64(2.0) ** np.random.default_rng(3).integers(-20, 20, 2000)
    expected = cli_codes(cli, x, "e5m2", "nearest-even", "saturate", 0, 32, from_double=True)
    np.testing.assert_array_equal(lowbit.encode(x, "e5m2").astype(np.uint64), expected)
    assert lowbit.convert(x, "e5m2").dtype == np.float64


def test_narrow_inputs_equal_float32():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    x = np.random.default_rng(4).standard_normal(5000).astype(np.float32) * 30
    for dtype in (np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                  ml_dtypes.float8_e4m3fnuz):
        narrow = x.astype(dtype)
        widened = narrow.astype(np.float32)
        for spec in ("e4m3", "e2m1", "int8", "fp32"):
            np.testing.assert_array_equal(lowbit.encode(narrow, spec), lowbit.encode(widened, spec), err_msg=f"{dtype} {spec}")


def test_bfloat16_codes_are_ml_dtypes_bits():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    x = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    np.testing.assert_array_equal(lowbit.encode(x, "bf16"), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    np.testing.assert_array_equal(lowbit.encode(x, "e4m3"), x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))


def parse_cli_table(out):
    """`lowbit formats`: {name: (bits, e, m, bias, max finite, min normal, min subnormal)}."""
    rows = {}
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 8 or not parts[1].isdigit():
            continue
        rows[parts[0]] = tuple(int(p) for p in parts[1:5]) + tuple(float(p) for p in parts[5:8])
    return rows


def test_formats_equal_cli(cli):
    _, out, _ = run_cli(cli, "formats")
    table = parse_cli_table(out)
    names = [f.name for f in lowbit.formats()]
    assert names == list(table)
    for f in lowbit.formats():
        assert (f.bits, f.exponent_bits, f.mantissa_bits, f.bias, f.max_finite, f.min_normal, f.min_positive) == table[f.name]
        assert f.origin


@pytest.mark.parametrize("spec", ["e4m3", "e5m2", "e2m1", "ue8m0", "int4", "e4m3:bias=8:no-subnormals", "p3109:k=8:p=3"])
def test_format_equals_cli(cli, spec):
    _, out, _ = run_cli(cli, "format", spec)
    f = lowbit.Format(spec)
    fields = dict(re.findall(r"^(\w[\w ()]*?)\s{2,}(.*)$", out, re.M))
    assert fields["format"].split()[0] == f.name
    if f.kind == "floating":
        assert int(fields["bias"]) == f.bias
        assert float(fields["max finite"].split()[0]) == f.max_finite
        assert float(fields["min positive"].split()[0]) == f.min_positive
    codes = re.findall(r"^(0x[0-9a-f]+)\s+\S+\s+(\S+)$", out, re.M)
    assert len(codes) == 1 << f.bits
    values = f.values()
    for code, value in codes:
        expected = float(value)
        got = values[int(code, 16)]
        assert got == expected or (np.isnan(got) and np.isnan(expected)), code


def test_format_object():
    f = lowbit.Format("e4m3")
    assert (f.max_finite, f.min_positive, f.nan, f.inf, f.max_finite_code, f.canonical_nan_code) == (448.0, 2.0**-9, "top", "none", 0x7E, 0x7F)
    assert lowbit.Format(f) == f and repr(f) == "lowbit.Format('e4m3')"
    assert lowbit.Format("int4").lowest_finite == -8
    assert lowbit.Format("e2m1").codes().tolist() == list(range(16))
    assert lowbit.Format("e2m1").values()[:8].tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]


def test_decode():
    np.testing.assert_array_equal(lowbit.decode(np.array([0x7E, 0xFE, 0x01], np.uint8), "e4m3"), [448, -448, 2.0**-9])
    assert np.isnan(lowbit.decode([0x7F], "e4m3")[0])
    assert lowbit.decode(np.array([-8, 7], np.int8).view(np.uint8) & 0xF, "int4").tolist() == [-8, 7]
    assert lowbit.decode([1], "fp32").dtype == np.float32
    with pytest.raises(ValueError, match=r"codes: element 1 \(256\) is not a code of e4m3 \(8 bits\)"):
        lowbit.decode([1, 256], "e4m3")
    with pytest.raises(TypeError, match="expected integer codes"):
        lowbit.decode(np.array([1.0]), "e4m3")


def test_bad_format_message_equals_cli(cli):
    status, _, err = run_cli(cli, "format", "e9m2x", check=False)
    assert status == 2
    why = err.strip().split("'e9m2x': ", 1)[1]
    with pytest.raises(ValueError) as e:
        lowbit.Format("e9m2x")
    assert str(e.value) == f"format 'e9m2x': {why}"
    with pytest.raises(ValueError, match="format 'e9m2x'"):
        lowbit.encode(np.zeros(3, np.float32), "e9m2x")


def test_bad_options_message_equals_cli(cli):
    status, _, err = run_cli(cli, "convert", "--to", "e4m3", "--overflow", "inf", stdin="1\n", check=False)
    assert status == 2
    why = err.strip().removeprefix("lowbit convert: ")
    with pytest.raises(ValueError) as e:
        lowbit.encode(np.ones(3, np.float32), "e4m3", overflow="inf")
    assert str(e.value) == why
    with pytest.raises(ValueError, match="rounding 'up': expected nearest-even"):
        lowbit.encode(np.ones(3, np.float32), "e4m3", rounding="up")
    with pytest.raises(TypeError, match="dtype int64 is not taken"):
        lowbit.encode(np.ones(3, np.int64), "e4m3")
