// Test inputs shared by the quantization tests.
#pragma once

#include <cstdint>
#include <random>

#include "numerics/matrix.hpp"

namespace lowbit::test {

// i.i.d. N(0, 1) entries from a fixed seed.
inline MatrixF normal_tensor(int rows, int cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  MatrixF x(rows, cols);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  return x;
}

}  // namespace lowbit::test
