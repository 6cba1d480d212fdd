// The device side of SageAttention2-8b (sage2_attention.hpp): what the launch code in api.cu
// passes to the kernels (kv_statistics.cuh, quantize.cu, sage2_attention_kernel.cuh and the
// translation units of its instances).
#pragma once

#include <cstdint>

#include "emulation/quant/thread_groups.hpp"
#include "kernels/attention/sage2_attention.hpp"

namespace lowbit::kernels::attention::detail {

// Strides of Q, K, V and the output in elements (the problem's layout).
struct TensorStrides {
  long long batch = 0, head = 0, token = 0;
};

struct QuantizeParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  TensorStrides q_strides, kv_strides;
  QuantizedDevice out;
  int batch = 0, heads_q = 0, heads_kv = 0, tokens = 0, padded_q = 0, padded_kv = 0, key_chunks = 0;
  int q_groups = 0, k_groups = 0;
  float softmax_scale_log2 = 0;
};

struct AttentionParams {
  const std::int8_t* q_codes = nullptr;
  const float* q_scales = nullptr;
  const float* q_bias = nullptr;
  const std::int8_t* k_codes = nullptr;
  const float* k_scales = nullptr;
  const std::uint8_t* v_codes = nullptr;
  const float* v_scales = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  TensorStrides out_strides;
  // out and its strides are 16-byte multiples: the rows leave through shared memory in 16-byte pieces
  // (else as the accumulator's pairs, 4 bytes a store).
  bool out_in_pieces = false;
  int batch = 0, heads_q = 0, heads_kv = 0, tokens = 0, padded_q = 0, padded_kv = 0, q_groups = 0, k_groups = 0;
  // Smooth V: V's means (QuantizedDevice::v_mean). Last, so that the other fields keep their offsets
  // in the parameter bank, and the presets' instances their code.
  const float* v_mean = nullptr;
};

// Makes the per-thread groups of the recipe for head_dim (derived on the host by
// quant::derive_groups) visible to the kernels; checks that every thread of the attention kernel
// holds one Q group and one K group (one score scale per thread). Throws std::logic_error if not.
void upload_groups(int head_dim);
// Each kernel translation unit's copy of the groups in constant memory ([0]: d = 64, [1]: d = 128).
void upload_quantize_groups(const quant::QkGroups (&both)[2]);
void upload_attention_groups(const quant::QkGroups (&both)[2]);
void upload_in_place_attention_groups(const quant::QkGroups (&both)[2]);
void upload_smooth_v_attention_groups(const quant::QkGroups (&both)[2]);
void upload_pv_row_sum_attention_groups(const quant::QkGroups (&both)[2]);

void launch_statistics(const QuantizeParams& p, DType dtype, int head_dim, std::uintptr_t stream);
void launch_quantize(const QuantizeParams& p, DType dtype, int head_dim, std::uintptr_t stream);
// The attention kernel's instance for the problem's output type, head dimension, mask, exp2 unit,
// accumulation and V smoothing (sage2_attention_kernel.cu): the presets' instances there; in place,
// V smoothed or not (sage2_attention_in_place.cu), and V smoothed alone (sage2_attention_smooth_v.cu),
// for kInPlaceSmoothVDtype and kInPlaceSmoothVExp2; the row sums by P V (sage2_attention_pv_row_sum.cu),
// serial, MUFU.EX2, fp16 and bf16 output (Sage2Problem::validate).
void launch_attention(const AttentionParams& p, const Sage2Problem& problem, std::uintptr_t stream);
void launch_in_place_attention(const AttentionParams& p, int head_dim, bool causal, bool smooth_v, std::uintptr_t stream);
void launch_smooth_v_attention(const AttentionParams& p, int head_dim, bool causal, std::uintptr_t stream);
void launch_pv_row_sum_attention(const AttentionParams& p, DType dtype, int head_dim, bool causal, std::uintptr_t stream);

}  // namespace lowbit::kernels::attention::detail
