// A kernel's attention output (and LSE) against the emulated one, every code: what `lowbit attention
// --against` prints and lowbit.compare() returns. Values are compared as float32 bit patterns (the
// output values of `format`, the LSE as float32); a differing output element's distance is counted in
// units in the last place of `format` (its codes' ordinal distance; -1 where either side is NaN or
// infinite).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>

#include "emulation/format.hpp"

namespace lowbit::attention {

struct KernelComparison {
  std::uint64_t compared = 0, differ = 0;          // output elements
  std::uint64_t lse_compared = 0, lse_differ = 0;  // LSE values (0 compared: no LSE given)
  std::map<std::int64_t, std::uint64_t> ulps;       // ulp distance -> count of differing elements
  struct First {
    int batch, head, row, column;
    float kernel, emulated;
    std::optional<bool> row_lse_differs;  // with LSEs: whether that row's LSE differs too
  };
  std::optional<First> first;  // the first differing element in [batch, heads, tokens, dim] order
};

// kernel and emulated: [batch, heads, tokens, dim] values; the LSEs: [batch, heads, tokens] or empty.
// Throws std::invalid_argument when the sizes disagree with the shape.
KernelComparison compare_with_kernel(const Format& format, int batch, int heads, int tokens, int dim,
                                     std::span<const float> kernel, std::span<const float> emulated,
                                     std::span<const float> kernel_lse = {}, std::span<const float> emulated_lse = {});

}  // namespace lowbit::attention
