// The fp32 steps of a chunkwise gated-linear-attention (GLA) forward kernel, written once for the
// CPU emulation (emulation/linear/) and the CUDA kernels (kernels/linear/), host and device. Every
// operation is a single IEEE rounding named explicitly (attention/kernel_steps.hpp's add_rn,
// sub_rn, mul_rn, fma_rn; exp2 is its poly_exp2): no contraction, no fast-math, no MUFU.
//
// One chunk of L <= C tokens, sub-chunks of c tokens; gates arrive as natural logs (<= 0):
//   1. l_t        = log2_gate(log_alpha_t)                  (log2 units, once per element)
//   2. g_t        = gate_sum(g_{t-1}, l_t), g_first = l_first  (running sum over the chunk, in order)
//   3. decay      = decay(to, from) = exp2(to - from)        (to <= from: a factor in [0, 1])
//   4. Q~, K~     = gated(x, to, from) = x * decay(to, from): the inter-sub-chunk operands, with the
//                   reference n = g of the first row of the query sub-chunk i:
//                     Q~_t = gated(q_t, g_t, n)  (t in i),   K~_s = gated(k_s, n, g_s)  (s in j < i)
//   5. inter-sub-chunk score: the MMA's accumulator, then
//        quantized:  s = dequantize_score(acc, score_scale(s_q, s_k))   (integers: acc exact)
//        smoothed:   s = corrected_score(s, qbar . gamma(K~_s), Q~_t . kbar_j)  (both dot())
//   6. diagonal score (s <= t in one sub-chunk, fp32 as GLA computes it):
//        diagonal_score = sum over channels in order of fma(gated(q, g_t, g_s), k, acc), acc from +0
//   7. P V: the MMA's accumulator R (two-level: fp32 sum of fresh FP22 accumulators), then
//        o_intra = dequantize_value(R, s_p(t), s_v(channel))
//   8. inter-chunk: Q_inter = gated(q_t, g_t, 0); o = add_outputs(o_inter, o_intra)
//   9. state: S <- (S .* decay(g_last, 0)) + K_dec^T V, K_dec_s = gated(k_s, g_last, g_s)
#pragma once

#include <cstdint>

#include "emulation/attention/kernel_steps.hpp"

namespace lowbit::linear::steps {

using attention::steps::add_rn;
using attention::steps::fma_rn;
using attention::steps::mul_rn;
using attention::steps::poly_exp2;
using attention::steps::sub_rn;

inline constexpr float kLog2e = 0x1.715476p+0f;  // float(log2(e)) = 1.44269502

LOWBIT_HD inline float log2_gate(float log_alpha) { return mul_rn(log_alpha, kLog2e); }
LOWBIT_HD inline float gate_sum(float previous, float log2_gate) { return add_rn(previous, log2_gate); }
LOWBIT_HD inline float decay(float to, float from) { return poly_exp2(sub_rn(to, from)); }
LOWBIT_HD inline float gated(float x, float to, float from) { return mul_rn(x, decay(to, from)); }

// a . b over n values in index order, one fma each, from acc.
LOWBIT_HD inline float dot(const float* a, const float* b, int n, float acc = 0.0f) {
  for (int i = 0; i < n; ++i) acc = fma_rn(a[i], b[i], acc);
  return acc;
}

// P_ts of a diagonal block: sum_c q_c k_c exp2(g_t,c - g_s,c), channels in order.
LOWBIT_HD inline float diagonal_score(const float* q, const float* g_t, const float* k, const float* g_s, int dk) {
  float acc = 0.0f;
  for (int c = 0; c < dk; ++c) acc = fma_rn(gated(q[c], g_t[c], g_s[c]), k[c], acc);
  return acc;
}

// One scale per (Q group, K group) pair, fl(s_q * s_k), and the accumulator times it (integer
// accumulators below 2^24 convert exactly): the attention contract's steps (no softmax scale folded).
using attention::steps::dequantize_score;
using attention::steps::score_scale;

// Smoothing's two correction terms without softmax (quant/smoothing.hpp, ScoreCorrection::full):
// Q~ K~^T = gamma(Q~) gamma(K~)^T + qbar gamma(K~_s)^T + Q~_t kbar^T; the first term is the MMA's.
LOWBIT_HD inline float corrected_score(float score, float key_term, float query_term) {
  return add_rn(add_rn(score, key_term), query_term);
}

LOWBIT_HD inline float dequantize_value(float acc, float p_scale, float v_scale) {
  return mul_rn(acc, mul_rn(p_scale, v_scale));
}

LOWBIT_HD inline float add_outputs(float inter, float intra) { return add_rn(inter, intra); }

}  // namespace lowbit::linear::steps
