#include "emulation/attention/exact_rounding.hpp"

#include <bit>
#include <cmath>

#include "emulation/attention/pipeline.hpp"
#include "numerics/parallel.hpp"

namespace lowbit::attention {

std::string_view to_string(ExactFunction f) { return f == ExactFunction::exp2 ? "exp2" : "log2"; }

float exact(ExactFunction f, float x) { return f == ExactFunction::exp2 ? exp2_exact(x) : log2_exact(x); }

std::vector<RoundingCase> hard_rounding_cases(ExactFunction f, unsigned threads) {
  constexpr std::uint64_t kChunk = std::uint64_t(1) << 22;
  constexpr std::size_t kChunks = std::size_t((std::uint64_t(1) << 32) / kChunk);
  std::vector<std::vector<RoundingCase>> found(kChunks);
  parallel_for(kChunks, threads, [&](std::size_t chunk, unsigned) {
    for (std::uint64_t i = chunk * kChunk; i < (chunk + 1) * kChunk; ++i) {
      const float x = std::bit_cast<float>(std::uint32_t(i));
      const double y = f == ExactFunction::exp2 ? std::exp2(double(x)) : std::log2(double(x));
      if (near_rounding_midpoint(y, kTableMargin))
        found[chunk].push_back({std::uint32_t(i), std::bit_cast<std::uint32_t>(exact(f, x))});
    }
  });
  std::vector<RoundingCase> cases;
  for (const auto& c : found) cases.insert(cases.end(), c.begin(), c.end());
  return cases;
}

}  // namespace lowbit::attention
