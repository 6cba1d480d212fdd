// The fp32 per-row steps of SageAttention2's Hopper kernel as released (thu-ml/SageAttention d1a57a5,
// csrc/qattn/qk_int_sv_f8_cuda_sm90.cu: qk_int8_sv_f8_attn_kernel, CTA 64 x 128, one warpgroup; its
// update_mdo, normalize_d of attn_utils.cuh; built with --use_fast_math, so every FMUL/FADD/FFMA
// flushes subnormals). The softmax stage "sage2-sm90" of pipeline.hpp. A row of a 64-query block,
// KV blocks of 128 keys in ascending order; lane t of the row's quad holds the keys c with
// (c mod 8) / 2 = t, and with them one K scale ks_t per block (per-thread K groups):
//   scale      = fl(fl(fl(1 / sqrt(d)) * fl(log2 e)) * fl(qs * ks_t))   every block but the last:
//   s          = the exact integer accumulator                          the scale takes the dequantization
//   last block: s = fl(acc * fl(qs * ks_t)) (masked keys: -5e6), scale = fl(fl(1 / sqrt(d)) * fl(log2 e))
//   m_t        = fma(max over lane t's keys of s, scale_t, -8.807)       (S_FP8_OFFSET: P <= 2^8.807 < 448)
//   m'         = max(m, max_t m_t)                                       (m starts at -5e6)
//   alpha      = ex2(fl(m - m'))
//   p[c]       = ex2(fma(s[c], scale, -m'))
//   l_t        = fma(l_t, alpha, g_0), then l_t + g_f for the block's other 16-key tiles f, where
//                g_f = ((p[16f + 2t] + p[16f + 2t + 1]) + p[16f + 2t + 8]) + p[16f + 2t + 9]
//                (nvcc contracts update_mdo's d *= o_scale into the first addition)
//   o          = fma(o, alpha, R), R the block's P V (wgmma e4m3 chained over its 128 keys from +0:
//                "fp32+fp32", the FP22 accumulator flushed into o once per block; contracted the same way)
// After the last block: l = (l_0 + l_1) + (l_2 + l_3), out = ftz(ftz(o * rcp(l)) * v_scale[c]),
// lse = fl(lg2(l) + m) — the kernel's own LSE: log2 units of the K-smoothed scores (the offset cancels),
// which sageattention/core.py turns into a natural log plus q . kbar with torch (not modelled here).
// ex2, rcp and lg2 are MUFU's (ex2.approx.ftz, rcp.approx.ftz, lg2.approx.ftz: sfu/).
//
// The stage "sage2-sm89" is the same file's Ada kernels (qk_int_sv_f8_cuda_sm89.cuh: qk_int_sv_f8_attn_kernel,
// CTA 128 x 64, 4 warps of 32 queries on mma.sync m16n8k32; setup.py builds them for sm90 too), whose
// per-row steps are the ones above (the same update_mdo, normalize_d, and the m16n8 accumulator's lanes
// hold the same key columns), with two differences: the last TWO iterations dequantize the scores first
// (the second-to-last one applies the causal mask), and R is the block's P V on mma.sync e4m3 chained
// over its 64 keys from +0, in an fp16 accumulator ("fp32+fp16": compute_fp8_sv_inst_buf_fp16_accu,
// which ptxas lowers to HMMA.16816.F16 on sm_90) or in FP22 ("fp32+fp32"), flushed with the same FFMA.
#pragma once

#include <cmath>

#include "emulation/attention/flash2_steps.hpp"
#include "emulation/attention/flash3_steps.hpp"
#include "emulation/attention/kernel_steps.hpp"
#include "emulation/sfu/ex2.hpp"
#include "emulation/sfu/lg2.hpp"
#include "emulation/sfu/rcp.hpp"

namespace lowbit::attention::sage2_sm90 {

inline constexpr float kMasked = -5000000.0f;  // the kernel's masked score and initial row maximum
inline constexpr int kTileKeys = 16;           // keys per wgmma accumulator tile (a lane holds 4)
// The last KV blocks whose scores are dequantized before the softmax: sm90's kernel's last, sm89's two.
inline constexpr int kDequantizedBlocksSm90 = 1, kDequantizedBlocksSm89 = 2;

// sm_scale * log2e in the kernel: the host's fl(d^-0.5) times the float constant log2e.
inline float softmax_scale_log2(int head_dim) { return steps::mul_rn(flash2::softmax_scale(head_dim), 1.44269504088896340736f); }
inline float dequantization(float q_scale, float k_scale) { return steps::mul_rn(q_scale, k_scale); }
// The lane whose registers hold key c of a block (the m64nNk32 s32 accumulator's columns).
inline int lane_of_key(int c) { return c % 8 / 2; }

inline float lane_max(float raw_max, float scale, float offset) { return steps::fma_rn(raw_max, scale, -offset); }
inline float rescale(float old_max, float new_max) { return sfu::sm90_ex2(steps::sub_rn(old_max, new_max)); }
inline float probability(float score, float scale, float row_max) {
  return sfu::sm90_ex2(steps::fma_rn(score, scale, -row_max));
}
// Lane t's running sum over one block's probabilities p[0, block_kv).
inline float lane_sum(float l, float alpha, const float* p, int block_kv, int lane) {
  for (int tile = 0; tile < block_kv / kTileKeys; ++tile) {
    const float* t = p + tile * kTileKeys + 2 * lane;
    const float g = steps::add_rn(steps::add_rn(steps::add_rn(t[0], t[1]), t[8]), t[9]);
    l = tile == 0 ? flash3::flush(steps::fma_rn(l, alpha, g)) : steps::add_rn(l, g);
  }
  return l;
}
inline float accumulate(float o, float alpha, float block_result) {
  return flash3::flush(steps::fma_rn(flash3::flush(o), alpha, flash3::flush(block_result)));
}
inline float output(float o, float l, float v_scale) {
  return flash3::mul_ftz(flash3::mul_ftz(o, sfu::sm90_rcp(l)), v_scale);
}
inline float log_sum_exp(float m, float l) { return steps::add_rn(sfu::sm90_lg2(l), m); }

}  // namespace lowbit::attention::sage2_sm90
