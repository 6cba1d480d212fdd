// The distribution of per-element errors |approximation - reference|: a histogram on a fixed
// log10 grid (the same bins for every run, so histograms of heads, layers and datasets add) and
// exact quantiles of one comparison.
//
// Bins: [kLowest + i w, kLowest + (i + 1) w) in log10 |error|, w = 1 / kBinsPerDecade, from
// 1e-12 to 1e3; errors below 1e-12 (exact zeros included) fall in `below`, errors of 1e3 and more
// (or NaN) in `above`.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace lowbit {

struct ErrorHistogram {
  static constexpr int kLowestDecade = -12, kHighestDecade = 3, kBinsPerDecade = 10;
  static constexpr int kBins = (kHighestDecade - kLowestDecade) * kBinsPerDecade;
  std::array<std::uint64_t, kBins> counts{};
  std::uint64_t below = 0, above = 0;

  void add(double abs_error);
  void merge(const ErrorHistogram& other);
  std::uint64_t total() const;
  static double bin_low(int i) { return kLowestDecade + double(i) / kBinsPerDecade; }  // log10
};

struct ErrorQuantiles {
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;  // of |error|
};

// The histogram of |r - a| and its exact quantiles (nearest rank). Sizes must agree.
struct ErrorDistribution {
  ErrorHistogram histogram;
  ErrorQuantiles quantiles;
};
ErrorDistribution error_distribution(std::span<const double> reference, std::span<const double> approximation);

}  // namespace lowbit
