// The fp32 per-row steps of PyTorch's FlashAttention-2 forward (the kernel PyTorch 2.11 vendors in
// aten/src/ATen/native/transformers/cuda/flash_attn: softmax.h built with UNFUSE_FMA, without
// --use_fast_math), as its sm_90 SASS runs them (libtorch_cuda.so of torch 2.11.0+cu130: FMUL then
// FADD before MUFU.EX2, exp2f's x < -126 path, the IEEE reciprocal, __logf as MUFU.LG2 times ln 2, one
// FFMA for the LSE). The softmax stage "flash2" of pipeline.hpp; a row of a query block, the KV
// blocks in descending order, S the raw fp32 accumulators of Q K^T (masked keys -inf):
//   m'      = max(m, max_c S[c])                              (raw scores; m starts at -inf)
//   alpha   = exp2f((m - usable(m')) * scale_log2)             (usable: -inf -> 0; first block: 0)
//   p[c]    = exp2f(fl(S[c] * scale_log2) - scaled_max(m'))     (scaled_max: fl(m' * scale_log2), -inf -> 0)
//   l_lane  = fma(l_lane, alpha, p[c0]), then + p[c] one by one over the lane's other columns in order
//   o       = fl(o * alpha), then o += P V (fp16/bf16 P, the MMA in place)
// After the last block: l = (l_0 + l_2) + (l_1 + l_3) (the quad shuffle, xor 2 then xor 1),
//   out = fl(o * fl(1 / l)) (l = 0 or NaN: times 1), lse = fma(m, scale, fl(lg2(l) * ln 2)) (+inf at l = 0).
// scale = float(1 / sqrt(d)), scale_log2 = float(scale * log2(e)) in double, as flash_api.cpp sets them.
#pragma once

#include <cmath>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/sfu/ex2.hpp"
#include "emulation/sfu/lg2.hpp"

namespace lowbit::attention::flash2 {

inline float softmax_scale(int head_dim) { return float(1.0 / std::sqrt(double(head_dim))); }
inline float softmax_scale_log2(int head_dim) { return float(double(softmax_scale(head_dim)) * 1.4426950408889634); }

inline float usable(float m) { return m == steps::kNegativeInfinity ? 0.0f : m; }
inline float scaled_max(float m, float scale_log2) {
  return m == steps::kNegativeInfinity ? 0.0f : steps::mul_rn(m, scale_log2);
}
inline float rescale(float old_max, float new_max, float scale_log2) {
  return sfu::sm90_exp2f(steps::mul_rn(steps::sub_rn(old_max, usable(new_max)), scale_log2));
}
inline float probability(float score, float scale_log2, float row_scaled_max) {
  return sfu::sm90_exp2f(steps::sub_rn(steps::mul_rn(score, scale_log2), row_scaled_max));
}
// One lane's running sum over a KV block: rescaled, then the lane's columns added one by one, the
// rescale and the first addition one FFMA (nvcc contracts `row_sum *= scale` into the next `+=`).
inline float lane_sum(float running, float alpha, const float* p, int columns, int lane) {
  float sum = steps::add_rn(steps::fma_rn(running, alpha, p[2 * lane]), p[2 * lane + 1]);
  for (int c = 2 * lane + 8; c < columns; c += 8) sum = steps::add_rn(steps::add_rn(sum, p[c]), p[c + 1]);
  return sum;
}
inline float combine_lanes(float l0, float l1, float l2, float l3) {
  return steps::add_rn(steps::add_rn(l0, l2), steps::add_rn(l1, l3));
}
inline float inverse_row_sum(float l) { return l == 0.0f || l != l ? 1.0f : steps::div_rn(1.0f, l); }
// split: a split-KV pass, which writes -inf where the kernel writes +inf.
inline float log_sum_exp(float m, float l, float scale, bool split = false) {
  if (l == 0.0f || l != l) return split ? -__builtin_huge_valf() : __builtin_huge_valf();
  return steps::fma_rn(m, scale, steps::mul_rn(sfu::sm90_lg2(l), steps::kLn2));
}

}  // namespace lowbit::attention::flash2
