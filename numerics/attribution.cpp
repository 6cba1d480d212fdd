#include "numerics/attribution.hpp"

#include <bit>
#include <stdexcept>
#include <string>

namespace lowbit {

Attribution attribute(std::span<const double> v) {
  if (v.empty() || !std::has_single_bit(v.size()) || v.size() > (std::size_t(1) << 20))
    throw std::invalid_argument("attribute: " + std::to_string(v.size()) +
                                " values is not 2^n for a factor count n <= 20");
  const int n = std::countr_zero(v.size());
  const std::size_t all = v.size() - 1;
  // weight[s] = s! (n - s - 1)! / n!, built as a ratio to stay exact for small n.
  std::vector<double> weight(std::size_t(n > 0 ? n : 1));
  for (int s = 0; s < n; ++s) {
    double w = 1.0 / n;  // s! (n-1-s)! / n! = 1 / (n * C(n-1, s))
    for (int i = 1; i <= s; ++i) w *= double(i) / double(n - i);
    weight[std::size_t(s)] = w;
  }
  Attribution a;
  a.shapley.assign(std::size_t(n), 0.0);
  a.added.resize(std::size_t(n));
  a.removed.resize(std::size_t(n));
  for (int i = 0; i < n; ++i) {
    const std::size_t bit = std::size_t(1) << i;
    for (std::size_t s = 0; s <= all; ++s)
      if (!(s & bit)) a.shapley[std::size_t(i)] += weight[std::size_t(std::popcount(s))] * (v[s | bit] - v[s]);
    a.added[std::size_t(i)] = v[bit] - v[0];
    a.removed[std::size_t(i)] = v[all] - v[all & ~bit];
  }
  return a;
}

}  // namespace lowbit
