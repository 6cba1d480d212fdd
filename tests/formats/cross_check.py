#!/usr/bin/env python3
"""Cross-check lowbit's encode/decode against independent implementations from PyPI.

Usage: cross_check.py [--require-oracles] LIBRARY CASE
  LIBRARY  the lowbit_c_api shared library (emulation/c_api.cpp)
  CASE     ml_dtypes:<type>  every float32 bit pattern (2^32) rounded to nearest even, for
                             float8_e4m3fnuz (= P3109 K8P4 finite), float8_e5m2fnuz (= P3109
                             K8P3 finite), float8_e3m4, float8_e4m3b11fnuz, float8_e4m3 (IEEE-like)
                             and float8_e8m0fnu
           ml_dtypes:decode  every code of every ml_dtypes float type of at most 16 bits
           gfloat:p3109      P3109 K8 (p = 1..7 signed, 1..8 unsigned, extended and finite),
                             K4P2, K6P3, K16P11, K16P8 unsigned: every code decoded; rounding in 5
                             modes, saturating or not, of every value and midpoint with the two
                             float32 on either side, 2^17 random float32 and the specials
           gfloat:decode     every code of further formats written as gfloat FormatInfo records
Exits 77 (skipped) when numpy, ml_dtypes or gfloat is not installed, or 1 (failed) with
--require-oracles (CMake's LOWBIT_REQUIRE_ORACLES, on under CI=true). A case that compares
nothing fails.

How our options map onto each library, and the differences found (documented, not mismatches):
  * ml_dtypes casts round to nearest even and overflow to Inf where the type has one, else NaN:
    our Overflow::inf / Overflow::nan. For a NaN input it gives the quiet NaN with the input's
    sign (e3m4 0x78/0xf8, IEEE-like e4m3 0x7c/0xfc); we give the canonical NaN, positive with
    every other bit set (0x7f), as CUDA's float32 conversions do. For NaN inputs only NaN-ness is
    compared.
  * float8_e8m0fnu has no zero and no sign: ml_dtypes turns 0 and negative numbers into NaN
    (0xFF), where we encode |x| and clip 0 to 2^-127 (code 0) as CUDA's e8m0 conversion does
    (checked: ours must be our code of |x|);
    ml_dtypes rounds every tie 1.5 * 2^e up, where ties-to-even on the code (P3109, gfloat)
    keeps 2^e when its code is even; and ml_dtypes rounds the float32 subnormals in
    (2^-127, 1.5 * 2^-127) up to 2^-126, the farther neighbour (a defect of ml_dtypes 0.6.0: not
    round-to-nearest). Each kind is counted and the count checked against the number of float32
    inputs the kind covers, worked out from the formats (expected_differences).
  * gfloat's sat=True is Overflow::saturate; sat=False is Overflow::inf for extended P3109
    formats and Overflow::nan for finite ones. gfloat also defines P3109 signed formats with
    p = k (no exponent bits), which our records reject (a floating format needs an exponent
    bit); those are not compared. gfloat's stochastic modes round the fraction to nearest
    before comparing with the random bits, ours truncate it: not compared.
  * gfloat rounds a negative input of an unsigned format to a negative number (not a value of the
    format); we encode |x|. Unsigned formats are compared on non-negative inputs and NaN.
  * gfloat's has_subnormals=False reads the field-0 codes as normal numbers, ours flush them to
    zero: formats without subnormals are not compared with gfloat.
"""
import argparse
import ctypes
import sys
from collections import Counter

SKIPPED = 77


class Lowbit:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        u32p = ctypes.POINTER(ctypes.c_uint32)
        self.lib.lowbit_encode_float32.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                                   ctypes.POINTER(ctypes.c_float), u32p, ctypes.c_uint64,
                                                   ctypes.c_char_p, ctypes.c_uint64]
        self.lib.lowbit_decode.argtypes = [ctypes.c_char_p, u32p, ctypes.POINTER(ctypes.c_double), ctypes.c_uint64,
                                           ctypes.c_char_p, ctypes.c_uint64]

    def encode(self, spec, rounding, overflow, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty(x.shape, dtype=np.uint32)
        error = ctypes.create_string_buffer(512)
        status = self.lib.lowbit_encode_float32(spec.encode(), rounding.encode(), overflow.encode(),
                                                x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)), x.size, error,
                                                len(error))
        if status != 0:
            raise ValueError(f"{spec}: {error.value.decode()}")
        return out

    def decode(self, spec, codes):
        codes = np.ascontiguousarray(codes, dtype=np.uint32)
        out = np.empty(codes.shape, dtype=np.float64)
        error = ctypes.create_string_buffer(512)
        if self.lib.lowbit_decode(spec.encode(), codes.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)),
                                  out.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), codes.size, error,
                                  len(error)) != 0:
            raise ValueError(f"{spec}: {error.value.decode()}")
        return out


