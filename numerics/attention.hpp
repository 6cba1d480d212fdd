// Softmax attention in float64 on dense N x N scores: what quantized_qk_attention (the SageAttention2
// Table 3/9 setting, whose quantized S is dense) and `lowbit run granularity-qk` measure against.
// Whole attention tensors at any length: numerics/attention_reference.hpp (tiled, O(N d) memory).
#pragma once

#include "numerics/matrix.hpp"

namespace lowbit {

// Row-wise softmax, max subtracted first.
MatrixD softmax_rows(const MatrixD& scores);

// softmax(scores) V, where scores already include the 1/sqrt(d) factor.
MatrixD attention_from_scores(const MatrixD& scores, const MatrixD& v);

// softmax(Q K^T / sqrt(d)) V, everything in float64 (Q, K: tokens x d; V: tokens x d_v).
MatrixD attention_reference(const MatrixD& q, const MatrixD& k, const MatrixD& v);

}  // namespace lowbit
