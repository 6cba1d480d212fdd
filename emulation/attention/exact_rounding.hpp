// Where exp2_exact and log2_exact (pipeline.hpp: the double result rounded to float, a long double
// one near a rounding midpoint) can differ from another machine's double exp2/log2 rounded to float:
// the inputs x whose double result y lies within |midpoint| * 2^-48 of the midpoint between two
// floats. A GPU (kernels/attention/exact_exp2.cuh) computes y with CUDA's exp2/log2 (at most 1 ulp
// of double from the truth, as glibc's), rounds it, and looks up every input whose y lies within
// |midpoint| * 2^-50 of one (round_with_table): 2 double ulps of either library's error lie between
// the two margins, so every input the GPU flags is in the table, whose value is exp2_exact's
// (log2_exact's) own. The table of those inputs is exact_rounding_table.hpp, made by
// print_exact_rounding_table; the ctest test_exact_rounding makes it again by the same scan and runs
// round_with_table on every input with glibc's double moved by up to one ulp either way.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "emulation/format.hpp"  // LOWBIT_HD

namespace lowbit::attention {

enum class ExactFunction : std::uint8_t { exp2, log2 };

inline constexpr double kTableMargin = 0x1p-48;   // the scan's: |y - midpoint| <= |midpoint| * 2^-48
inline constexpr double kDeviceMargin = 0x1p-50;  // the GPU's lookup threshold

struct RoundingCase {
  std::uint32_t input = 0, result = 0;  // float32 bit patterns: x and exp2_exact(x) (log2_exact(x))
  friend bool operator==(const RoundingCase&, const RoundingCase&) = default;
};

// Whether y lies within |midpoint| * margin of the float rounding midpoint nearest it: between
// float(y) and its neighbour on y's side (none where float(y) is infinite or NaN).
LOWBIT_HD inline bool near_rounding_midpoint(double y, double margin) {
  const float r = float(y);  // round to nearest even, host and device
  if (!(std::fabs(r) <= 0x1.fffffep127f)) return false;
  const float neighbour = nextafterf(r, y > double(r) ? HUGE_VALF : -HUGE_VALF);
  const double midpoint = (double(r) + double(neighbour)) / 2;  // exact
  return std::fabs(y - midpoint) <= std::fabs(midpoint) * margin;
}

// y, a double exp2 (log2) of x however computed, rounded to float; near a rounding midpoint (within
// margin), the table's result for x (table: `count` cases sorted by input; the rounded y where x is
// not there). Host and device (kernels/attention/exact_exp2.cuh).
LOWBIT_HD inline float round_with_table(double y, float x, const RoundingCase* table, int count, double margin) {
  if (!near_rounding_midpoint(y, margin)) return float(y);
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  int lo = 0, hi = count - 1;
  while (lo <= hi) {
    const int mid = (lo + hi) / 2;
    if (table[mid].input == bits) return std::bit_cast<float>(table[mid].result);
    if (table[mid].input < bits) lo = mid + 1;
    else hi = mid - 1;
  }
  return float(y);
}

std::string_view to_string(ExactFunction f);
// exp2_exact or log2_exact.
float exact(ExactFunction f, float x);
// Every float x (all 2^32 patterns) whose double result is near_rounding_midpoint at the table
// margin, in increasing bit pattern, on `threads` threads (0: every core). A result that rounds to
// zero counts too (exp2(-150) is 2^-150, the midpoint of 0 and 2^-149): exp2_exact returns it as
// rounded, and the GPU must, however its last double bit falls.
std::vector<RoundingCase> hard_rounding_cases(ExactFunction f, unsigned threads = 0);

}  // namespace lowbit::attention
