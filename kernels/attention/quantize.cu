// The launch of SageAttention2-8b's quantization on Hopper: the K/V statistics
// (kv_statistics.cuh), then the quantization of Q, K and V (quantize_block.cuh).
//
// One translation unit for both: compiled apart, the `or` of rows_aligned's two address checks,
// which both inline, comes out with its operands in the other order (the same value, a swapped
// pair of registers in the SASS).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/attention/groups.cuh"
#include "kernels/attention/kv_statistics.cuh"
#include "kernels/attention/quantize_block.cuh"
#include "kernels/attention/sage2_device.cuh"
#include "kernels/attention/sage2_kernels.cuh"

namespace lowbit::kernels::attention::detail {

// This translation unit's copy of the groups (groups.cuh, groups.cu).
void upload_quantize_groups(const quant::QkGroups (&both)[2]) { copy_groups_to_device(both); }

template <class T, int HeadDim>
void statistics_for(const QuantizeParams& p, cudaStream_t stream) {
  key_value_statistics<T, HeadDim><<<dim3((p.key_chunks + kStatisticsChunks - 1) / kStatisticsChunks, p.heads_kv, p.batch),
                                     HeadDim / 2 * kStatisticsChunks, 0, stream>>>(p);
  check_launch("key_value_statistics launch");
  key_mean_value_scales<HeadDim><<<dim3(p.heads_kv, p.batch), HeadDim, 0, stream>>>(p);
  check_launch("key_mean_value_scales launch");
}
template <class T, int HeadDim>
void quantize_for(const QuantizeParams& p, cudaStream_t stream) {
  constexpr Sage2HopperRecipe recipe = sage2_8b_hopper(HeadDim);
  const int blocks = std::max(p.padded_q / recipe.block_q, p.padded_kv / recipe.block_kv);
  quantize_block<T, HeadDim><<<dim3(blocks, p.heads_q + p.heads_kv, p.batch), kThreads, 0, stream>>>(p);
  check_launch("quantize_block launch");
}
void launch_statistics(const QuantizeParams& p, DType dtype, int head_dim, std::uintptr_t stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (dtype == DType::fp16) head_dim == 64 ? statistics_for<__half, 64>(p, s) : statistics_for<__half, 128>(p, s);
  else head_dim == 64 ? statistics_for<__nv_bfloat16, 64>(p, s) : statistics_for<__nv_bfloat16, 128>(p, s);
}
void launch_quantize(const QuantizeParams& p, DType dtype, int head_dim, std::uintptr_t stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (dtype == DType::fp16) head_dim == 64 ? quantize_for<__half, 64>(p, s) : quantize_for<__half, 128>(p, s);
  else head_dim == 64 ? quantize_for<__nv_bfloat16, 64>(p, s) : quantize_for<__nv_bfloat16, 128>(p, s);
}

}  // namespace lowbit::kernels::attention::detail
