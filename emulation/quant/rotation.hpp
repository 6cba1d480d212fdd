// The paper's baselines for outliers in Q and K (SageAttention2 §4.1): SmoothQuant-style
// migration (SmoothAttn, after QServe) and a random Hadamard rotation (HadmdAttn, after QuaRot).
// Both leave Q K^T unchanged in exact arithmetic.
#pragma once

#include <cstdint>
#include <vector>

#include "numerics/matrix.hpp"

namespace lowbit::quant {

struct MigratedQk {
  MatrixF q, k;
  std::vector<double> factor;  // per channel: Q / factor, K * factor
};

// factor_c = max|Q_c|^alpha / max|K_c|^(1 - alpha) (1 where a channel is all zero); the paper's
// SmoothAttn uses alpha = 0.5. Computed in double, rounded to float once.
MigratedQk smooth_attn(const MatrixF& q, const MatrixF& k, double alpha = 0.5);

// H = Hadamard(d) diag(signs) / sqrt(d), d a power of two, signs drawn from the seed.
class RandomHadamard {
 public:
  RandomHadamard(int dim, std::uint64_t seed);
  int dim() const { return int(signs_.size()); }
  MatrixD matrix() const;
  // x H (rows rotated), in double by the fast Walsh-Hadamard transform, rounded to float once.
  MatrixF apply(const MatrixF& x) const;

 private:
  std::vector<double> signs_;
};

}  // namespace lowbit::quant
