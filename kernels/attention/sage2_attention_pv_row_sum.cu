// The attention kernel's instances with the row sums by P V (steps::RowSum::pv, sage2_attention_kernel.cuh):
// two-level accumulation, V not smoothed, the serial schedule and MUFU.EX2, for fp16 and bf16 output.
#include "kernels/attention/sage2_attention_kernel.cuh"

namespace lowbit::kernels::attention::detail {

// This translation unit's copy of the groups (groups.cuh, groups.cu).
void upload_pv_row_sum_attention_groups(const quant::QkGroups (&both)[2]) { copy_groups_to_device(both); }

void launch_pv_row_sum_attention(const AttentionParams& p, DType dtype, int head_dim, bool causal, std::uintptr_t stream) {
  constexpr auto kEx2 = steps::Exp2Unit::sm90_ex2;
  constexpr auto kSerial = Sage2Schedule::serial;
  constexpr auto kPv = steps::RowSum::pv;
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (dtype == DType::fp16) attention_for_shape<__half, kEx2, false, false, kSerial, kPv>(p, head_dim, causal, s);
  else attention_for_shape<__nv_bfloat16, kEx2, false, false, kSerial, kPv>(p, head_dim, causal, s);
}

}  // namespace lowbit::kernels::attention::detail
