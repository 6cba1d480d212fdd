// Deterministic synthetic attention inputs (Q, K, V per head) with the statistics that make the
// SageAttention comparisons meaningful, so experiments run without model weights.
//
// Per head, with a channel profile drawn once per head:
//   K[t, c] = k_bias[c] + r_k(t) * std[c] * z_k(t, c)
//   Q[t, c] = q_bias[c] + q_offset[segment(t), c] + r_q(t) * std[c] * z_q(t, c)      (times q_gain)
//   V[t, c] = v_bias[c] + r_v(t) * z_v(t, c)
// where
//   std[c]   = 1, or outlier_std on `outlier_channels` random channels (channel-wise outliers
//              that smoothing cannot remove);
//   k_bias   ~ N(0, k_bias_std^2), plus +-outlier_bias on the outlier channels: a large
//              channel bias shared by all tokens (what smoothing K removes);
//   q_bias   ~ N(0, q_bias_std^2), plus +-outlier_bias/2 on the outlier channels;
//   q_offset ~ N(0, q_segment_offset_std^2) per segment of q_segment_tokens tokens: channel
//              offsets that drift along the sequence (what per-block smoothing of Q removes);
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
//              Q group (rows i, i+8, i+16, i+24) have nearly equal amax.
// Random numbers: std::mt19937_64 (its output is fixed by the C++ standard) and Box-Muller, so
// the data is the same on every platform for a given seed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "numerics/matrix.hpp"

namespace lowbit {

struct AttentionData {
  std::vector<MatrixF> q, k, v;  // one [tokens x dim] matrix per head
  int heads() const { return int(q.size()); }
};

struct SyntheticAttentionSpec {
  int heads = 8;
  int tokens = 4096;
  int dim = 128;
  std::uint64_t seed = 1;
  double token_scale_sigma = 0.3;
  double token_scale_length = 512;
  double token_noise_length = 0;
  double outlier_token_fraction = 0.002;
  double outlier_token_scale = 8.0;
  int outlier_channels = 4;
  double outlier_std = 1.5;
  double outlier_bias = 8.0;
  double k_bias_std = 3.0;
  double q_bias_std = 1.0;
  int q_segment_tokens = 384;
  double q_segment_offset_std = 1.0;
  double v_bias_std = 2.0;
  double q_gain = 1.0;

  std::optional<std::string> validate() const;
  nlohmann::json to_json() const;
};

AttentionData make_synthetic_attention(const SyntheticAttentionSpec& spec);

// Q, K, V from .npy files, each [tokens, d] or [heads, tokens, d], float32 or float16. Throws
// std::runtime_error naming the file when a file is unreadable or the three do not fit
// together (head counts, token counts of K and V, channel counts of Q and K).
AttentionData load_attention_npy(const std::string& q_path, const std::string& k_path, const std::string& v_path);

}  // namespace lowbit
