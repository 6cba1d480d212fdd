// Deterministic synthetic attention inputs (Q, K, V per head) with the statistics that make the
// SageAttention comparisons meaningful, so experiments run without model weights.
//
// Per head, with a channel profile drawn once per head:
//   K[t, c] = k_bias[c] + k_offset[segment(t), c] + r_k(t) * std[c] * z_k(t, c)
//   Q[t, c] = q_bias[c] + q_offset[segment(t), c] + r_q(t) * std[c] * z_q(t, c)      (times q_gain)
//   V[t, c] = v_bias[c] + r_v(t) * v_std[c] * z_v(t, c)
// where
//   std[c]   = exp(channel_std_log_sigma * n_c), n_c ~ N(0, 1): a continuous spread of channel
//              scales, times outlier_std on `outlier_channels` random channels (channel-wise
//              outliers that smoothing cannot remove); v_std[c] likewise with
//              v_channel_std_log_sigma, no outliers;
//   k_bias   ~ N(0, k_bias_std^2), plus +-outlier_bias / (i + 1)^outlier_bias_decay on the i-th
//              outlier channel (i = 0, 1, ...; decay 0: all equal): a large channel bias shared by
//              all tokens (what smoothing K removes);
//   q_bias   ~ N(0, q_bias_std^2), plus q_outlier_bias_scale times K's outlier bias, with K's sign,
//              on the same channel (Q's and K's channel means point the same way) or, with
//              q_outlier_rope_partner, on its rotary partner channel (c + dim/2) mod dim (the
//              pairing of Hugging Face's rotate_half, as a rotary embedding leaves a bias: Q's and
//              K's means then orthogonal);
//   q_offset ~ N(0, q_segment_offset_std^2) per segment of q_segment_tokens tokens: channel
//              offsets that drift along the sequence (what per-block smoothing of Q removes);
//              k_offset likewise with k_segment_offset_std;
//   r_x(t)   = exp(token_scale_sigma * a(t)) * (outlier_token_scale on a random fraction
//              outlier_token_fraction of the tokens, else 1), a a unit-variance Gaussian
//              process along the tokens with a Gaussian correlation of length
//              token_scale_length: token magnitudes vary smoothly, as neighbouring tokens of
//              images and video do, and a few tokens are much larger (massive activations,
//              attention sinks). Both are what finer quantization granularity resolves.
//   z(t, c)  ~ N(0, 1), for each channel an AR(1) (Ornstein-Uhlenbeck) process along the tokens
//              with correlation exp(-|t - t'| / token_noise_length):
//              z(t) = rho z(t-1) + sqrt(1 - rho^2) e(t), rho = exp(-1 / token_noise_length).
//              Neighbouring tokens of images, video and text have similar Q, K, V vectors, so
//              they share their largest channels and their amax; 0 (the default) makes every
//              element independent. This is what decides whether the 4 tokens of a per-thread
//              Q group (rows i, i+8, i+16, i+24) have nearly equal amax. V can have its own
//              v_token_noise_length and v_token_scale_sigma (unset: the shared values).
// Attention sinks: the first sink_tokens keys get K += u * sink_logit * sqrt(dim) / |q_mean|, u the
// unit vector along Q's mean over all tokens, so a query near Q's mean scores them sink_logit (nats)
// above the keys' mean logit: every query attends to them, as to a model's first token (needs Q to
// have a mean: q_bias_std > 0).
// Presets name whole specs: "default" (the values below) and settings matched to the measured
// statistics of a real model's activations (synthetic_presets() lists them with their source).
// Random numbers: std::mt19937_64 (its output is fixed by the C++ standard) and Box-Muller, so
// the data is the same on every platform for a given seed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "numerics/matrix.hpp"

namespace lowbit {

struct AttentionData {
  std::vector<MatrixF> q, k, v;  // one [tokens x dim] matrix per head
  int heads() const { return int(q.size()); }
};

struct SyntheticAttentionSpec {
  std::string preset = "default";  // the preset these values started from (recorded, not used)
  int heads = 8;
  int tokens = 4096;
  int dim = 128;
  std::uint64_t seed = 1;
  double token_scale_sigma = 0.3;
  double token_scale_length = 512;
  double token_noise_length = 0;
  std::optional<double> v_token_scale_sigma;   // V's own token_scale_sigma (unset: the shared one)
  std::optional<double> v_token_noise_length;  // V's own token_noise_length (unset: the shared one)
  double outlier_token_fraction = 0.002;
  double outlier_token_scale = 8.0;
  int outlier_channels = 4;
  double outlier_std = 1.5;
  double outlier_bias = 8.0;
  double outlier_bias_decay = 0;
  double channel_std_log_sigma = 0;
  double v_channel_std_log_sigma = 0;
  double k_bias_std = 3.0;
  double q_bias_std = 1.0;
  double q_outlier_bias_scale = 0.5;
  bool q_outlier_rope_partner = false;
  int q_segment_tokens = 384;
  double q_segment_offset_std = 1.0;
  double k_segment_offset_std = 0;
  double v_bias_std = 2.0;
  double q_gain = 1.0;
  int sink_tokens = 0;
  double sink_logit = 0;

  std::optional<std::string> validate() const;
  nlohmann::json to_json() const;
};

AttentionData make_synthetic_attention(const SyntheticAttentionSpec& spec);

struct SyntheticPreset {
  std::string_view name, description;
  SyntheticAttentionSpec spec;
};
std::span<const SyntheticPreset> synthetic_presets();
// The named preset's spec; throws std::invalid_argument listing the names when there is none.
SyntheticAttentionSpec synthetic_preset(std::string_view name);

// Q, K, V from .npy files, each [tokens, d] or [heads, tokens, d], float32 or float16. Throws
// std::runtime_error naming the file when a file is unreadable or the three do not fit
// together (head counts, token counts of K and V, channel counts of Q and K).
AttentionData load_attention_npy(const std::string& q_path, const std::string& k_path, const std::string& v_path);

}  // namespace lowbit
