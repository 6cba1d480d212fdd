// Channel and token statistics of attention tensors: the properties that decide how Q, K and V
// quantize (SageAttention's channel-mean outliers of K, token magnitudes, attention sharpness).
//
// For one head's tensor X [tokens x d] (computed in double), with per-channel mean mu_c, standard
// deviation sigma_c and max |X| amax_c over the tokens, per-token max |X| amax_t and RMS rms_t
// over the channels, and s = median_c sigma_c (the typical channel spread, the unit of the
// ratios below):
//   channel_mean_max         max_c |mu_c| / s           the largest channel-mean offset
//   channel_mean_median      median_c |mu_c| / sigma_c  the bulk of the channel means
//   mean_energy_fraction     sum mu^2 / sum (mu^2 + sigma^2): the share of the tensor's energy in
//                            its channel means (what subtracting the mean, smoothing, removes)
//   bias_outlier_channels    #{c : |mu_c| > 4 s}
//   channel_std_max          max_c sigma_c / s          per-channel scale outliers
//   scale_outlier_channels   #{c : sigma_c > 2 s}
//   channel_amax_ratio       max_c amax_c / median_c amax_c
//   token_amax_ratio         max_t amax_t / median_t amax_t   (massive tokens, attention sinks)
//   token_rms_log_std        std_t log rms_t(X - mu): the spread of token magnitudes
//   crest_factor             mean_t amax_t / rms_t: a per-token INT4 step is amax_t / 7, so the
//                            quantization error relative to the token grows with it
//   crest_factor_smoothed    the same after subtracting mu
//   lag1_autocorrelation     correlation of X - mu between neighbouring tokens, pooled over channels
//   block_mean_drift         RMS over blocks of 128 tokens and channels of (block mean - mu) / s:
//                            channel means that drift along the sequence (per-block smoothing)
// and for a query head with its key head (GQA: the key head its queries attend with):
//   qk_mean_alignment        mu_q . mu_k / (|mu_q| |mu_k|)
//   logit_std                mean over queries of the standard deviation over all keys of
//                            q . k / sqrt(d): how sharp the attention is
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "numerics/matrix.hpp"

namespace lowbit {

struct TensorStatistics {
  double channel_mean_max = 0, channel_mean_median = 0, mean_energy_fraction = 0, bias_outlier_channels = 0;
  double channel_std_max = 0, scale_outlier_channels = 0, channel_amax_ratio = 0, token_amax_ratio = 0;
  double token_rms_log_std = 0, crest_factor = 0, crest_factor_smoothed = 0, lag1_autocorrelation = 0;
  double block_mean_drift = 0;
  int token_amax_argmax = 0;    // the token with the largest amax
  int channel_mean_argmax = 0;  // the channel with the largest |mu_c|
  // |mu_c| / s and sigma_c / s, each sorted from the largest: the channel profile.
  std::vector<double> channel_mean_profile, channel_std_profile;
};

struct PairStatistics {
  double qk_mean_alignment = 0, logit_std = 0;
};

// One statistic: its key (as in stats.json), what it measures, and where it lives.
template <class Record>
struct StatisticField {
  std::string_view key, description;
  double Record::*member;
};

std::span<const StatisticField<TensorStatistics>> tensor_statistic_fields();
std::span<const StatisticField<PairStatistics>> pair_statistic_fields();

// Throws std::invalid_argument when x has fewer than 2 tokens or no channel, or a non-finite value.
TensorStatistics tensor_statistics(const MatrixF& x);
// q [tokens_q x d], k [tokens_k x d]; throws std::invalid_argument when the channel counts differ.
PairStatistics pair_statistics(const MatrixF& q, const MatrixF& k);

}  // namespace lowbit
