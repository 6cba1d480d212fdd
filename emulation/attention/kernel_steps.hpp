// The fp32 per-thread steps of a quantized FlashAttention-style forward pass, written once for
// the CPU pipeline (emulation/attention/) and the CUDA kernels (kernels/): both call these
// functions, so a step cannot differ between them. Every operation is an IEEE single rounding
// named explicitly (add_rn, mul_rn, fma_rn, div_rn): no contraction, no fast-math; MUFU only as the
// sm90-ex2 exp2 unit, which the host reproduces bit for bit (emulation/sfu/ex2.hpp).
//
// One row r of a query block, one KV block j of `block_kv` keys, in the order a kernel runs it
// (the contract the sage2-8b kernel and the emulated pipeline both follow):
//   1. s[c]      = dequantize_score(acc[c], qk_scale)          (score in log2 units, see below)
//                  masked keys (causal: key > query; keys past N): s[c] = -inf
//   2. m         = max(m, max_c s[c])                          (exact; lanes reduced by butterfly;
//                                                                m starts at -inf)
//   3. offset    = row_offset(m, p_log2_scale)                  (usable_max(m) - p_log2_scale: P's
//                                                                static scale folded into the exponent)
//   4. alpha     = rescale(offset_old, offset)                  (offset_old: carried_offset, -inf until
//                                                                a key is unmasked: alpha = 0 there)
//   5. p[c]      = probability(s[c], offset)                    (exp2(s - offset): p in [0, 2^p_log2_scale])
//   6. l_lane    = fma_rn(l_lane, alpha, tree_sum(p[c] for the lane's columns in column order))
//   7. P code    = e4m3 satfinite, round to nearest even, of p[c]
//   8. R         = P V through the MMA model, a fresh accumulator (+0) chained over the block's
//                  k steps (Hopper FP8: FP22)
//   9. o[c]      = fma_rn(o[c], alpha, R[c])                     (two-level accumulation: fp32)
// With the row sum on the tensor cores (RowSum::pv), step 6 is left out and step 8 also computes
// R_sum = the row's P codes times a column of ones (E4M3 1.0) through the same MMA model, from +0:
//   9'. l        = fma_rn(l, alpha, R_sum)                        (accumulate_output: l as one more o)
// one l a row, held by each of its 4 lanes alike (every column of the ones tile gives the same sum).
// With the exponent's argument fused (ExpArgument::fused; SageAttention2's own kernel, preset
// sage2-8b-ex2), steps 1 and 5 share one rounding: the pair's scale is fused_scale(scale) (never 0,
// so a masked key's -inf stays -inf), step 2 takes its maximum over dequantize_score(acc, scale) as
// step 1 would (m, offset and alpha as above), and step 5 is
//   5'. p[c]     = fused_probability(acc[c], scale, offset)         (exp2(fma(acc, scale, -offset)),
//                                                                masked keys: acc = -inf)
// one instruction a score fewer. Its argument also carries m's own rounding (half an ulp of m,
// which the rounded steps cancel at the maximum): p can pass 2^p_log2_scale by that (E4M3
// saturates it), 2^-8 in the exponent at row maxima of 2^16 in log2 units, and beyond 2^24 exp2
// can overflow, as in SageAttention2's kernel.
// After the last block:
//   l   = (l_0 + l_1) + (l_2 + l_3)                              (the quad butterfly, xor 1 then 2;
//                                                                 RowSum::pv: l as it is)
//   out = mul_rn(mul_rn(o, div_rn(1, l)), v_scale[channel])       then rounded to the output format
//   lse = mul_rn(add_rn(add_rn(offset, poly_log2(l)), bias), ln 2) (natural log of sum_j exp(q.k_j/sqrt d))
// where bias = smoothing_bias(q, kbar) puts back the row bias q.kbar/sqrt(d) (in log2 units) that
// K smoothing took out of every score of step 1 and softmax ignores (bias = 0 without K smoothing),
// so the LSE is that of the unsmoothed scores, as PyTorch's and SageAttention's.
// A lane is one of the 4 threads that share a row in every m16n8 / m64nN accumulator fragment:
// lane_of_column(c) = (c mod 8) / 2, each lane holding columns {8t + 2 lane, 8t + 2 lane + 1}.
// The scores arrive in log2 units: the softmax scale log2(e)/sqrt(d) is folded into Q's scale
// once (fold_softmax_scale), so exp(q.k/sqrt(d) - max) = exp2(s - m).
//
// exp2 (steps 4 and 5) runs on one of two units (data: Exp2): a polynomial in fixed fp32
// operations (Exp2Poly; degree 5 is correctly rounded on 95.08% of the 1,123,680,257 floats in
// [-125, 0] and within 2 ulp on all of them, degree 6: 99.42%, within 1 ulp; tests/attention checks
// these figures), or sm_90's MUFU.EX2 itself (ex2.approx.ftz.f32: one instruction on the GPU,
// emulation/sfu/ex2.hpp's measured model on the host; 89.18% correctly rounded, within 2 ulp).
// log2 is always the polynomial (Log2Poly).
#pragma once

