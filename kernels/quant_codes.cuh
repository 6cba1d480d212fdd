// The quantizers' codes on the GPU, bit for bit as quant::quantize makes them: a value x of a group
// of scale s (amax / 127 for INT8, amax / 448 for E4M3) is encoded from the fp32 quotient x / s,
// rounded to nearest even; INT8 then rounds it to the nearest integer, ties to even, saturating,
// and E4M3 is cvt.rn.satfinite. A zero scale gives zero codes.
// The quotient comes from the scale's inverse RN(1 / s), computed once per scale (inverse_of):
// steps::quotient_by_inverse, three operations where a division takes a dozen. A scale below 2^-92
// divides (steps::invertible_scale); the values of one call share a group, so that branch is the
// group's. SmallScales: whether the inputs can give such a scale. bf16 and fp32 inputs can; fp16
// inputs cannot, and skip the branch: their values are multiples of 2^-24, a key mean of at most
// 2^31 of them is 0 or a normal fp32 of 2^-55 or more, so a group's amax (smoothed keys' too, as
// multiples of 2^-78) is 0 or at least 2^-78, and its scale 0 or above 2^-85.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "emulation/attention/kernel_steps.hpp"

namespace lowbit::kernels {

// The inverse a scale's codes multiply by; 0 (unused) for a zero scale or one below 2^-92.
__device__ inline float inverse_of(float scale) {
  return lowbit::attention::steps::invertible_scale(scale) ? __frcp_rn(scale) : 0.0f;
}

// Two integers saturated to int8, packed above each other: low in bits 0-7, high in bits 8-15,
// `above` shifted into bits 16-31 (cvt.pack.sat.s8.s32.b32; after cvt.rni.s32.f32 ptxas makes
// the pair one F2IP.S8.F32).
__device__ inline std::uint32_t pack_int8(int low, int high, std::uint32_t above) {
  std::uint32_t packed;
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, %3;" : "=r"(packed) : "r"(high), "r"(low), "r"(above));
  return packed;
}

// The INT8 codes of N values of one group, value e in byte e (bytes past N zero). A zero quotient's
// sign is no integer's business, so the quotient skips it (quotient_by_inverse), and a zero scale
// needs no branch: its inverse is 0, so every quotient is 0.
template <bool SmallScales, int N>
__device__ inline std::uint32_t int8_codes(const float (&x)[N], float scale, float inverse) {
  static_assert(N == 2 || N == 4, "a lane's 2 or 4 channels of a row, or a fragment register's 4 values");
  namespace steps = lowbit::attention::steps;
  int q[N];
  if (!SmallScales || steps::invertible_scale(scale) || scale == 0.0f) {
#pragma unroll
    for (int e = 0; e < N; ++e) q[e] = __float2int_rn(steps::quotient_by_inverse(x[e], scale, inverse));
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) q[e] = __float2int_rn(__fdiv_rn(x[e], scale));
  }
  if constexpr (N == 4) return pack_int8(q[0], q[1], pack_int8(q[2], q[3], 0));
  else return pack_int8(q[0], q[1], 0);
}

// The E4M3 codes of N values of one group, value j in byte j: N = 4, a word of two pairs
// (steps::e4m3_code_quad), or one code. A zero scale returns 0 before dividing (a -0 quotient
// would be code 0x80).
template <bool SmallScales, int N>
__device__ inline std::uint32_t e4m3_codes(const float (&v)[N], float scale, float inverse) {
  static_assert(N == 1 || N == 4, "one value or a word of four");
  namespace steps = lowbit::attention::steps;
  if (scale == 0.0f) return 0;
  float q[N];
  if (!SmallScales || steps::invertible_scale(scale)) {
#pragma unroll
    for (int j = 0; j < N; ++j) q[j] = steps::divide_by_inverse(v[j], scale, inverse);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) q[j] = __fdiv_rn(v[j], scale);
  }
  if constexpr (N == 4) return steps::e4m3_code_quad(q[0], q[1], q[2], q[3]);
  else return steps::e4m3_code(q[0]);
}

}  // namespace lowbit::kernels
