#include "emulation/attention/qk_attention.hpp"

#include <cmath>
#include <span>
#include <stdexcept>
#include <tuple>

#include "emulation/quant/rotation.hpp"
#include "emulation/quant/smoothing.hpp"
#include "numerics/attention.hpp"

namespace lowbit::attention {

using namespace lowbit::quant;

namespace {

Smoothed<double> widen(const Smoothed<float>& s) {
  return {s.residual.cast<double>(), s.means.cast<double>(), s.block_rows, s.enabled};
}

double mean_row_scale(const QuantizedTensor& t) {
  double sum = 0;
  for (int r = 0; r < t.rows; ++r) sum += t.scales[std::size_t(t.group_of(r, 0))];
  return sum / t.rows;
}

NonFiniteReport scan(const MatrixF& x) { return scan_nonfinite(std::span<const float>(x.data(), std::size_t(x.size()))); }

}  // namespace

QkAttentionResult quantized_qk_attention(const MatrixF& q_in, const MatrixF& k_in, const MatrixF& v,
                                         const QkAttentionConfig& config, const QkTensorNames& names) {
  const bool propagate =
      config.q_spec.nonfinite == NonFinitePolicy::propagate && config.k_spec.nonfinite == NonFinitePolicy::propagate;
  QkAttentionResult result;
  for (auto [x, name, report] : {std::tuple{&q_in, &names.q, &result.q_nonfinite},
                                 std::tuple{&k_in, &names.k, &result.k_nonfinite}, std::tuple{&v, &names.v, &result.v_nonfinite}}) {
    *report = scan(*x);
    if (report->any() && !propagate)
      throw std::invalid_argument(report->describe(*name, std::size_t(x->cols())) +
                                  "; refusing to quantize (nonfinite=propagate in both the Q and the K spec passes them "
                                  "through)");
  }
  MatrixF q = q_in, k = k_in;
  if (config.baseline == QkBaseline::smooth_attn) {
    MigratedQk m = smooth_attn(q, k, config.smooth_attn_alpha);
    q = std::move(m.q);
    k = std::move(m.k);
  } else if (config.baseline == QkBaseline::hadamard) {
    const RandomHadamard h(int(q.cols()), config.hadamard_seed);
    q = h.apply(q);
    k = h.apply(k);
  }
  const Smoothed<float> sq = smooth(q, config.q_smooth_block, config.smooth_q);
  const Smoothed<float> sk = smooth(k, 0, config.smooth_k);
  const QuantizedTensor qq = quantize(sq.residual, config.q_spec, "Q");
  const QuantizedTensor kq = quantize(sk.residual, config.k_spec, "K");
  const MatrixD product = scaled_matmul(qq, kq).cast<double>();
  const MatrixD scores = correct_scores(product, widen(sq), widen(sk), ScoreCorrection::softmax) /
                         std::sqrt(double(q.cols()));
  result.output = attention_from_scores(scores, v.cast<double>());
  result.mean_q_scale = mean_row_scale(qq);
  result.mean_k_scale = mean_row_scale(kq);
  return result;
}

}  // namespace lowbit::attention