def same_values(a, b):
    """Element-wise: both NaN, or equal with the same sign (so +0 and -0 differ)."""
    return (np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))


class Tally:
    def __init__(self, name):
        self.name, self.checked, self.mismatches, self.lines = name, 0, 0, []

    def add(self, checked, failing_lines):
        self.checked += checked
        self.mismatches += len(failing_lines)
        self.lines.extend(failing_lines[: max(0, 100000 - len(self.lines))])

    def finish(self):
        print(f"{self.name}: {self.checked} checked, {self.mismatches} mismatches")
        if self.checked == 0:
            print(f"FAIL: {self.name} compared nothing")
            return False
        if self.mismatches:
            path = self.name.replace(":", "_") + ".mismatches.txt"
            with open(path, "w") as out:
                out.write("\n".join(self.lines) + "\n")
            print(f"failing inputs in {path}; first:\n" + "\n".join(self.lines[:10]))
        return self.mismatches == 0


# ---- ml_dtypes ----

ML_DTYPES_ROUNDING = {
    # type: (our spec, our overflow policy)
    "float8_e4m3fnuz": ("e4m3fnuz", "nan"),
    "float8_e5m2fnuz": ("e5m2fnuz", "nan"),
    "float8_e3m4": ("e3m4", "inf"),
    "float8_e4m3b11fnuz": ("e4m3fnuz:bias=11", "nan"),
    "float8_e4m3": ("e4m3:nan=ieee:inf=ieee", "inf"),
    "float8_e8m0fnu": ("ue8m0", "nan"),
}


NAN_KIND = "NaN input: both NaN; ml_dtypes a quiet NaN of the input's sign, ours the canonical NaN"
E8M0_SIGN_KIND = "zero or negative input: ml_dtypes NaN, ours encodes |x| (0 clipped to 2^-127)"
E8M0_TIE_KIND = "tie 1.5*2^e: ml_dtypes rounds up, ours keeps the even code"
E8M0_LOW_KIND = "x in (2^-127, 1.5*2^-127): ml_dtypes 2^-126 (not the nearest), ours 2^-127"


def float32_bits(v):
    return int(np.array(v, dtype=np.float32).view(np.uint32))


def expected_differences(type_name):
    """How many float32 inputs each documented difference must cover, from the formats and the
    float32 encoding (not from either implementation's output)."""
    # Types with IEEE NaNs: ml_dtypes' quiet NaN (top mantissa bit only) is never our all-ones
    # code, so every float32 NaN (exponent 255, mantissa not 0, either sign) differs.
    if type_name in ("float8_e3m4", "float8_e4m3"):
        return {NAN_KIND: 2 * ((1 << 23) - 1)}
    if type_name != "float8_e8m0fnu":
        return {}  # the fnuz types have one NaN code, 0x80: NaN inputs agree
    # E8M0: 2^(code - 127) for codes 0..254; 0xff is NaN. Rounding to nearest, |x| overflows above
    # the tie 1.5 * 2^127 (which keeps max finite's even code 0xfe): every float32 magnitude up to
    # it, as a negative input (-0 included), and +0 differ.
    not_overflowing = float32_bits(1.5 * 2.0**127) + 1
    # Ties between the codes c and c + 1 (c + 1 = 0xff is the overflow): ours keeps even c.
    even_ties = len(range(0, 255, 2))
    low_subnormals = float32_bits(1.5 * 2.0**-127) - float32_bits(2.0**-127) - 1
    return {E8M0_SIGN_KIND: not_overflowing + 1, E8M0_TIE_KIND: even_ties, E8M0_LOW_KIND: low_subnormals}


