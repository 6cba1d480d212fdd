// Attention with a quantized Q K^T and everything else in float64: the setting of the
// SageAttention2 granularity and smoothing tables (Tables 3 and 9: INT4 Q, K; P and V in
// full precision). One call = one row of such a table for one head.
//
//   0. NaN/Inf in Q, K or V is counted and located in the inputs as given, before any transform
//      (smoothing would spread one NaN over its block's channel mean, and the quantizer would
//      then report the block); refused unless both q_spec and k_spec propagate
//   1. optional baseline transform of Q and K (SmoothAttn migration, random Hadamard rotation)
//   2. smoothing (float32): Q minus its per-block mean (block q_smooth_block), K minus its
//      mean over all tokens
//   3. quantize the residuals with q_spec / k_spec (row-scaled groupings)
//   4. S = scaled_matmul(Q^, K^) (float32 dequantization once per thread) + Delta S (float64)
//   5. O = softmax(S / sqrt(d)) V in float64
#pragma once

#include <cstdint>
#include <string>

#include "emulation/quant/quantize.hpp"
#include "numerics/matrix.hpp"
#include "numerics/nonfinite.hpp"

namespace lowbit::attention {

enum class QkBaseline : std::uint8_t { none, smooth_attn, hadamard };

struct QkAttentionConfig {
  quant::QuantSpec q_spec, k_spec;
  bool smooth_q = true, smooth_k = true;
  int q_smooth_block = 128;
  QkBaseline baseline = QkBaseline::none;
  double smooth_attn_alpha = 0.5;
  std::uint64_t hadamard_seed = 0;
};

struct QkAttentionResult {
  MatrixD output;
  // Mean over tokens of the scale each token was quantized with (the step of its group):
  // compared across granularities it shows how much coarser a group's step is than a token's.
  double mean_q_scale = 0, mean_k_scale = 0;
  // NaN/Inf in the inputs as given (non-empty only when both specs propagate).
  NonFiniteReport q_nonfinite, k_nonfinite, v_nonfinite;
};

// How error messages name the inputs (`lowbit run granularity-qk` names the files they came from).
struct QkTensorNames {
  std::string q = "Q", k = "K", v = "V";
};

// Throws std::invalid_argument naming the tensor for refused NaN/Inf input (count, first index).
QkAttentionResult quantized_qk_attention(const MatrixF& q, const MatrixF& k, const MatrixF& v,
                                         const QkAttentionConfig& config, const QkTensorNames& names = {});

}  // namespace lowbit::attention
