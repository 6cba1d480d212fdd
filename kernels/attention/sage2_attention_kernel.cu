// The attention kernel's instances of the presets sage2-8b and sage2-8b-ex2 (two-level
// accumulation, V not smoothed; fp16 and bf16 output; each schedule), and the launch of every
// instance (sage2_attention_kernel.cuh).
#include "kernels/attention/sage2_attention_kernel.cuh"

namespace lowbit::kernels::attention::detail {
namespace {

template <class Out, Sage2Schedule Schedule>
void preset_attention(const AttentionParams& p, int head_dim, bool causal, steps::Exp2Unit exp2, cudaStream_t s) {
  if (exp2 == steps::Exp2Unit::sm90_ex2) attention_for_shape<Out, steps::Exp2Unit::sm90_ex2, false, false, Schedule>(p, head_dim, causal, s);
  else attention_for_shape<Out, steps::Exp2Unit::polynomial, false, false, Schedule>(p, head_dim, causal, s);
}
template <class Out>
void preset_attention(const AttentionParams& p, const Sage2Problem& problem, cudaStream_t s) {
  if (problem.schedule == Sage2Schedule::overlapped)
    preset_attention<Out, Sage2Schedule::overlapped>(p, problem.head_dim, problem.causal, problem.exp2, s);
  else
    preset_attention<Out, Sage2Schedule::serial>(p, problem.head_dim, problem.causal, problem.exp2, s);
}

}  // namespace

// This translation unit's copy of the groups (groups.cuh, groups.cu).
void upload_attention_groups(const quant::QkGroups (&both)[2]) { copy_groups_to_device(both); }

void launch_attention(const AttentionParams& p, const Sage2Problem& problem, std::uintptr_t stream) {
  if (problem.in_place) return launch_in_place_attention(p, problem.head_dim, problem.causal, problem.smooth_v, stream);
  if (problem.smooth_v) return launch_smooth_v_attention(p, problem.head_dim, problem.causal, stream);
  if (problem.row_sum == steps::RowSum::pv)
    return launch_pv_row_sum_attention(p, problem.dtype, problem.head_dim, problem.causal, stream);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (problem.dtype == DType::fp16) preset_attention<__half>(p, problem, s);
  else preset_attention<__nv_bfloat16>(p, problem, s);
}

}  // namespace lowbit::kernels::attention::detail
