// The attention kernel's instances with o accumulated in place, V smoothed or not
// (sage2_attention_kernel.cuh), for kInPlaceSmoothVDtype output and kInPlaceSmoothVExp2.
#include "kernels/attention/sage2_attention_kernel.cuh"

namespace lowbit::kernels::attention::detail {

// This translation unit's copy of the groups (groups.cuh, groups.cu).
void upload_in_place_attention_groups(const quant::QkGroups (&both)[2]) { copy_groups_to_device(both); }

void launch_in_place_attention(const AttentionParams& p, int head_dim, bool causal, bool smooth_v, std::uintptr_t stream) {
  using Out = OutputOf<kInPlaceSmoothVDtype>;
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (smooth_v) attention_for_shape<Out, kInPlaceSmoothVExp2, true, true>(p, head_dim, causal, s);
  else attention_for_shape<Out, kInPlaceSmoothVExp2, true, false>(p, head_dim, causal, s);
}

}  // namespace lowbit::kernels::attention::detail