#include <cstdint>
#include <cstring>

#include "emulation/format.hpp"  // LOWBIT_HD
#include "emulation/sfu/ex2.hpp"

#if defined(__CUDA_ARCH__)
#include <cuda_fp8.h>
#else
#include <cmath>

#include "emulation/convert.hpp"
#endif

namespace lowbit::attention::steps {

// ---- single roundings, never contracted --------------------------------------------------------
#if defined(__CUDA_ARCH__)
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline std::uint32_t float_bits(float x) { return __float_as_uint(x); }
__device__ inline float bits_float(std::uint32_t u) { return __uint_as_float(u); }
#else
// volatile keeps the host compiler from fusing a product into a following sum (-ffp-contract).
inline float add_rn(float a, float b) { volatile float r = a + b; return r; }
inline float sub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float mul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float div_rn(float a, float b) { volatile float r = a / b; return r; }
inline std::uint32_t float_bits(float x) { std::uint32_t u; std::memcpy(&u, &x, 4); return u; }
inline float bits_float(std::uint32_t u) { float x; std::memcpy(&x, &u, 4); return x; }
#endif

inline constexpr float kNegativeInfinity = -__builtin_huge_valf();
inline constexpr float kLn2 = 0x1.62e430p-1f;  // float(ln 2)

// ---- exp2 ---------------------------------------------------------------------------------------
// exp2(x) = 2^j * p(f), j = nearest integer to x, f = x - j in [-1/2, 1/2] (both exact), p(f) =
// 1 + f (c1 + f (c2 + ...)) by Horner in fma_rn, and 2^j added to p's exponent field (exact:
// the result stays normal). Outside [kExp2Lowest, kExp2Highest]: x < -125 gives +0 (so -inf gives
// 0: masked keys), x > kExp2Highest gives +inf (+inf too), NaN gives x. The polynomial is
// evaluated for every x and the range decided by selects afterwards, so a GPU runs it without
// branches (the out-of-range lanes compute a discarded value).
// Coefficients: minimax of the relative error on [-1/2, 1/2] with p(0) = 1 exactly, rounded
// to float (so exp2(0) = 1: the row maximum's P is exactly 2^p_log2_scale).
inline constexpr int kMaxExp2Degree = 7;
struct Exp2Poly {
  int degree = 5;
  float c[kMaxExp2Degree] = {};  // c[0] multiplies f, c[degree - 1] multiplies f^degree
};
// (Records are returned by functions: a namespace-scope constexpr object is not visible to device code.)
LOWBIT_HD constexpr Exp2Poly exp2_degree5() {
  return {5, {0x1.62e42ap-1f, 0x1.ebf9bcp-3f, 0x1.c6b752p-5f, 0x1.3cea50p-7f, 0x1.5bb970p-10f}};
}
LOWBIT_HD constexpr Exp2Poly exp2_degree6() {
  return {6, {0x1.62e430p-1f, 0x1.ebfbdcp-3f, 0x1.c6aee8p-5f, 0x1.3b2d4ep-7f, 0x1.5f3e2ep-10f, 0x1.41fb62p-13f}};
}
inline constexpr float kExp2Lowest = -125.0f;
// The largest x whose nearest integer j is at most 127 (x + 1.5 * 2^23 rounds 127.5 to 128): the
// result 2^j p(f) < 2^127.5 stays finite.
inline constexpr float kExp2Highest = 0x1.fdfffep+6f;  // 127.49999

// The polynomial for x <= kExp2Highest, -inf included (x < -125 gives +0): what the softmax
// evaluates, whose arguments are a score minus the row offset (at most p_log2_scale) or an old
// offset minus a new one (at most 0). Above kExp2Highest, and for NaN, its value is unspecified.
LOWBIT_HD inline float poly_exp2_up_to_highest(float x, const Exp2Poly& poly = exp2_degree5()) {
  constexpr float kRound = 0x1.8p23f;  // x + 1.5 * 2^23 rounds x to an integer (|x| < 2^22)
  const float shifted = add_rn(x, kRound);
  const float j = sub_rn(shifted, kRound);
  const float f = sub_rn(x, j);
  // Horner from c[degree - 1] down: p = c[degree - 1], then p = fma(p, f, c[i]) for i = degree - 2 .. 0.
  // (Written over the fixed bound of the array, so that a compiler unrolls it for a constant poly.)
  float p = 0.0f;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int i = kMaxExp2Degree - 1; i >= 0; --i) {
    if (i == poly.degree - 1) p = poly.c[i];
    else if (i < poly.degree - 1) p = fma_rn(p, f, poly.c[i]);
  }
  p = fma_rn(p, f, 1.0f);
  const float in_range = bits_float(float_bits(p) + ((float_bits(shifted) - float_bits(kRound)) << 23));
  return x < kExp2Lowest ? 0.0f : in_range;
}

