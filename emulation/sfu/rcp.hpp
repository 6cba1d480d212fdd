// MUFU.RCP of sm_90 (PTX rcp.approx.ftz.f32, what 1.0f / x compiles to under --use_fast_math:
// FlashAttention-3's 1 / row sum), bit for bit. What it computes was recovered on an H100
// (kernels/probes/sm90_rcp_structure.cu, emulation/sfu/data/README.md).
//
// The model (source: measured, status: verified on all 2^32 - 2^24 normal inputs, both signs, H100):
//   x = +-2^e (1 + i 2^-23): rcp(x) = +-2^-e R[i], flushed to +-0 below 2^-126, where R[i] is the
//   unit's reciprocal of 1 + i 2^-23, stored as its difference from 1 / x rounded to nearest
//   (-1, 0 or +1 unit in the last place: 374,723, 7,280,086 and 733,799 of the 2^23).
//   +-0 and subnormal x (flushed): +-inf; +-inf: +-0; NaN: NaN (measured).
#pragma once

namespace lowbit::sfu {

float sm90_rcp(float x);

}  // namespace lowbit::sfu
