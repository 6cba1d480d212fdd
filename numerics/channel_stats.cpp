#include "numerics/channel_stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace lowbit {
namespace {

constexpr double kBiasOutlierRatio = 4;   // |mu_c| > 4 s
constexpr double kScaleOutlierRatio = 2;  // sigma_c > 2 s
constexpr int kDriftBlock = 128;          // tokens per block of block_mean_drift

constexpr StatisticField<TensorStatistics> kTensorFields[]{
    {"channel_mean_max", "max_c |mean_c| / median_c std_c", &TensorStatistics::channel_mean_max},
    {"channel_mean_median", "median_c |mean_c| / std_c", &TensorStatistics::channel_mean_median},
    {"mean_energy_fraction", "sum mean_c^2 / sum (mean_c^2 + std_c^2)", &TensorStatistics::mean_energy_fraction},
    {"bias_outlier_channels", "channels with |mean_c| > 4 median_c std_c", &TensorStatistics::bias_outlier_channels},
    {"channel_std_max", "max_c std_c / median_c std_c", &TensorStatistics::channel_std_max},
    {"scale_outlier_channels", "channels with std_c > 2 median_c std_c", &TensorStatistics::scale_outlier_channels},
    {"channel_amax_ratio", "max_c amax_c / median_c amax_c", &TensorStatistics::channel_amax_ratio},
    {"token_amax_ratio", "max_t amax_t / median_t amax_t", &TensorStatistics::token_amax_ratio},
    {"token_rms_log_std", "std_t log rms_t(X - mean)", &TensorStatistics::token_rms_log_std},
    {"crest_factor", "mean_t amax_t / rms_t", &TensorStatistics::crest_factor},
    {"crest_factor_smoothed", "mean_t amax_t / rms_t of X - mean", &TensorStatistics::crest_factor_smoothed},
    {"lag1_autocorrelation", "correlation of X - mean between tokens t and t+1", &TensorStatistics::lag1_autocorrelation},
    {"block_mean_drift", "RMS of (128-token block mean - mean) / median_c std_c", &TensorStatistics::block_mean_drift},
};

constexpr StatisticField<PairStatistics> kPairFields[]{
    {"qk_mean_alignment", "cosine of the channel means of q and its key head", &PairStatistics::qk_mean_alignment},
    {"logit_std", "mean_q std_k (q . k / sqrt(d)) over all keys", &PairStatistics::logit_std},
};

double median(std::vector<double> v) {
  const std::size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(mid), v.end());
  const double upper = v[mid];
  if (n % 2) return upper;
  return (*std::max_element(v.begin(), v.begin() + std::ptrdiff_t(mid)) + upper) / 2;
}

}  // namespace

std::span<const StatisticField<TensorStatistics>> tensor_statistic_fields() { return kTensorFields; }
std::span<const StatisticField<PairStatistics>> pair_statistic_fields() { return kPairFields; }

