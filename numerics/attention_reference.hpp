// Exact attention in float64, tiled: memory O(N d), never N x N, so 32K tokens fit anywhere.
//
// Per (batch, head h) (K, V head h / (heads / kv_heads), GQA), per tile of kQueryTile queries, in
// two passes over tiles of kKeyTile keys:
//   1. m_i = max_j s_ij,   s_ij = (q_i . k_j) / sqrt(d) in double (masked keys left out)
//   2. p_ij = exp(s_ij - m_i);  l_i = sum_j p_ij;  o_i = sum_j p_ij v_j
//      each tile's sums in double, the tiles' sums added with Neumaier compensation
//   out_i = o_i / l_i,   lse_i = m_i + log(l_i)
// Causal masks are top-left (key j visible to query i when j <= i). Error: the scores carry
// d u sum_c |q_c k_c| (u = 2^-53; exact products of fp16/bf16 inputs), the within-tile sums
// kKeyTile u of their magnitude, the compensated sums over tiles about 2u: near 1e-13 relative,
// far below any float32 effect.
#pragma once

#include <vector>

#include "numerics/tensor.hpp"

namespace lowbit {

struct ReferenceAttention {
  std::vector<double> output;  // [batch, heads, tokens, value_dim]
  std::vector<double> lse;     // [batch, heads, tokens]: natural log of sum_j exp(q.k_j / sqrt(d))
};

struct ReferenceOptions {
  bool causal = false;
  unsigned threads = 0;  // 0: every core
};

// Throws std::invalid_argument for shapes that do not fit (as attention::forward names them).
ReferenceAttention reference_attention(const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                       const ReferenceOptions& options = {});

}  // namespace lowbit