// exp2 on every float: the polynomial, +inf above kExp2Highest (and for +Inf), NaN kept.
LOWBIT_HD inline float poly_exp2(float x, const Exp2Poly& poly = exp2_degree5()) {
  const float below = poly_exp2_up_to_highest(x, poly);
  const float above = x > 0.0f ? __builtin_huge_valf() : x;  // +inf, or x itself when x is NaN
  return x <= kExp2Highest ? below : above;
}

// Which unit evaluates exp2 in the softmax (steps 4 and 5): the polynomial, or sm_90's MUFU.EX2
// (no range selects needed: it gives +0 below -126 and for -inf by itself).
enum class Exp2Unit : std::uint8_t { polynomial, sm90_ex2 };
struct Exp2 {
  Exp2Unit unit = Exp2Unit::polynomial;
  Exp2Poly poly = exp2_degree5();  // the polynomial's coefficients (unit polynomial)
};
LOWBIT_HD constexpr Exp2 exp2_polynomial(const Exp2Poly& poly = exp2_degree5()) { return {Exp2Unit::polynomial, poly}; }
LOWBIT_HD constexpr Exp2 exp2_sm90_ex2() { return {Exp2Unit::sm90_ex2, exp2_degree5()}; }

// exp2 of x <= kExp2Highest (-inf included) on the chosen unit.
LOWBIT_HD inline float exp2_up_to_highest(float x, const Exp2& exp2) {
  return exp2.unit == Exp2Unit::sm90_ex2 ? sfu::sm90_ex2(x) : poly_exp2_up_to_highest(x, exp2.poly);
}
// exp2 of any float on the chosen unit (MUFU.EX2 takes every input as it is; the polynomial adds
// its range selects).
LOWBIT_HD inline float exp2_anywhere(float x, const Exp2& exp2) {
  return exp2.unit == Exp2Unit::sm90_ex2 ? sfu::sm90_ex2(x) : poly_exp2(x, exp2.poly);
}

