// Attention-like random tensors made on the GPU (benchmarks of large problems): fp16 or bf16
// values bias[c] + (u1 + u2 + u3 + u4 - 2), u uniform in [0, 1) from a counter-based hash of
// (seed, index), bias[c] uniform in [-amplitude, amplitude) per channel c = index mod dim (a
// channel bias shared by all tokens, as K has). Host code only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lowbit::kernels {

void fill_attention_like(void* device, std::size_t count, int dim, bool bf16, std::uint64_t seed, float bias_amplitude);

}  // namespace lowbit::kernels
