// Accuracy metrics of an approximation against a reference, as the SageAttention papers define
// them (both tensors flattened): cosine similarity, relative L1 distance, RMSE; plus max
// absolute error and the float32 ULP distance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "numerics/matrix.hpp"

namespace lowbit {

struct ErrorMetrics {
  double cosine = 0;       // sum(r*a) / sqrt(sum(r^2) * sum(a^2))
  double relative_l1 = 0;  // sum|r - a| / sum|r|
  double rmse = 0;         // sqrt(mean((r - a)^2))
  double max_abs = 0;      // max|r - a|
  std::size_t count = 0;
};

// Sums in double (compensated), so the metrics of float64 tensors are not limited by the order.
ErrorMetrics compare(std::span<const double> reference, std::span<const double> approximation);
ErrorMetrics compare(const MatrixD& reference, const MatrixD& approximation);

// Floats between a and b on the number line (0 for equal values, +0 and -0 equal);
// UINT64_MAX when either is NaN.
std::uint64_t ulp_distance(float a, float b);

}  // namespace lowbit
