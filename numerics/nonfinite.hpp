// NaN/Inf in an input tensor: how many, and where the first one is (as [row, col], the form every
// input check of the quantizers names a position in). Quantizers refuse such input by default and
// name it with this report.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace lowbit {

// "[row, col]" of a flat row-major index into rows of `cols` values ("[index, 0]" when cols is 0).
inline std::string matrix_position(std::size_t index, std::size_t cols) {
  return "[" + std::to_string(cols ? index / cols : index) + ", " + std::to_string(cols ? index % cols : 0) + "]";
}

struct NonFiniteReport {
  std::size_t nan_count = 0;
  std::size_t inf_count = 0;
  std::size_t first_index = 0;  // flat (row-major) index of the first non-finite value
  bool first_is_nan = false;

  std::size_t count() const { return nan_count + inf_count; }
  bool any() const { return count() != 0; }
  // "K: 3 non-finite values (2 NaN, 1 Inf), the first at [5, 17] (NaN)"; cols gives the row
  // length for the [row, col] form of the first index.
  std::string describe(std::string_view tensor, std::size_t cols) const {
    std::string s = std::string(tensor) + ": " + std::to_string(count()) + " non-finite value" +
                    (count() == 1 ? "" : "s") + " (" + std::to_string(nan_count) + " NaN, " +
                    std::to_string(inf_count) + " Inf), the first at " + matrix_position(first_index, cols) + " (" +
                    (first_is_nan ? "NaN" : "Inf") + ")";
    return s;
  }
};

template <class T>
NonFiniteReport scan_nonfinite(std::span<const T> values) {
  NonFiniteReport r;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const T v = values[i];
    if (std::isfinite(v)) continue;
    const bool nan = std::isnan(v);
    if (!r.any()) r.first_index = i, r.first_is_nan = nan;
    (nan ? r.nan_count : r.inf_count) += 1;
  }
  return r;
}

}  // namespace lowbit