// ---- log2 (of a row sum, l >= 2^-126, finite) ---------------------------------------------------
// l = 2^e m with m in [sqrt(1/2), sqrt(2)); log2(m) = s q(s^2), s = (m - 1) / (m + 1), q of degree 3.
struct Log2Poly {
  float c[4];
};
LOWBIT_HD constexpr Log2Poly log2_degree3() { return {{0x1.715478p+1f, 0x1.ec6766p-1f, 0x1.2a9e96p-1f, 0x1.232cb4p-2f}}; }

LOWBIT_HD inline float poly_log2(float l) {
  const std::uint32_t bits = float_bits(l);
  int e = int((bits >> 23) & 0xff) - 127;
  float m = bits_float((bits & 0x007fffffu) | 0x3f800000u);
  if (m > 0x1.6a09e6p+0f) m = mul_rn(m, 0.5f), ++e;  // exact
  const float s = div_rn(sub_rn(m, 1.0f), add_rn(m, 1.0f));
  const float z = mul_rn(s, s);
  constexpr Log2Poly poly = log2_degree3();
  float q = poly.c[3];
  for (int i = 2; i >= 0; --i) q = fma_rn(q, z, poly.c[i]);
  return add_rn(float(e), mul_rn(s, q));
}

// ---- scores -------------------------------------------------------------------------------------
// Q's scale with the softmax scale folded in, once per Q group: fl(s_q * softmax_scale_log2).
LOWBIT_HD inline float fold_softmax_scale(float q_scale, float softmax_scale_log2) {
  return mul_rn(q_scale, softmax_scale_log2);
}
// float(log2(e) / sqrt(head_dim)), computed in double and rounded once (host and device agree
// because the host computes it and passes it).
inline float softmax_scale_log2(int head_dim) {
  return float(1.4426950408889634 / __builtin_sqrt(double(head_dim)));
}
// One scale per (Q group, K group) pair: fl(s_q' * s_k).
LOWBIT_HD inline float score_scale(float q_scale_folded, float k_scale) { return mul_rn(q_scale_folded, k_scale); }
// An integer accumulator (|acc| < 2^24, so float(acc) is exact) times its pair's scale.
LOWBIT_HD inline float dequantize_score(std::int32_t acc, float scale) { return mul_rn(float(acc), scale); }
// A floating accumulator (fp32, FP22 or fp16 widened) times its pair's scale (1 for unscaled Q, K).
LOWBIT_HD inline float dequantize_score(float acc, float scale) { return mul_rn(acc, scale); }
// Step 1 with Q smoothed (SageAttention2 §3.2): the score takes the GEMV term delta_s = qbar . k'
// (in q.k units) in log2 units, one rounding: s + delta_s * softmax_scale_log2.
LOWBIT_HD inline float add_score_correction(float score, float delta_s, float softmax_scale_log2) {
  return fma_rn(delta_s, softmax_scale_log2, score);
}

// ---- online softmax -----------------------------------------------------------------------------
inline constexpr int kLanesPerRow = 4;
LOWBIT_HD constexpr int lane_of_column(int column) { return (column % 8) / 2; }

// P's static scale as a power-of-two offset of the exponent: P = exp2(s - m + p_log2_scale), so
// P in [0, 2^p_log2_scale]. For E4M3 at 448: float(log2(448)); poly_exp2 of it is 447.99997 (0x1.bffffep+8),
// which the e4m3 conversion (satfinite, nearest) maps to 448.
inline constexpr float kLog2Of448 = 0x1.19d5dap+3f;

// The row maximum a block can subtract: a row with every key masked so far keeps -inf in m but
// subtracts 0 (so its P and alpha are 0, never NaN).
LOWBIT_HD inline float usable_max(float m) { return m == kNegativeInfinity ? 0.0f : m; }
// The offset subtracted from every score of the row: m_use = usable_max(m) - p_log2_scale.
LOWBIT_HD inline float row_offset(float m, float p_log2_scale) { return sub_rn(usable_max(m), p_log2_scale); }
// The offset the row carries to the next block's rescale: -inf while every key so far is masked, so
// that the first block with a key scales the empty sums by alpha = 0. (Carrying row_offset's 0 - p_log2_scale
// instead gives alpha = exp2(-p_log2_scale - offset), +inf where that block's maximum is below about
// -128 with MUFU.EX2, and 0 * inf = NaN: a causal row whose KV blocks run descending meets its masked
// blocks first.)
LOWBIT_HD inline float carried_offset(float m, float offset) { return m == kNegativeInfinity ? m : offset; }

