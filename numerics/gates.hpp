// Synthetic data-dependent forget gates for gated linear attention, in log space, with GLA's
// parametrization (Yang et al. 2024, §4.4: alpha = sigmoid(x W + b)^(1/tau), tau = 16):
//   log alpha[t, c] = log_sigmoid(b[c] + noise_std * z[t, c]) / temperature
// with b[c] ~ N(bias_mean, bias_std^2) drawn once per head and channel (channels that forget fast
// and channels that keep their memory), z ~ N(0, 1) for each token and channel. Every value is
// <= 0 (alpha <= 1); the random numbers are numerics/random.hpp's, so a seed fixes the gates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "numerics/matrix.hpp"

namespace lowbit {

struct SyntheticGateSpec {
  double temperature = 16;  // tau
  double bias_mean = 0;
  double bias_std = 1.5;
  double noise_std = 1;
  std::uint64_t seed = 1;

  std::optional<std::string> validate() const;
  nlohmann::json to_json() const;
};

// log(sigmoid(x)), without overflow for large |x|.
double log_sigmoid(double x);

// One tokens x dim matrix of log gates per head (float32, as a kernel reads them). Throws
// std::invalid_argument with validate()'s reason or for an empty shape.
std::vector<MatrixF> make_log_gates(const SyntheticGateSpec& spec, int heads, int tokens, int dim);

}  // namespace lowbit
