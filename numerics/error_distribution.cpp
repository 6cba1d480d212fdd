#include "numerics/error_distribution.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace lowbit {

void ErrorHistogram::add(double e) {
  if (!(e < std::pow(10.0, kHighestDecade))) {  // NaN too
    ++above;
    return;
  }
  if (e < std::pow(10.0, kLowestDecade)) {
    ++below;
    return;
  }
  const int i = int(std::floor((std::log10(e) - kLowestDecade) * kBinsPerDecade));
  ++counts[std::size_t(std::clamp(i, 0, kBins - 1))];
}

void ErrorHistogram::merge(const ErrorHistogram& other) {
  for (int i = 0; i < kBins; ++i) counts[std::size_t(i)] += other.counts[std::size_t(i)];
  below += other.below;
  above += other.above;
}

std::uint64_t ErrorHistogram::total() const {
  return std::accumulate(counts.begin(), counts.end(), below + above);
}

ErrorDistribution error_distribution(std::span<const double> r, std::span<const double> a) {
  if (r.size() != a.size())
    throw std::invalid_argument("error_distribution: reference has " + std::to_string(r.size()) +
                                " values, approximation " + std::to_string(a.size()));
  ErrorDistribution out;
  std::vector<double> e(r.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    e[i] = std::fabs(r[i] - a[i]);
    out.histogram.add(e[i]);
  }
  if (e.empty()) return out;
  // NaN sorts last: a NaN error shows as the maximum.
  const auto rank = [&](double q) {  // nearest rank: the ceil(q N)-th smallest
    const auto index = std::size_t(std::max(1.0, std::ceil(q * double(e.size())))) - 1;
    const auto at = e.begin() + std::ptrdiff_t(std::min(e.size() - 1, index));
    std::nth_element(e.begin(), at, e.end(), [](double x, double y) { return x < y || (!std::isnan(x) && std::isnan(y)); });
    return *at;
  };
  out.quantiles = {rank(0.5), rank(0.9), rank(0.99), rank(0.999), rank(1.0)};
  return out;
}

}  // namespace lowbit