// (score - offset <= p_log2_scale: exp2 without poly_exp2's upper-range selects.)
LOWBIT_HD inline float probability(float score, float offset, const Exp2& exp2 = {}) {
  return exp2_up_to_highest(sub_rn(score, offset), exp2);
}
// Step 6's row sum: the 4 lanes' fp32 trees of p (the contract), or the P V MMA's sum of P's codes
// (step 9'): l then weighs exactly the codes the outputs do, and the lanes add nothing.
enum class RowSum : std::uint8_t { lanes, pv };
// Steps 1 and 5 as two roundings (the contract: rounded_score) or one (fused: SageAttention2's kernel).
enum class ExpArgument : std::uint8_t { rounded_score, fused };
// The pair's scale in the fused steps: at least 2^-149 (a product of two scales can round to 0), so
// that acc = -inf of a masked key gives -inf, never NaN, in step 2's product and step 5's fma.
LOWBIT_HD inline float fused_scale(float scale) { return scale < 0x1p-149f ? 0x1p-149f : scale; }
// Step 5': exp2(fma(acc, scale, -offset)), acc an exact accumulator or -inf. The argument can pass
// p_log2_scale by m's rounding (and kExp2Highest for huge maxima): exp2 over every float.
LOWBIT_HD inline float fused_probability(float acc, float scale, float offset, const Exp2& exp2 = {}) {
  return exp2_anywhere(fma_rn(acc, scale, -offset), exp2);
}
// alpha: the factor that rescales l and o when the row offset moves from old to new
// (exp2(-inf) = 0 on the first block: old_offset is -inf there).
LOWBIT_HD inline float rescale(float old_offset, float new_offset, const Exp2& exp2 = {}) {
  return exp2_up_to_highest(sub_rn(old_offset, new_offset), exp2);
}

// The sum of n values (n a power of two) as a balanced tree over their order: adjacent pairs
// first, (v0 + v1) + (v2 + v3), ... The GPU adds a lane's columns this way.
template <int n>
LOWBIT_HD inline float tree_sum(const float* v) {
  static_assert(n > 0 && (n & (n - 1)) == 0, "tree_sum: n must be a power of two");
  if constexpr (n == 1) {
    return v[0];
  } else {
    return add_rn(tree_sum<n / 2>(v), tree_sum<n / 2>(v + n / 2));
  }
}
LOWBIT_HD inline float update_row_sum(float lane_sum, float alpha, float block_lane_sum) {
  return fma_rn(lane_sum, alpha, block_lane_sum);
}
// The four lanes' sums combined as the butterfly shuffle does (xor 1, then xor 2).
LOWBIT_HD inline float combine_lanes(float l0, float l1, float l2, float l3) {
  return add_rn(add_rn(l0, l1), add_rn(l2, l3));
}

// ---- quantization ------------------------------------------------------------------------------
// x / s rounded to nearest even, from inverse = RN(1 / s) computed once per scale (invertible_scale(s),
// x / s normal or zero): q0 = RN(x inverse) is within an ulp of x / s, x - q0 s is exact in one fma, and
// one correction by it gives RN(x / s) (Markstein's theorem; J.-M. Muller, "Accelerating
// floating-point division when the divisor is known in advance", 2002). A zero quotient takes x's
// sign, as x / s does. Three operations where a division takes a dozen: the quantizers' codes.
// quotient_by_inverse is the same but for the sign of a zero quotient (what an integer code needs).
LOWBIT_HD inline float quotient_by_inverse(float x, float s, float inverse) {
  const float q0 = mul_rn(x, inverse);
  return fma_rn(fma_rn(-q0, s, x), inverse, q0);
}
LOWBIT_HD inline float divide_by_inverse(float x, float s, float inverse) {
#if defined(__CUDA_ARCH__)
  return copysignf(quotient_by_inverse(x, s, inverse), x);
#else
  return std::copysign(quotient_by_inverse(x, s, inverse), x);
#endif
}
// The scales whose codes quotient_by_inverse gives: s >= 2^-92. Markstein's proof needs the
// remainder x - q0 s exact, so q0 s a multiple of 2^-149 (fp32's smallest step); for the quotients
// a code can tell from zero (|x / s| >= 2^-11) that holds from s = 2^-92 on. Groups of magnitude
// below about 2^-85 (bf16 and fp32 inputs can have them) have smaller scales, and their codes take
// the division (below 2^-128 the inverse itself overflows).
LOWBIT_HD constexpr bool invertible_scale(float s) { return s >= 0x1p-92f; }

