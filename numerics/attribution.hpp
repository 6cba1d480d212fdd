// Attributing an error to factors that can each be switched on or off: the error v(S) is measured
// for every set S of factors switched on (a bitmask: factor i is bit i), and
//   one at a time:  added_i   = v({i}) - v({})          (factor i alone)
//                   removed_i = v(all) - v(all \ {i})   (what switching i off saves)
//   Shapley value:  phi_i = sum over S without i of |S|! (n - |S| - 1)! / n! (v(S + i) - v(S)),
// the average of i's marginal effect over every order of switching the factors on; the phi sum to
// v(all) - v({}) exactly (efficiency), a factor that never changes v gets 0.
#pragma once

#include <span>
#include <vector>

namespace lowbit {

struct Attribution {
  std::vector<double> shapley, added, removed;
};

// `values` holds v(S) for every S in 0 .. 2^n - 1 (n <= 20). Throws std::invalid_argument when
// its size is not a power of two.
Attribution attribute(std::span<const double> values);

}  // namespace lowbit
