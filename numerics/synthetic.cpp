#include "numerics/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>

#include "numerics/npy.hpp"
#include "numerics/random.hpp"

namespace lowbit {
namespace {

// exp(sigma * a(t)), a(t) white noise smoothed by a Gaussian kernel of width `length`,
// normalised to unit variance; times the outlier scale on a random fraction of the tokens.
std::vector<double> token_scales(Normal& normal, const SyntheticAttentionSpec& s, double sigma) {
  const int tokens = s.tokens;
  const double length = s.token_scale_length;
  const int half = int(std::ceil(3 * length));
  std::vector<double> noise(std::size_t(tokens + 2 * half));
  for (double& z : noise) z = normal();
  std::vector<double> kernel(std::size_t(2 * half + 1));
  double norm = 0;
  for (int i = -half; i <= half; ++i) {
    kernel[std::size_t(i + half)] = length > 0 ? std::exp(-0.5 * (i / length) * (i / length)) : (i == 0);
    norm += kernel[std::size_t(i + half)] * kernel[std::size_t(i + half)];
  }
  std::vector<double> r(static_cast<std::size_t>(tokens));
  for (int t = 0; t < tokens; ++t) {
    double a = 0;
    for (int i = 0; i <= 2 * half; ++i) a += kernel[std::size_t(i)] * noise[std::size_t(t + i)];
    r[std::size_t(t)] = std::exp(sigma * a / std::sqrt(norm));
  }
  const auto outliers = std::uint64_t(std::llround(s.outlier_token_fraction * tokens));
  for (std::uint64_t i = 0; i < outliers; ++i) r[std::size_t(normal.below(std::uint64_t(tokens)))] *= s.outlier_token_scale;
  return r;
}

}  // namespace

std::optional<std::string> SyntheticAttentionSpec::validate() const {
  if (heads < 1) return "heads=" + std::to_string(heads) + ": need at least one head";
  if (tokens < 1) return "tokens=" + std::to_string(tokens) + ": need at least one token";
  if (dim < 1) return "dim=" + std::to_string(dim) + ": need at least one channel";
  if (outlier_channels < 0 || outlier_channels > dim)
    return "outlier_channels=" + std::to_string(outlier_channels) + ": must be in [0, dim=" + std::to_string(dim) + "]";
  if (q_segment_tokens < 1) return "q_segment_tokens=" + std::to_string(q_segment_tokens) + ": must be >= 1";
  if (token_scale_length < 0 || token_scale_length > 1e5)
    return "token_scale_length=" + std::to_string(token_scale_length) + ": must be in [0, 1e5]";
  if (!(token_noise_length >= 0 && token_noise_length <= 1e9))
    return "token_noise_length=" + std::to_string(token_noise_length) + ": must be in [0, 1e9]";
  if (v_token_noise_length && !(*v_token_noise_length >= 0 && *v_token_noise_length <= 1e9))
    return "v_token_noise_length=" + std::to_string(*v_token_noise_length) + ": must be in [0, 1e9]";
  if (v_token_scale_sigma && !(std::isfinite(*v_token_scale_sigma) && *v_token_scale_sigma >= 0))
    return "v_token_scale_sigma=" + std::to_string(*v_token_scale_sigma) + ": must be finite and >= 0";
  if (!(outlier_token_fraction >= 0 && outlier_token_fraction <= 1))
    return "outlier_token_fraction=" + std::to_string(outlier_token_fraction) + ": must be in [0, 1]";
  for (double v : {token_scale_sigma, outlier_token_scale, outlier_std, outlier_bias, outlier_bias_decay,
                   channel_std_log_sigma, v_channel_std_log_sigma, k_bias_std, q_bias_std, q_outlier_bias_scale,
                   q_segment_offset_std, k_segment_offset_std, v_bias_std, q_gain})
    if (!std::isfinite(v) || v < 0) return "every spread, bias, decay and gain must be finite and >= 0";
  if (sink_tokens < 0 || sink_tokens > tokens)
    return "sink_tokens=" + std::to_string(sink_tokens) + ": must be in [0, tokens=" + std::to_string(tokens) + "]";
  if (sink_tokens > 0 && !(std::isfinite(sink_logit) && q_bias_std > 0 && q_gain > 0))
    return "sink_tokens needs a finite sink_logit and a Q mean to point the sinks' keys along (q_bias_std > 0, q_gain > 0)";
  if (q_outlier_rope_partner && dim % 2 != 0)
    return "q_outlier_rope_partner needs an even dim (rotary pairs c, c + dim/2), got dim=" + std::to_string(dim);
  return std::nullopt;
}

nlohmann::json SyntheticAttentionSpec::to_json() const {
  nlohmann::json j = {{"preset", preset},
          {"heads", heads},
          {"tokens", tokens},
          {"dim", dim},
          {"seed", seed},
          {"token_scale_sigma", token_scale_sigma},
          {"token_scale_length", token_scale_length},
          {"token_noise_length", token_noise_length},
          {"v_token_scale_sigma", v_token_scale_sigma ? nlohmann::json(*v_token_scale_sigma) : nlohmann::json()},
          {"v_token_noise_length", v_token_noise_length ? nlohmann::json(*v_token_noise_length) : nlohmann::json()},
          {"outlier_token_fraction", outlier_token_fraction},
          {"outlier_token_scale", outlier_token_scale},
          {"outlier_channels", outlier_channels},
          {"outlier_std", outlier_std},
          {"outlier_bias", outlier_bias},
          {"outlier_bias_decay", outlier_bias_decay},
          {"channel_std_log_sigma", channel_std_log_sigma},
          {"v_channel_std_log_sigma", v_channel_std_log_sigma},
          {"k_bias_std", k_bias_std},
          {"q_bias_std", q_bias_std},
          {"q_outlier_bias_scale", q_outlier_bias_scale},
          {"q_outlier_rope_partner", q_outlier_rope_partner},
          {"q_segment_tokens", q_segment_tokens},
          {"q_segment_offset_std", q_segment_offset_std},
          {"k_segment_offset_std", k_segment_offset_std},
          {"v_bias_std", v_bias_std},
          {"q_gain", q_gain}};
  // Only where on, so that the records of specs without sinks stay as they were.
  if (sink_tokens > 0) j["sink_tokens"] = sink_tokens, j["sink_logit"] = sink_logit;
  return j;
}

AttentionData make_synthetic_attention(const SyntheticAttentionSpec& s) {
  if (auto why = s.validate()) throw std::invalid_argument("synthetic attention data: " + *why);
  AttentionData data;
  for (int h = 0; h < s.heads; ++h) {
    Normal normal(s.seed * 0x9E3779B97F4A7C15ull + std::uint64_t(h));
    std::vector<double> channel_std(std::size_t(s.dim), 1.0), k_bias(std::size_t(s.dim)), q_bias(std::size_t(s.dim)),
        v_bias(std::size_t(s.dim));
    for (int c = 0; c < s.dim; ++c) {
      k_bias[std::size_t(c)] = s.k_bias_std * normal();
      q_bias[std::size_t(c)] = s.q_bias_std * normal();
      v_bias[std::size_t(c)] = s.v_bias_std * normal();
    }
    std::vector<bool> is_outlier(std::size_t(s.dim), false);
    for (int i = 0; i < s.outlier_channels; ++i) {
      std::size_t c;
      do c = std::size_t(normal.below(std::uint64_t(s.dim)));
      while (is_outlier[c]);
      is_outlier[c] = true;
      channel_std[c] = s.outlier_std;
      const double sign = normal() < 0 ? -1.0 : 1.0;
      const double bias = s.outlier_bias / std::pow(double(i + 1), s.outlier_bias_decay);  // pow(x, 0) = 1 exactly
      k_bias[c] += sign * bias;
      q_bias[s.q_outlier_rope_partner ? (c + std::size_t(s.dim / 2)) % std::size_t(s.dim) : c] +=
          sign * s.q_outlier_bias_scale * bias;
    }
    const int segments = (s.tokens + s.q_segment_tokens - 1) / s.q_segment_tokens;
    MatrixD q_offset(segments, s.dim), k_offset = MatrixD::Zero(segments, s.dim);
    for (int g = 0; g < segments; ++g)
      for (int c = 0; c < s.dim; ++c) q_offset(g, c) = s.q_segment_offset_std * normal();
    // The draws of the later parameters come after those of the original ones, and only when
    // they are on, so the data of specs without them stays the same, bit for bit.
    if (s.k_segment_offset_std > 0)
      for (int g = 0; g < segments; ++g)
        for (int c = 0; c < s.dim; ++c) k_offset(g, c) = s.k_segment_offset_std * normal();
    std::vector<double> v_std(std::size_t(s.dim), 1.0);
    if (s.channel_std_log_sigma > 0)
      for (double& x : channel_std) x *= std::exp(s.channel_std_log_sigma * normal());
    if (s.v_channel_std_log_sigma > 0)
      for (double& x : v_std) x = std::exp(s.v_channel_std_log_sigma * normal());
    const auto r_q = token_scales(normal, s, s.token_scale_sigma);
    const auto r_k = token_scales(normal, s, s.token_scale_sigma);
    const auto r_v = token_scales(normal, s, s.v_token_scale_sigma.value_or(s.token_scale_sigma));
    // z of each tensor and channel, carried along the tokens (rho = 0: z = e, bit for bit).
    struct Ar1 {
      double rho, innovation;
      explicit Ar1(double length) : rho(length > 0 ? std::exp(-1.0 / length) : 0.0), innovation(std::sqrt(1.0 - rho * rho)) {}
    };
    const Ar1 qk_noise(s.token_noise_length), v_noise(s.v_token_noise_length.value_or(s.token_noise_length));
    std::vector<double> z_k(std::size_t(s.dim)), z_q(std::size_t(s.dim)), z_v(std::size_t(s.dim));
    const auto step = [&](double& z, int t, const Ar1& p) {
      return z = t == 0 ? normal() : p.rho * z + p.innovation * normal();
    };
    MatrixF q(s.tokens, s.dim), k(s.tokens, s.dim), v(s.tokens, s.dim);
    for (int t = 0; t < s.tokens; ++t)
      for (int c = 0; c < s.dim; ++c) {
        const auto ct = std::size_t(c), tt = std::size_t(t);
        const int segment = t / s.q_segment_tokens;
        k(t, c) = float(k_bias[ct] + k_offset(segment, c) + r_k[tt] * channel_std[ct] * step(z_k[ct], t, qk_noise));
        const double q_noise = r_q[tt] * channel_std[ct] * step(z_q[ct], t, qk_noise);
        q(t, c) = float(s.q_gain * (q_bias[ct] + q_offset(segment, c) + q_noise));
        v(t, c) = float(v_bias[ct] + r_v[tt] * v_std[ct] * step(z_v[ct], t, v_noise));
      }
    if (s.sink_tokens > 0) {
      const Eigen::RowVectorXd mean = q.cast<double>().colwise().mean();
      const double norm = mean.norm();
      if (!(norm > 0)) throw std::invalid_argument("synthetic attention data: sink_tokens, but head " + std::to_string(h) + "'s Q has no mean");
      const Eigen::RowVectorXd shift = mean / norm * (s.sink_logit * std::sqrt(double(s.dim)) / norm);
      for (int t = 0; t < s.sink_tokens; ++t)
        for (int c = 0; c < s.dim; ++c) k(t, c) = float(double(k(t, c)) + shift(c));
    }
    data.q.push_back(std::move(q));
    data.k.push_back(std::move(k));
    data.v.push_back(std::move(v));
  }
  return data;
}

namespace {

// Matched to the statistics of SmolLM2-135M's captured Q, K, V; results/data/README.md gives
// the statistic each value was set from, and test_synthetic_presets checks them.
SyntheticAttentionSpec smollm2_like() {
  SyntheticAttentionSpec s;
  s.heads = 9;
  s.tokens = 1024;
  s.dim = 64;
  s.token_scale_sigma = 0.11;
  s.token_scale_length = 0;
  s.token_noise_length = 2;
  s.v_token_scale_sigma = 0.21;
  s.v_token_noise_length = 0.5;
  s.outlier_token_fraction = 0;
  s.outlier_channels = 12;
  s.outlier_std = 1;
  s.outlier_bias = 9.5;
  s.outlier_bias_decay = 0.9;
  s.channel_std_log_sigma = 0.33;
  s.v_channel_std_log_sigma = 0.2;
  s.k_bias_std = 0;
  s.q_bias_std = 0;
  s.q_outlier_bias_scale = 0.85;
  s.q_outlier_rope_partner = true;
  s.q_segment_tokens = 128;
  s.q_segment_offset_std = 0.5;
  s.k_segment_offset_std = 0.62;
  s.v_bias_std = 0.33;
  s.q_gain = 1;
  return s;
}

// Long rows whose probability mass lies far under the row's maximum, with V dominated by its
// channel means: what SageAttention2's Tables 6 and 13 and SageAttention3's direct-P ablation
// depend on, and what 1024-token data does not reach. Unit channels and no token or channel
// outliers to concentrate the attention, so a query's logits over the keys spread with a standard
// deviation of q_gain = 2 (|q| = 2 sqrt(d)); at 16K keys the row maximum lies ~4 spreads above the
// mean, so most of a row's mass lies between 2^-10 and 2^-3 of its maximum, 10-35% of it (mean over
// queries) under 1/254 (what INT8 P at 127, rounded, drops), and the maximum itself holds ~2% of a
// row (under 20% in every row). V's channel means (v_bias_std 4 against unit noise) hold ~94% of its
// energy: the output is mostly V's mean, which a loss of P's mass shrinks. test_synthetic_presets
// checks these.
SyntheticAttentionSpec flat_long() {
  SyntheticAttentionSpec s;
  s.heads = 2;
  s.tokens = 16384;
  s.dim = 128;
  s.token_scale_sigma = 0;
  s.outlier_token_fraction = 0;
  s.outlier_channels = 0;
  s.q_bias_std = 0;
  s.q_segment_offset_std = 0;
  s.v_bias_std = 4;
  s.q_gain = 2;
  return s;
}

// The flat rows of `flat` (spread ~0.7 here) under one attention sink: key 0 scores ~8 nats above
// the others' mean and holds 5-40% of a row on average at 16K keys (from under 1% to 60% by query),
// and over 90% of the other keys' mass lies under 1/254 of the row's maximum: what INT8 P at 127
// drops, leaving the sink's V as the output. V's channel means (v_bias_std 1) hold about half its
// energy, so the sink's V and the bulk's mean V point apart. test_synthetic_presets checks these.
SyntheticAttentionSpec sink_long() {
  SyntheticAttentionSpec s = flat_long();
  s.q_bias_std = 1;
  s.q_gain = 0.5;
  s.v_bias_std = 1;
  s.sink_tokens = 1;
  s.sink_logit = 8;
  return s;
}

const SyntheticPreset kPresets[]{
    {"default", "the generator's default values", SyntheticAttentionSpec{}},
    {"smollm2", "matched to SmolLM2-135M's Q, K, V (results/data/smollm2-135m/stats.json)", smollm2_like()},
    {"flat", "long flat rows (logit spread ~2, no outliers) and V dominated by its channel means (~94% of its energy)",
     flat_long()},
    {"sink", "the flat rows of `flat` under one attention sink (key 0, 8 nats above the mean), V's means half its energy",
     sink_long()},
};

}  // namespace

std::span<const SyntheticPreset> synthetic_presets() { return kPresets; }

SyntheticAttentionSpec synthetic_preset(std::string_view name) {
  std::string names;
  for (const SyntheticPreset& p : kPresets) {
    if (p.name == name) {
      SyntheticAttentionSpec spec = p.spec;
      spec.preset = std::string(p.name);
      return spec;
    }
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  throw std::invalid_argument("unknown synthetic preset '" + std::string(name) + "' (known: " + names + ")");
}

namespace {

std::vector<MatrixF> heads_of(const std::string& path) {
  NpyArray a = read_npy(path);
  if (a.shape.size() != 2 && a.shape.size() != 3)
    throw std::runtime_error(path + ": shape has " + std::to_string(a.shape.size()) +
                             " dimensions; expected [tokens, d] or [heads, tokens, d]");
  const std::size_t heads = a.shape.size() == 3 ? a.shape[0] : 1;
  const std::size_t tokens = a.shape[a.shape.size() - 2], dim = a.shape.back();
  if (heads == 0 || tokens == 0 || dim == 0) throw std::runtime_error(path + ": empty array");
  std::vector<MatrixF> out;
  for (std::size_t h = 0; h < heads; ++h)
    out.push_back(MatrixView<float>(a.data.data() + h * tokens * dim, Eigen::Index(tokens), Eigen::Index(dim)));
  return out;
}

}  // namespace

AttentionData load_attention_npy(const std::string& q_path, const std::string& k_path, const std::string& v_path) {
  AttentionData d{heads_of(q_path), heads_of(k_path), heads_of(v_path)};
  if (d.q.size() != d.k.size() || d.q.size() != d.v.size())
    throw std::runtime_error("head counts differ: " + q_path + " has " + std::to_string(d.q.size()) + ", " + k_path +
                             " " + std::to_string(d.k.size()) + ", " + v_path + " " + std::to_string(d.v.size()));
  if (d.q[0].cols() != d.k[0].cols())
    throw std::runtime_error("channel counts differ: " + q_path + " has d=" + std::to_string(d.q[0].cols()) + ", " +
                             k_path + " d=" + std::to_string(d.k[0].cols()));
  if (d.k[0].rows() != d.v[0].rows())
    throw std::runtime_error("token counts differ: " + k_path + " has " + std::to_string(d.k[0].rows()) + ", " +
                             v_path + " " + std::to_string(d.v[0].rows()));
  return d;
}

}  // namespace lowbit