// P as an E4M3 code: cvt.rn.satfinite.e4m3x2.f32 on the GPU, the verified encoder on the host.
LOWBIT_HD inline std::uint8_t e4m3_code(float p) {
#if defined(__CUDA_ARCH__)
  return std::uint8_t(__nv_cvt_float_to_fp8(p, __NV_SATFINITE, __NV_E4M3));
#else
  return std::uint8_t(lowbit::encode(formats::e4m3, double(p), {.rounding = Rounding::nearest_even,
                                                               .overflow = Overflow::saturate}));
#endif
}

// Two P codes packed as the 8-bit A fragment holds them: lo in bits 0-7, hi in bits 8-15. On the
// GPU one cvt.rn.satfinite.e4m3x2.f32 (the instruction e4m3_code runs with a zero partner); each
// byte is e4m3_code of its value.
LOWBIT_HD inline std::uint16_t e4m3_code_pair(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  return std::uint16_t(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
#else
  return std::uint16_t(e4m3_code(lo) | e4m3_code(hi) << 8);
#endif
}
// Four codes in one 32-bit word, value j in byte j: two pairs (the A fragment's word of P; V's codes).
LOWBIT_HD inline std::uint32_t e4m3_code_quad(float v0, float v1, float v2, float v3) {
  return std::uint32_t(e4m3_code_pair(v0, v1)) | std::uint32_t(e4m3_code_pair(v2, v3)) << 16;
}

// Two-level accumulation: the fp32 output accumulator takes a block's fresh MMA result.
LOWBIT_HD inline float accumulate_output(float o, float alpha, float block_result) {
  return fma_rn(o, alpha, block_result);
}

// ---- the end of a row ----------------------------------------------------------------------------
LOWBIT_HD inline float inverse_row_sum(float l) { return div_rn(1.0f, l); }
// The normalized output element before its rounding to the output format (fp16/bf16/fp32).
LOWBIT_HD inline float normalize_output(float o, float inverse_l, float v_scale) {
  return mul_rn(mul_rn(o, inverse_l), v_scale);
}
// With V smoothed (SageAttention2 §3.6): the output takes the V mean back, after normalization.
LOWBIT_HD inline float add_value_mean(float out, float v_mean) { return add_rn(out, v_mean); }
// The row bias K smoothing removed, in log2 units: mul_rn(q . kbar, softmax_scale_log2), the dot
// product in fp32 from +0 over the channels in order, acc = fma_rn(q[c], kbar[c], acc). q(c) is the
// row's unquantized value of channel c (a callable), kbar the K mean.
template <class Row>
LOWBIT_HD inline float smoothing_bias(Row q, const float* kbar, int head_dim, float softmax_scale_log2) {
  float acc = 0.0f;
  for (int c = 0; c < head_dim; ++c) acc = fma_rn(q(c), kbar[c], acc);
  return mul_rn(acc, softmax_scale_log2);
}
// Natural-log log-sum-exp of the row's scaled scores (q.k / sqrt(d)), K smoothing's bias put back.
LOWBIT_HD inline float log_sum_exp(float offset, float l, float bias) {
  return mul_rn(add_rn(add_rn(offset, poly_log2(l)), bias), kLn2);
}

}  // namespace lowbit::attention::steps
