// The gradients of exact attention in float64, tiled like FlashAttention-2's backward pass
// (memory O(N d), never N x N), the reference the emulated low-precision backward passes are
// measured against.
//
// With s_ij = (q_i . k_j) / sqrt(d), p_ij = exp(s_ij - lse_i) (lse from reference_attention), the
// output O and its gradient dO:
//   D_i   = sum_c dO_ic O_ic
//   dV_j  = sum_i p_ij dO_i                      (over every Q head of the KV head, GQA)
//   dP_ij = dO_i . v_j
//   dS_ij = p_ij (dP_ij - D_i)
//   dQ_i  = sum_j dS_ij k_j / sqrt(d)
//   dK_j  = sum_i dS_ij q_i / sqrt(d)            (over every Q head of the KV head)
// Two passes: per tile of queries (dQ), then per tile of keys (dK, dV), each recomputing p; every
// sum in double, tiles added in a fixed order (the result does not depend on the thread count).
// Causal masks are top-left, as in reference_attention.
#pragma once

#include <vector>

#include "numerics/attention_reference.hpp"
#include "numerics/tensor.hpp"

namespace lowbit {

struct ReferenceGradients {
  ReferenceAttention forward;  // O and lse
  std::vector<double> dq;      // [batch, heads, tokens, dim]
  std::vector<double> dk;      // [batch, kv_heads, keys, dim]
  std::vector<double> dv;      // [batch, kv_heads, keys, value_dim]
};

// Throws std::invalid_argument for shapes that do not fit (dO must have Q's batch, heads and
// tokens and V's dimension).
ReferenceGradients reference_attention_backward(const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                                const Tensor4& d_out, const ReferenceOptions& options = {});

}  // namespace lowbit
