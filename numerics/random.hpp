// Platform-independent random numbers for the synthetic data: std::mt19937_64 (its output is
// fixed by the C++ standard) and Box-Muller, so a seed gives the same data everywhere (the
// standard fixes neither normal_distribution nor generate_canonical).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace lowbit {

class Normal {
 public:
  explicit Normal(std::uint64_t seed) : engine_(seed) {}
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // 53-bit uniforms in (0, 1].
    const double u1 = (double(engine_() >> 11) + 1.0) * 0x1p-53;
    const double u2 = double(engine_() >> 11) * 0x1p-53;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    spare_ = radius * std::sin(2 * std::numbers::pi * u2);
    has_spare_ = true;
    return radius * std::cos(2 * std::numbers::pi * u2);
  }
  std::uint64_t below(std::uint64_t n) { return engine_() % n; }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace lowbit
