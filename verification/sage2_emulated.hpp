// The emulated `sage2-8b` pipeline (emulation/attention/pipeline.hpp) on the kernels' problem, its
// results laid out as the kernels' buffers (sage2_attention.hpp), so that every code, scale, output
// and LSE can be compared element by element. Layout translation only: every number comes from
// attention::forward.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention/sage2_attention.hpp"

namespace lowbit::verification {

struct Sage2Emulated {
  std::vector<std::uint16_t> out;                    // the problem's layout and dtype
  std::vector<float> lse;                            // [batch][heads_q][tokens]
  kernels::attention::Sage2HostQuantized quantized;  // the device buffers' layout
};

// The preset sage2-8b (sage2-8b-ex2 for the problem's exp2) for the problem's head dim, its output
// rounded to the problem's dtype, o accumulated in place and V smoothed as the problem says.
// fp16/bf16 codes in, in the problem's layout. Throws std::invalid_argument as forward() does.
Sage2Emulated emulate_sage2(const kernels::attention::Sage2Problem& problem, std::span<const std::uint16_t> q,
                            std::span<const std::uint16_t> k, std::span<const std::uint16_t> v);

// Rows `rows` (absolute query indices, whole block_q blocks) of one head of Q against every key of
// one KV head, as forward() computes them: the queries' outputs (fp16/bf16 codes, rows x dim) and
// LSE. Non-causal only when the rows are not a prefix (the causal mask needs absolute indices).
struct Sage2EmulatedRows {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};
Sage2EmulatedRows emulate_sage2_rows(const kernels::attention::Sage2Problem& one_head, std::span<const std::uint16_t> q,
                                     std::span<const std::uint16_t> k, std::span<const std::uint16_t> v,
                                     std::span<const int> rows);

}  // namespace lowbit::verification
