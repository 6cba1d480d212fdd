#include "numerics/metrics.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "numerics/compensated_sum.hpp"

namespace lowbit {

ErrorMetrics compare(std::span<const double> r, std::span<const double> a) {
  if (r.size() != a.size())
    throw std::invalid_argument("compare: reference has " + std::to_string(r.size()) +
                                " values, approximation " + std::to_string(a.size()));
  // Compensated: the metrics of near-identical tensors need the small terms.
  CompensatedSum dot, rr, aa, l1, l1_ref, sq;
  double max_abs = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double d = r[i] - a[i];
    dot.add(r[i] * a[i]);
    rr.add(r[i] * r[i]);
    aa.add(a[i] * a[i]);
    l1.add(std::fabs(d));
    l1_ref.add(std::fabs(r[i]));
    sq.add(d * d);
    max_abs = std::fmax(max_abs, std::fabs(d));
  }
  ErrorMetrics m;
  m.count = r.size();
  m.cosine = dot.value() / std::sqrt(rr.value() * aa.value());
  m.relative_l1 = l1.value() / l1_ref.value();
  m.rmse = r.empty() ? 0 : std::sqrt(sq.value() / double(r.size()));
  m.max_abs = max_abs;
  return m;
}

ErrorMetrics compare(const MatrixD& reference, const MatrixD& approximation) {
  if (reference.rows() != approximation.rows() || reference.cols() != approximation.cols())
    throw std::invalid_argument("compare: shapes differ (" + std::to_string(reference.rows()) + "x" +
                                std::to_string(reference.cols()) + " vs " + std::to_string(approximation.rows()) +
                                "x" + std::to_string(approximation.cols()) + ")");
  return compare(std::span<const double>(reference.data(), std::size_t(reference.size())),
                 std::span<const double>(approximation.data(), std::size_t(approximation.size())));
}

std::uint64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<std::uint64_t>::max();
  // Map the bit patterns onto a line where consecutive floats are consecutive integers.
  const auto line = [](float x) {
    const auto bits = std::bit_cast<std::uint32_t>(x);
    return (bits & 0x80000000u) ? -std::int64_t(bits & 0x7fffffffu) : std::int64_t(bits);
  };
  const std::int64_t d = line(a) - line(b);
  return std::uint64_t(d < 0 ? -d : d);
}

}  // namespace lowbit
