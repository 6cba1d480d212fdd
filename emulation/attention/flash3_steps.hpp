// The fp32 per-row steps of FlashAttention-3's Hopper forward as released (PyPI fa3-fwd 0.0.3: its
// hopper/softmax.h and mainloop_fwd_sm90_tma_gmma_ws.hpp built with --use_fast_math), as the wheel's
// sm_90a SASS runs them (fa3_fwd/_C.abi3.so, e.g. the hdim-128 E4M3 kernel 128 x 224: FFMA then
// MUFU.EX2 for P, FADD, FMUL, MUFU.EX2 for the rescale, MUFU.RCP of l, MUFU.LG2 in the LSE). The softmax
// stage "flash3" of pipeline.hpp; a row of a query block, the KV blocks in descending order, S the raw
// fp32 accumulators of Q K^T (masked keys -inf), `offset` p's log2 (8 for E4M3 P, 0 for bf16):
//   scale   = fl(softmax_scale_log2 * fl(q_descale * k_descale))    (flash_fwd_kernel_sm90.h)
//   m'      = max(m, max_c S[c])                                     (raw scores; m starts at -inf)
//   alpha   = ex2(fl(fl(m - usable(m')) * scale))                    (usable: -inf -> 0)
//   p[c]    = ex2(fma(S[c], scale, -scaled_max(m')))                 (scaled_max: fma(m', scale, -offset), -inf -> 0)
//   l_lane  = fma(l_lane, alpha, p[c0]), then + p[c] over the lane's other columns (flash2::lane_sum)
//   o       = ftz(o * alpha), then o += P V (P cast to its format, the MMA in place)
// After the last block: l = (l_0 + l_2) + (l_1 + l_3) (flash2::combine_lanes),
//   out = ftz(o * fl(rcp(l) * v_descale)) (l = 0: times 0),
//   lse = fma(fl(scale * ln 2), m, fl(lg2(l 2^-offset) * ln 2))  (-inf at l = 0).
// ex2, rcp and lg2 are MUFU's (sfu/): fast math runs each as one instruction. ftz: FMUL.FTZ, which
// flushes subnormal operands and results to zero of their sign (3 output codes of the 13.6M recorded
// ones are subnormal in an IEEE multiply and +-0 in the kernel's).
#pragma once

#include <cmath>

#include "emulation/attention/flash2_steps.hpp"
#include "emulation/attention/kernel_steps.hpp"
#include "emulation/sfu/ex2.hpp"
#include "emulation/sfu/lg2.hpp"
#include "emulation/sfu/rcp.hpp"

namespace lowbit::attention::flash3 {

inline float flush(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }
inline float mul_ftz(float a, float b) { return flush(steps::mul_rn(flush(a), flush(b))); }

// softmax_scale_log2 is float(float(1 / sqrt(d)) * log2(e)) as flash2's: the same host code.
inline float scale_log2(int head_dim, float q_descale, float k_descale) {
  return steps::mul_rn(flash2::softmax_scale_log2(head_dim), steps::mul_rn(q_descale, k_descale));
}
inline float scaled_max(float m, float scale_log2, float offset) {
  return m == steps::kNegativeInfinity ? 0.0f : steps::fma_rn(m, scale_log2, -offset);
}
inline float rescale(float old_max, float new_max, float scale_log2) {
  return sfu::sm90_ex2(steps::mul_rn(steps::sub_rn(old_max, flash2::usable(new_max)), scale_log2));
}
inline float probability(float score, float scale_log2, float row_scaled_max) {
  return sfu::sm90_ex2(steps::fma_rn(score, scale_log2, -row_scaled_max));
}
// The factor o is multiplied by at the end: 1 / l (MUFU.RCP; 0 for l = 0 or NaN) times v_descale.
inline float output_scale(float l, float v_descale) {
  return steps::mul_rn(l == 0.0f || l != l ? 0.0f : sfu::sm90_rcp(l), v_descale);
}
inline float log_sum_exp(float m, float l, float scale_log2, float offset) {
  const float sum = steps::mul_rn(l, std::ldexp(1.0f, -int(offset)));
  if (sum == 0.0f || sum != sum) return -__builtin_huge_valf();
  return steps::fma_rn(steps::mul_rn(scale_log2, steps::kLn2), m, steps::mul_rn(sfu::sm90_lg2(sum), steps::kLn2));
}

}  // namespace lowbit::attention::flash3
