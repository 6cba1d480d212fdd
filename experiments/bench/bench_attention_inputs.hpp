// The inputs of bench_attention, made on the GPU from a seed per configuration, so that
// check_sage2_gpu --configs bench checks the benchmarked kernels on exactly these inputs.
#pragma once

#include <cstdint>

#include "kernels/attention/sage2_attention.hpp"
#include "kernels/random_fill.hpp"

namespace lowbit::bench {

inline std::uint64_t attention_seed(int head_dim, bool causal, int tokens) {
  return std::uint64_t(head_dim) * 1000003u + std::uint64_t(tokens) * 2 + (causal ? 1 : 0);
}

// q, k, v: device buffers of problem.elements(heads) fp16/bf16 values (heads_q for q).
inline void fill_attention_inputs(const kernels::attention::Sage2Problem& p, void* q, void* k, void* v) {
  const std::uint64_t seed = attention_seed(p.head_dim, p.causal, p.tokens);
  const bool bf16 = p.dtype == kernels::attention::DType::bf16;
  kernels::fill_attention_like(q, p.elements(p.heads_q), p.head_dim, bf16, seed * 3 + 0, 1.0f);
  kernels::fill_attention_like(k, p.elements(p.heads_kv), p.head_dim, bf16, seed * 3 + 1, 8.0f);  // K's channel bias
  kernels::fill_attention_like(v, p.elements(p.heads_kv), p.head_dim, bf16, seed * 3 + 2, 2.0f);
}

}  // namespace lowbit::bench