def e8m0_documented_differences(lowbit, spec, x, ours, theirs):
    """Masks of the documented ways ml_dtypes' float8_e8m0fnu differs from ours, each checking
    what ours is by our rules (convert.hpp): an unsigned format encodes |x|, and a format without
    zero clips what lies below its smallest value (2^-127, code 0) to it."""
    with np.errstate(invalid="ignore"):
        zero_or_negative = ~np.isnan(x) & (x <= 0)
        significand, _ = np.frexp(x)
    ours_of_magnitude = lowbit.encode(spec, "nearest-even", "nan", np.abs(x))
    sign_or_zero = (theirs == 0xFF) & zero_or_negative & (ours == ours_of_magnitude) & ((x != 0) | (ours == 0))
    tie = (x > 0) & (significand == 0.75) & (theirs == ours + 1) & (ours % 2 == 0)
    # float32 subnormals just above 2^-127 (code 0): ml_dtypes gives 2^-126 (code 1), the farther
    # neighbour; ours is the nearer one.
    low_subnormal = (x > 2.0**-127) & (x < 1.5 * 2.0**-127) & (ours == 0) & (theirs == 1)
    return {E8M0_SIGN_KIND: sign_or_zero, E8M0_TIE_KIND: tie, E8M0_LOW_KIND: low_subnormal}


