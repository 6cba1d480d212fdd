// Where exp2_exact and log2_exact (pipeline.hpp: the double result rounded to float, a long double
// one near a rounding midpoint) can differ from another machine's double exp2/log2 rounded to float:
// the inputs x whose double result y lies within |midpoint| * 2^-48 of the midpoint between two
// floats. A GPU (kernels/attention/exact_exp2.cuh) computes y with CUDA's exp2/log2 (at most 1 ulp
// of double from the truth, as glibc's), rounds it, and looks up every input whose y lies within
// |midpoint| * 2^-50 of one: 2 double ulps of either library's error lie between the two margins,
// so every input the GPU flags is in the table, whose value is exp2_exact's (log2_exact's) own. The
// table of those inputs is exact_rounding_table.hpp, made by print_exact_rounding_table; the ctest
// test_exact_rounding makes it again by the same scan.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace lowbit::attention {

enum class ExactFunction : std::uint8_t { exp2, log2 };

inline constexpr double kTableMargin = 0x1p-48;   // the scan's: |y - midpoint| <= |midpoint| * 2^-48
inline constexpr double kDeviceMargin = 0x1p-50;  // the GPU's lookup threshold

struct RoundingCase {
  std::uint32_t input = 0, result = 0;  // float32 bit patterns: x and exp2_exact(x) (log2_exact(x))
  friend bool operator==(const RoundingCase&, const RoundingCase&) = default;
};

std::string_view to_string(ExactFunction f);
// exp2_exact or log2_exact.
float exact(ExactFunction f, float x);
// Every float x (all 2^32 patterns; those with a zero, infinite or NaN result are none) within the
// table margin, in increasing bit pattern, on `threads` threads (0: every core).
std::vector<RoundingCase> hard_rounding_cases(ExactFunction f, unsigned threads = 0);

}  // namespace lowbit::attention
