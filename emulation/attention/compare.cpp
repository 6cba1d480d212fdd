#include "emulation/attention/compare.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

#include "emulation/convert.hpp"

namespace lowbit::attention {

KernelComparison compare_with_kernel(const Format& format, int batch, int heads, int tokens, int dim,
                                     std::span<const float> kernel, std::span<const float> emulated,
                                     std::span<const float> kernel_lse, std::span<const float> emulated_lse) {
  const std::size_t n = std::size_t(batch) * std::size_t(heads) * std::size_t(tokens) * std::size_t(dim);
  const std::size_t rows = std::size_t(batch) * std::size_t(heads) * std::size_t(tokens);
  if (kernel.size() != n || emulated.size() != n)
    throw std::invalid_argument("compare: " + std::to_string(kernel.size()) + " kernel and " + std::to_string(emulated.size()) +
                                " emulated output values for " + std::to_string(n) + " of the shape");
  if (kernel_lse.size() != emulated_lse.size() || (!kernel_lse.empty() && kernel_lse.size() != rows))
    throw std::invalid_argument("compare: " + std::to_string(kernel_lse.size()) + " kernel and " +
                                std::to_string(emulated_lse.size()) + " emulated LSE values for " + std::to_string(rows) +
                                " rows ([batch, heads, tokens])");
  const auto same = [](float x, float y) { return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y); };
  // A signed ordinal of a value's code, so that neighbouring values are one apart across zero.
  const auto ordinal = [&](float x) -> std::int64_t {
    const Code c = encode(format, x, {Rounding::nearest_even, Overflow::inf});
    const auto magnitude = std::int64_t(c & format.magnitude_mask());
    return c & format.sign_mask() ? -magnitude : magnitude;
  };
  KernelComparison r;
  r.compared = n;
  r.lse_compared = kernel_lse.size();
  for (std::size_t i = 0; i < kernel_lse.size(); ++i) r.lse_differ += !same(kernel_lse[i], emulated_lse[i]);
  for (std::size_t i = 0; i < n; ++i) {
    if (same(kernel[i], emulated[i])) continue;
    ++r.differ;
    const bool finite = std::isfinite(kernel[i]) && std::isfinite(emulated[i]);
    ++r.ulps[finite ? std::abs(ordinal(kernel[i]) - ordinal(emulated[i])) : -1];
    if (r.first) continue;
    const std::size_t row = i / std::size_t(dim);
    KernelComparison::First f{int(row / std::size_t(tokens) / std::size_t(heads)), int(row / std::size_t(tokens) % std::size_t(heads)),
                              int(row % std::size_t(tokens)), int(i % std::size_t(dim)), kernel[i], emulated[i], std::nullopt};
    if (!kernel_lse.empty()) f.row_lse_differs = !same(kernel_lse[row], emulated_lse[row]);
    r.first = f;
  }
  return r;
}

}  // namespace lowbit::attention
