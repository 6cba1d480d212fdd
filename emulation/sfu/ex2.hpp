// MUFU.EX2 of sm_90 (PTX ex2.approx.ftz.f32, what exp2f compiles to under --use_fast_math), bit for
// bit: the special-function unit's exponential, which FlashAttention-3 and SageAttention run in
// their softmax. It is not correctly rounded (within 2 ulps); what it computes was recovered on an
// H100 (emulation/sfu/data/README.md) and is checked on every float32 input by `lowbit verify-exp2`.
//
// The model (source: measured, status: verified on all 2^32 inputs, H100):
//   X = trunc(|x| 2^23), an unsigned fixed-point number with 23 fraction bits (|x| < 130, so
//       X < 2^31): the unit reads the magnitude, never the bits below 2^-23.
//   n = X >> 23, i = X mod 2^23;
//   x >= +0 (sign bit clear): 2^n  T+[i], T+[i] = ex2(i 2^-23) in [1, 2);
//   x <= -0 (sign bit set):   2^-n T-[i], T-[i] = ex2(-i 2^-23) in [1/2, 1]
//       (so ex2(-x) is not 1 / ex2(x): the two tables are measured apart).
//   A result below 2^-126 is +0 (ftz), one at or above 2^128 is +inf; |x| >= 130 (infinities
//   included) gives +0 below zero and +inf above it; NaN gives a NaN.
// The tables are the unit's outputs at the 2^23 exact points of each sign, stored as the
// differences of consecutive bit patterns (0..3 in magnitude), gzip-compressed, in data/.
#pragma once

#include <cstdint>

#include "emulation/format.hpp"  // LOWBIT_HD

namespace lowbit::sfu {

inline constexpr int kEx2FractionBits = 23;
inline constexpr std::uint32_t kEx2TableSize = std::uint32_t{1} << kEx2FractionBits;
inline constexpr float kEx2Saturation = 130.0f;  // |x| at and beyond which the result is +0 or +inf

// The two tables as float32 bit patterns, kEx2TableSize entries each.
struct Ex2Tables {
  const std::uint32_t* positive = nullptr;  // ex2(i 2^-23)
  const std::uint32_t* negative = nullptr;  // ex2(-i 2^-23)
};

// The model on explicit tables (host, and device code that checks the model).
LOWBIT_HD inline float ex2_approx_ftz(float x, const Ex2Tables& tables) {
  if (!(x == x)) return x;
  std::uint32_t input;
  __builtin_memcpy(&input, &x, 4);
  const bool negative = (input >> 31) != 0;
  const float magnitude = negative ? -x : x;
  constexpr std::uint32_t kInfinity = 0x7f800000u;
  std::uint32_t bits;
  if (magnitude >= kEx2Saturation) {
    bits = negative ? 0u : kInfinity;
  } else {
    // magnitude 2^23 is exact (a power-of-two scaling) and below 2^31; the conversion truncates.
    const auto fixed = std::uint32_t(magnitude * float(kEx2TableSize));
    const int n = int(fixed >> kEx2FractionBits);
    const std::uint32_t i = fixed & (kEx2TableSize - 1);
    const std::uint32_t t = negative ? tables.negative[i] : tables.positive[i];
    const int exponent = int(t >> 23) + (negative ? -n : n);
    bits = exponent <= 0 ? 0u : exponent >= 255 ? kInfinity : (t & 0x007fffffu) | (std::uint32_t(exponent) << 23);
  }
  float result;
  __builtin_memcpy(&result, &bits, 4);
  return result;
}

// The tables of sm_90, decoded once from the embedded data (host; thread-safe).
const Ex2Tables& sm90_ex2_tables();

#if !defined(__CUDA_ARCH__)
// MUFU.EX2 of sm_90 on the host.
inline float sm90_ex2(float x) { return ex2_approx_ftz(x, sm90_ex2_tables()); }
#else
// The instruction itself on the device.
__device__ inline float sm90_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif

// CUDA's exp2f built without --use_fast_math (PyTorch's FlashAttention-2; its sm_90 SASS): MUFU.EX2 of
// x at x >= -126 (and NaN), else MUFU.EX2 of x / 2 squared, which keeps results below 2^-126.
LOWBIT_HD inline float sm90_exp2f(float x) {
  if (!(x < -126.0f)) return sm90_ex2(x);
  const float half = sm90_ex2(x * 0.5f);  // exact halving
  return half * half;
}

}  // namespace lowbit::sfu
