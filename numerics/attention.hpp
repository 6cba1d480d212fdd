// Softmax attention in float64: the reference every quantized variant is measured against.
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
