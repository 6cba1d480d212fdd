// MUFU.LG2 of sm_90 (PTX lg2.approx.ftz.f32, what __logf and log2f's fast path run on), bit for bit
// for x >= 1/2: the unit's logarithm, which FlashAttention's log-sum-exp takes of a row sum (near or
// above 1: the row maximum's term is 1, or 2^8 / 2^8 in FlashAttention-3 FP8, up to the rounding of
// its exponent). What it computes was recovered on an H100 (kernels/probes/sm90_lg2_structure.cu,
// emulation/sfu/data/README.md).
//
// The model (source: measured, status: verified on every normal x >= 1/2, H100):
//   x = 2^e (1 + i 2^-23), e >= 0: lg2(x) = float(e + T[i]) rounded toward zero, where
//   T[i] = lg2(1 + i 2^-23) as the unit gives it, a multiple of 2^-36 (so e + T[i] is exact in double);
//   x in [1/2, 1): that rule with e = -1, corrected by the measured difference D[i] of the result's
//   bits (6,128,552 of the 2^23 mantissas differ from the rule).
// Below 1/2 the rule fails on 21,303,568 inputs and no table is recorded: not modelled.
#pragma once

#include <cstdint>

namespace lowbit::sfu {

inline constexpr int kLg2FractionBits = 36;  // T[i] 2^36 is an integer
inline constexpr std::uint32_t kLg2TableSize = std::uint32_t{1} << 23;

// T[i] 2^36, decoded once from the embedded data (thread-safe).
const std::uint64_t* sm90_lg2_table();

// MUFU.LG2 of sm_90 on the host for finite x >= 1/2; throws std::domain_error for any other x.
float sm90_lg2(float x);

}  // namespace lowbit::sfu
