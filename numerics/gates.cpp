#include "numerics/gates.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "numerics/random.hpp"

namespace lowbit {

std::optional<std::string> SyntheticGateSpec::validate() const {
  if (!(temperature > 0) || !std::isfinite(temperature))
    return fmt::format("temperature = {}: must be a positive number", temperature);
  if (!std::isfinite(bias_mean)) return fmt::format("bias_mean = {}: must be finite", bias_mean);
  if (!(bias_std >= 0) || !std::isfinite(bias_std)) return fmt::format("bias_std = {}: must be >= 0", bias_std);
  if (!(noise_std >= 0) || !std::isfinite(noise_std)) return fmt::format("noise_std = {}: must be >= 0", noise_std);
  return std::nullopt;
}

nlohmann::json SyntheticGateSpec::to_json() const {
  return {{"temperature", temperature}, {"bias_mean", bias_mean}, {"bias_std", bias_std},
          {"noise_std", noise_std},     {"seed", seed}};
}

double log_sigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

std::vector<MatrixF> make_log_gates(const SyntheticGateSpec& spec, int heads, int tokens, int dim) {
  if (auto why = spec.validate()) throw std::invalid_argument("gates: " + *why);
  if (heads < 1 || tokens < 1 || dim < 1)
    throw std::invalid_argument(fmt::format("gates: heads = {}, tokens = {}, dim = {}: each must be >= 1", heads, tokens, dim));
  std::vector<MatrixF> gates;
  for (int h = 0; h < heads; ++h) {
    Normal normal(spec.seed * 0xD1B54A32D192ED03ull + std::uint64_t(h) + 1);
    std::vector<double> bias(static_cast<std::size_t>(dim));
    for (double& b : bias) b = spec.bias_mean + spec.bias_std * normal();
    MatrixF g(tokens, dim);
    for (int t = 0; t < tokens; ++t)
      for (int c = 0; c < dim; ++c)
        g(t, c) = float(log_sigmoid(bias[std::size_t(c)] + spec.noise_std * normal()) / spec.temperature);
    gates.push_back(std::move(g));
  }
  return gates;
}

}  // namespace lowbit