TensorStatistics tensor_statistics(const MatrixF& xf) {
  if (xf.rows() < 2 || xf.cols() < 1)
    throw std::invalid_argument("channel statistics need at least 2 tokens and 1 channel, got " +
                                std::to_string(xf.rows()) + " x " + std::to_string(xf.cols()));
  if (!xf.allFinite()) throw std::invalid_argument("channel statistics: the tensor has NaN or Inf values");
  const MatrixD x = xf.cast<double>();
  const Eigen::Index tokens = x.rows(), dim = x.cols();
  const Eigen::RowVectorXd mu = x.colwise().mean();
  const MatrixD centred = x.rowwise() - mu;
  const Eigen::RowVectorXd sigma = (centred.array().square().colwise().sum() / double(tokens)).sqrt();
  const std::vector<double> sigma_v(sigma.data(), sigma.data() + dim);
  const double s = median(sigma_v);

  TensorStatistics r;
  const auto channels = std::size_t(dim);
  std::vector<double> mean_over_std(channels, 0.0), channel_amax(channels);
  for (Eigen::Index c = 0; c < dim; ++c) {
    const double m = std::abs(mu[c]);
    r.channel_mean_max = std::max(r.channel_mean_max, m / s);
    mean_over_std[std::size_t(c)] = sigma[c] > 0 ? m / sigma[c] : 0;
    r.bias_outlier_channels += m > kBiasOutlierRatio * s;
    r.channel_std_max = std::max(r.channel_std_max, sigma[c] / s);
    r.scale_outlier_channels += sigma[c] > kScaleOutlierRatio * s;
    channel_amax[std::size_t(c)] = x.col(c).cwiseAbs().maxCoeff();
  }
  r.channel_mean_median = median(mean_over_std);
  Eigen::Index top_channel = 0;
  mu.cwiseAbs().maxCoeff(&top_channel);
  r.channel_mean_argmax = int(top_channel);
  for (Eigen::Index c = 0; c < dim; ++c) {
    r.channel_mean_profile.push_back(std::abs(mu[c]) / s);
    r.channel_std_profile.push_back(sigma[c] / s);
  }
  std::sort(r.channel_mean_profile.rbegin(), r.channel_mean_profile.rend());
  std::sort(r.channel_std_profile.rbegin(), r.channel_std_profile.rend());
  const double mean_energy = mu.squaredNorm(), spread_energy = sigma.squaredNorm();
  r.mean_energy_fraction = mean_energy / (mean_energy + spread_energy);
  r.channel_amax_ratio = *std::max_element(channel_amax.begin(), channel_amax.end()) / median(channel_amax);

  const auto token_count = std::size_t(tokens);
  std::vector<double> token_amax(token_count), log_rms(token_count);
  double crest = 0, crest_smoothed = 0;
  for (Eigen::Index t = 0; t < tokens; ++t) {
    const double amax = x.row(t).cwiseAbs().maxCoeff(), rms = x.row(t).norm() / std::sqrt(double(dim));
    const double amax_c = centred.row(t).cwiseAbs().maxCoeff(), rms_c = centred.row(t).norm() / std::sqrt(double(dim));
    token_amax[std::size_t(t)] = amax;
    log_rms[std::size_t(t)] = std::log(rms_c);
    crest += rms > 0 ? amax / rms : 0;
    crest_smoothed += rms_c > 0 ? amax_c / rms_c : 0;
  }
  const auto argmax = std::max_element(token_amax.begin(), token_amax.end());
  r.token_amax_argmax = int(argmax - token_amax.begin());
  r.token_amax_ratio = *argmax / median(token_amax);
  double log_mean = 0, log_var = 0;
  for (double v : log_rms) log_mean += v / double(tokens);
  for (double v : log_rms) log_var += (v - log_mean) * (v - log_mean) / double(tokens);
  r.token_rms_log_std = std::sqrt(log_var);
  r.crest_factor = crest / double(tokens);
  r.crest_factor_smoothed = crest_smoothed / double(tokens);

  const auto before = centred.topRows(tokens - 1), after = centred.bottomRows(tokens - 1);
  const double spread = std::sqrt(before.squaredNorm() * after.squaredNorm());
  r.lag1_autocorrelation = spread > 0 ? (before.array() * after.array()).sum() / spread : 0;

  double drift = 0;
  int blocks = 0;
  for (Eigen::Index start = 0; start + kDriftBlock <= tokens; start += kDriftBlock, ++blocks)
    drift += (centred.middleRows(start, kDriftBlock).colwise().mean() / s).squaredNorm() / double(dim);
  r.block_mean_drift = blocks ? std::sqrt(drift / blocks) : 0;
  return r;
}

PairStatistics pair_statistics(const MatrixF& qf, const MatrixF& kf) {
  if (qf.cols() != kf.cols())
    throw std::invalid_argument("q has d=" + std::to_string(qf.cols()) + ", k has d=" + std::to_string(kf.cols()));
  const MatrixD q = qf.cast<double>(), k = kf.cast<double>();
  PairStatistics r;
  const Eigen::RowVectorXd mu_q = q.colwise().mean(), mu_k = k.colwise().mean();
  const double norms = mu_q.norm() * mu_k.norm();
  r.qk_mean_alignment = norms > 0 ? mu_q.dot(mu_k) / norms : 0;
  const MatrixD logits = q * k.transpose() / std::sqrt(double(q.cols()));
  const Eigen::VectorXd mean = logits.rowwise().mean();
  const Eigen::VectorXd var = (logits.colwise() - mean).array().square().rowwise().mean();
  r.logit_std = var.array().sqrt().mean();
  return r;
}

}  // namespace lowbit