def ml_dtypes_rounding(lowbit, type_name):
    dtype = getattr(ml_dtypes, type_name)
    spec, overflow = ML_DTYPES_ROUNDING[type_name]
    all_codes = np.arange(256, dtype=np.uint32)
    our_nan = np.isnan(lowbit.decode(spec, all_codes))
    with np.errstate(invalid="ignore"):
        their_nan = np.isnan(all_codes.astype(np.uint8).view(dtype).astype(np.float32))
    tally = Tally(f"ml_dtypes:{type_name}")
    documented = Counter()
    nan_inputs = 0
    chunk = 1 << 24
    offsets = np.arange(chunk, dtype=np.uint32)
    for start in range(0, 1 << 32, chunk):
        x = (offsets + np.uint32(start)).view(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            theirs_all = x.astype(dtype).view(np.uint8)
        ours_all = lowbit.encode(spec, "nearest-even", overflow, x)
        nan_inputs += int(np.count_nonzero(np.isnan(x)))
        # Only the differing inputs are looked at further.
        where = np.nonzero(ours_all != theirs_all)[0]
        x, ours, theirs = x[where], ours_all[where], theirs_all[where].astype(np.uint32)
        unexplained = np.ones(where.size, dtype=bool)
        # NaN inputs: ml_dtypes keeps the sign of the NaN; both must be NaN codes.
        nan_sign = np.isnan(x) & our_nan[ours] & their_nan[theirs]
        documented[NAN_KIND] += int(nan_sign.sum())
        unexplained &= ~nan_sign
        if type_name == "float8_e8m0fnu":
            for kind, mask in e8m0_documented_differences(lowbit, spec, x, ours, theirs).items():
                documented[kind] += int((unexplained & mask).sum())
                unexplained &= ~mask
        failing = np.nonzero(unexplained)[0]
        tally.add(chunk, [f"0x{int(start + where[i]):08x} ({x[i]!r}) ours 0x{int(ours[i]):02x} "
                          f"ml_dtypes 0x{int(theirs[i]):02x}" for i in failing[:1000]])
        tally.mismatches += max(0, failing.size - 1000)
    print(f"{type_name} vs {spec} (overflow={overflow}), {nan_inputs} NaN inputs")
    expected = expected_differences(type_name)
    counts_ok = True
    for kind in sorted(set(documented) | set(expected)):
        count, wanted = documented.get(kind, 0), expected.get(kind, 0)
        print(f"  documented difference, {count} inputs (expected {wanted}): {kind}")
        counts_ok &= count == wanted
    if not counts_ok:
        print("FAIL: the documented differences do not cover exactly the expected inputs")
    return tally.finish() and counts_ok


def ml_dtypes_decode(lowbit):
    tally = Tally("ml_dtypes:decode")
    cases = [("float8_e4m3fn", "e4m3"), ("float8_e4m3fnuz", "e4m3fnuz"), ("float8_e5m2", "e5m2"),
             ("float8_e5m2fnuz", "e5m2fnuz"), ("float8_e3m4", "e3m4"), ("float8_e4m3b11fnuz", "e4m3fnuz:bias=11"),
             ("float8_e4m3", "e4m3:nan=ieee:inf=ieee"), ("float8_e8m0fnu", "ue8m0"), ("float6_e2m3fn", "e2m3"),
             ("float6_e3m2fn", "e3m2"), ("float4_e2m1fn", "e2m1"), ("bfloat16", "bf16")]
    for type_name, spec in cases:
        dtype = getattr(ml_dtypes, type_name)
        bits = dtype(0).itemsize * 8
        code_bits = {"float6_e2m3fn": 6, "float6_e3m2fn": 6, "float4_e2m1fn": 4}.get(type_name, bits)
        codes = np.arange(1 << code_bits, dtype=np.uint32)
        storage = np.uint16 if bits == 16 else np.uint8
        with np.errstate(invalid="ignore"):
            theirs = codes.astype(storage).view(dtype).astype(np.float64)
        ours = lowbit.decode(spec, codes)
        bad = np.nonzero(~same_values(ours, theirs))[0]
        tally.add(codes.size, [f"{type_name} code 0x{int(c):x}: ours {ours[c]!r} ml_dtypes {theirs[c]!r}" for c in bad])
    codes = np.arange(1 << 16, dtype=np.uint32)
    theirs = codes.astype(np.uint16).view(np.float16).astype(np.float64)
    bad = np.nonzero(~same_values(lowbit.decode("fp16", codes), theirs))[0]
    tally.add(codes.size, [f"float16 code 0x{int(c):x}" for c in bad])
    return tally.finish()


# ---- gfloat ----

def boundary_inputs(values, mantissa_bits, rng):
    """float32 inputs: each value and midpoint (and the one beyond max), two float32 either side,
    2^17 random float32 across the range (log-uniform), the specials; both signs."""
    finite = np.unique(values[np.isfinite(values)])
    top = finite.max()
    beyond = top + 2.0 ** (np.floor(np.log2(top)) - mantissa_bits)
    line = np.append(finite, beyond)
    points = np.concatenate([line, (line[:-1] + line[1:]) / 2]).astype(np.float32)
    around = [points]
    for direction in (np.float32(np.inf), np.float32(-np.inf)):
        step = points
        for _ in range(2):
            step = np.nextafter(step, direction)
            around.append(step)
    smallest = finite[finite > 0].min()
    random = np.exp2(rng.uniform(np.log2(smallest) - 3, np.log2(beyond) + 2, 1 << 17)).astype(np.float32)
    specials = np.array([0.0, np.inf, np.nan, 1e30, 1e-30, 2.0 * beyond], dtype=np.float32)
    x = np.concatenate(around + [random, specials])
    return np.concatenate([x, -x])


GFLOAT_MODES = {"TiesToEven": "nearest-even", "TiesToAway": "nearest-away", "TowardZero": "toward-zero",
                "TowardPositive": "toward-positive", "TowardNegative": "toward-negative"}


def gfloat_p3109(lowbit):
    from gfloat import Domain, RoundMode, Signedness, decode_ndarray, round_ndarray
    from gfloat.formats import format_info_p3109
    tally = Tally("gfloat:p3109")
    rng = np.random.default_rng(3109)
    formats = [(8, p, signedness, domain) for signedness in (Signedness.Signed, Signedness.Unsigned)
               for p in range(1, 8 if signedness == Signedness.Signed else 9) for domain in (Domain.Extended, Domain.Finite)]
    formats += [(4, 2, Signedness.Signed, Domain.Extended), (6, 3, Signedness.Signed, Domain.Finite),
                (16, 11, Signedness.Signed, Domain.Extended), (16, 8, Signedness.Unsigned, Domain.Finite)]
    for k, p, signedness, domain in formats:
        fi = format_info_p3109(k, p, signedness, domain)
        spec = f"p3109:k={k}:p={p}" + (":unsigned" if signedness == Signedness.Unsigned else "") + \
               (":finite" if domain == Domain.Finite else "")
        codes = np.arange(1 << k, dtype=np.uint32)
        ours_values = lowbit.decode(spec, codes)
        theirs_values = decode_ndarray(fi, codes.astype(np.int64)).astype(np.float64)
        bad = np.nonzero(~same_values(ours_values, theirs_values))[0]
        tally.add(codes.size, [f"{spec} decode 0x{int(c):x}: ours {ours_values[c]} gfloat {theirs_values[c]}"
                               for c in bad])
        with np.errstate(over="ignore"):
            x = boundary_inputs(ours_values, p - 1, rng)
        if signedness == Signedness.Unsigned:
            x = x[~(x < 0)]  # gfloat rounds negative inputs of unsigned formats to negative numbers
        for mode, rounding in GFLOAT_MODES.items():
            for sat in (True, False):
                overflow = "saturate" if sat else ("inf" if domain == Domain.Extended else "nan")
                with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                    theirs = round_ndarray(fi, x.astype(np.float64), getattr(RoundMode, mode), sat)
                ours = lowbit.decode(spec, lowbit.encode(spec, rounding, overflow, x))
                bad = np.nonzero(~same_values(ours, np.asarray(theirs, dtype=np.float64)))[0]
                tally.add(x.size, [f"{spec} {mode} sat={sat} x={x[i]!r}: ours {ours[i]!r} gfloat {theirs[i]!r}"
                                   for i in bad])
    return tally.finish()


def gfloat_decode(lowbit):
    from gfloat import Domain, FormatInfo, decode_ndarray
    from gfloat.formats import (format_info_bfloat16, format_info_binary16, format_info_ocp_e2m1,
                                format_info_ocp_e2m3, format_info_ocp_e3m2, format_info_ocp_e4m3,
                                format_info_ocp_e5m2, format_info_ocp_e8m0, format_info_p3109)

    def info(name, k, p, bias, signed=True, extended=False, negative_zero=True, high_nans=0):
        return FormatInfo(name, k=k, precision=p, bias=bias, is_signed=signed,
                          domain=Domain.Extended if extended else Domain.Finite, has_nz=negative_zero,
                          num_high_nans=high_nans, has_subnormals=True, is_twos_complement=False)

    cases = [
        ("e4m3", format_info_ocp_e4m3), ("e5m2", format_info_ocp_e5m2), ("e2m3", format_info_ocp_e2m3),
        ("e3m2", format_info_ocp_e3m2), ("e2m1", format_info_ocp_e2m1), ("ue8m0", format_info_ocp_e8m0),
        ("bf16", format_info_bfloat16), ("fp16", format_info_binary16),
        ("p3109:k=4:p=2", format_info_p3109(4, 2)), ("p3109:k=6:p=3", format_info_p3109(6, 3)),
        ("p3109:k=16:p=11", format_info_p3109(16, 11)),
        ("e3m4", info("e3m4", 8, 5, 3, extended=True, high_nans=15)),
        ("ue5m3", info("ue5m3", 8, 4, 15, signed=False, extended=True, high_nans=7)),
        ("e6m9", info("e6m9", 16, 10, 31, extended=True, high_nans=511)),
        ("e4m3:nan=none:inf=none", info("e4m3 no specials", 8, 4, 7)),
        ("ue4m4fnu", info("ue4m4fnu", 8, 5, 7, signed=False, high_nans=1)),
        ("e4m3:bias=-3", info("e4m3 bias -3", 8, 4, -3, high_nans=1)),
        ("e4m3:bias=20", info("e4m3 bias 20", 8, 4, 20, high_nans=1)),
        ("e5m0", info("e5m0", 6, 1, 15)),
        ("e3m4fnuz", info("e3m4fnuz", 8, 5, 4, negative_zero=False)),
    ]
    tally = Tally("gfloat:decode")
    for spec, fi in cases:
        codes = np.arange(1 << fi.k, dtype=np.uint32)
        ours = lowbit.decode(spec, codes)
        theirs = decode_ndarray(fi, codes.astype(np.int64)).astype(np.float64)
        bad = np.nonzero(~same_values(ours, theirs))[0]
        tally.add(codes.size, [f"{spec} code 0x{int(c):x}: ours {ours[c]!r} gfloat {theirs[c]!r}" for c in bad])
    return tally.finish()


def main():
    global np, ml_dtypes
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library")
    parser.add_argument("case")
    parser.add_argument("--require-oracles", action="store_true",
                        help="fail instead of skipping when numpy, ml_dtypes or gfloat is missing")
    args = parser.parse_args()
    library, case = args.library, args.case
    try:
        import numpy as np
        if case.startswith("ml_dtypes:"):
            import ml_dtypes
        else:
            import gfloat  # noqa: F401
    except ImportError as missing:
        if args.require_oracles:
            print(f"FAIL: {missing}; the oracles are required here (LOWBIT_REQUIRE_ORACLES, on under CI=true)")
            return 1
        print(f"skipped: {missing}")
        return SKIPPED
    lowbit = Lowbit(library)
    if case == "ml_dtypes:decode":
        ok = ml_dtypes_decode(lowbit)
    elif case.startswith("ml_dtypes:"):
        ok = ml_dtypes_rounding(lowbit, case.split(":", 1)[1])
    elif case == "gfloat:p3109":
        ok = gfloat_p3109(lowbit)
    elif case == "gfloat:decode":
        ok = gfloat_decode(lowbit)
    else:
        print(f"unknown case {case}")
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
