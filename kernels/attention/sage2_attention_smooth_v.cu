// The attention kernel's instances with V smoothed and two-level accumulation
// (sage2_attention_kernel.cuh), for kInPlaceSmoothVDtype output and kInPlaceSmoothVExp2.
#include "kernels/attention/sage2_attention_kernel.cuh"

namespace lowbit::kernels::attention::detail {

// This translation unit's copy of the groups (groups.cuh, groups.cu).
void upload_smooth_v_attention_groups(const quant::QkGroups (&both)[2]) { copy_groups_to_device(both); }

void launch_smooth_v_attention(const AttentionParams& p, int head_dim, bool causal, std::uintptr_t stream) {
  attention_for_shape<OutputOf<kInPlaceSmoothVDtype>, kInPlaceSmoothVExp2, false, true>(p, head_dim, causal,
                                                                                       reinterpret_cast<cudaStream_t>(stream));
}

}  // namespace lowbit::kernels::attention::detail
