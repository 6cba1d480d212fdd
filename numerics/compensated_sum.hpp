// Neumaier's compensated sum: the rounding error of every addition is kept in a second double, so
// a long sum of doubles is nearly exact (error about 2 u |sum| + O(n u^2) sum |x|, u = 2^-53).
#pragma once

#include <cmath>

namespace lowbit {

struct CompensatedSum {
  double s = 0, c = 0;
  void add(double x) {
    const double t = s + x;
    c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  double value() const { return s + c; }
};

}  // namespace lowbit
