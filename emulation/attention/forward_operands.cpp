// The operands of forward(): forward_operands.hpp's preparation of K, V and Q.
#include "emulation/attention/forward_operands.hpp"

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/convert.hpp"
#include "emulation/quant/rotation.hpp"
#include "emulation/quant/smoothing.hpp"

namespace lowbit::attention::detail {
namespace {

Operand make_operand(const quant::QuantizedTensor& t, const OperandStage& stage, bool integer, bool values) {
  Operand op;
  op.codes = t.codes;
  const Format& f = t.spec.element;
  if (integer) {
    op.ints.resize(std::size_t(t.codes.size()));
    for (Eigen::Index i = 0; i < t.codes.size(); ++i) op.ints[std::size_t(i)] = std::int16_t(decode(f, t.codes.data()[i]));
  }
  if (block_scaled(stage)) {
    const int block = t.spec.grouping.col_block;
    op.scale_codes.resize(t.padded_rows, t.padded_cols / block);
    for (int r = 0; r < t.padded_rows; ++r)
      for (int g = 0; g < t.padded_cols / block; ++g) op.scale_codes(r, g) = t.scale_codes[std::size_t(t.group_of(r, g * block))];
  }
  if (values) {
    // A block scale times an element is exact in float (e2m1 x ue4m3, FP8 x a power of two).
    op.floats.resize(std::size_t(t.codes.size()));
    const int cols = t.padded_cols, block = block_scaled(stage) ? t.spec.grouping.col_block : 0;
    for (Eigen::Index i = 0; i < t.codes.size(); ++i) {
      float x = float(decode(f, t.codes.data()[i]));
      if (block) x = steps::mul_rn(x, float(decode(t.spec.scale.format, op.scale_codes(i / cols, i % cols / block))));
      op.floats[std::size_t(i)] = x;
    }
  }
  return op;
}

// Rows past `rows` become zeros (the kernel's zero-filled tiles).
MatrixF padded(const MatrixF& x, int rows, int cols) {
  MatrixF out = MatrixF::Zero(rows, cols);
  out.topLeftCorner(x.rows(), x.cols()) = x;
  return out;
}

// K's mean and K' as SageAttention2's wrapper computes them from a half tensor: the mean rounded to
// mean_format as PyTorch's k.mean() (or the one given: torch's reduction order is not modelled), K' one
// fp32 subtraction rounded to residual_format (PyTorch's k - km; fp32 in the fused per-warp kernel).
void round_key_mean(quant::Smoothed<float>& k, const MatrixF& k_in, const SmoothingStage& s, const float* given) {
  const auto to = [](const Format& f, float x) { return float(round_to_format(f, double(x))); };
  for (Eigen::Index c = 0; c < k.means.cols(); ++c) k.means(0, c) = given ? given[c] : to(s.key_mean_format, k.means(0, c));
  for (Eigen::Index r = 0; r < k_in.rows(); ++r)
    for (Eigen::Index c = 0; c < k_in.cols(); ++c)
      k.residual(r, c) = to(s.key_residual_format, steps::sub_rn(k_in(r, c), k.means(0, c)));
}

}  // namespace

float row_scale(const quant::QuantizedTensor& t, const OperandStage& stage, int row) {
  return block_scaled(stage) ? t.outer_of(row) : t.scales[std::size_t(t.group_of(row, 0))];
}

// Q and K transformed together (SmoothAttn's factors read both; under GQA over all the group's Q heads).
void transform_qk(const Pipeline& pl, std::vector<MatrixF>& qs, MatrixF& k) {
  const SmoothingStage& s = pl.smoothing;
  if (s.transform == Transform::hadamard) {
    const quant::RandomHadamard h(int(k.cols()), s.hadamard_seed);
    for (MatrixF& q : qs) q = h.apply(q);
    k = h.apply(k);
  } else if (s.transform == Transform::smooth_attn) {
    MatrixF all_q(0, k.cols());
    for (const MatrixF& q : qs) {
      all_q.conservativeResize(all_q.rows() + q.rows(), Eigen::NoChange);
      all_q.bottomRows(q.rows()) = q;
    }
    const quant::MigratedQk m = quant::smooth_attn(all_q, k, s.smooth_attn_alpha);
    for (std::size_t i = 0, row = 0; i < qs.size(); row += std::size_t(qs[i].rows()), ++i)
      qs[i] = m.q.middleRows(Eigen::Index(row), qs[i].rows());
    k = m.k;
  }
}

PreparedKv prepare_kv(const Context& cx, const MatrixF& k_in, const MatrixF& v_in, const float* key_mean) {
  const Pipeline& pl = cx.pipeline;
  const Shape& sh = cx.shape;
  PreparedKv kv;
  // K: smoothed over the real keys, then zero keys up to whole blocks.
  quant::Smoothed<float> k = quant::smooth(k_in, 0, pl.smoothing.k, pl.smoothing.key_mean_chunk);
  if (pl.smoothing.k && (pl.smoothing.key_mean_format != formats::fp32 || pl.smoothing.key_residual_format != formats::fp32 || key_mean))
    round_key_mean(k, k_in, pl.smoothing, key_mean);
  if (pl.smoothing.k) kv.k.mean.assign(k.means.data(), k.means.data() + k.means.size());
  kv.k.tensor = quant::quantize(padded(k.residual, sh.keys_padded, sh.head_dim), pl.quant_spec(Role::k), "K");
  kv.k_operand = make_operand(kv.k.tensor, pl.k, cx.qk_integer, cx.qk_values);
  kv.k_codes_t = kv.k_operand.codes.transpose();
  kv.k_scales_t = kv.k_operand.scale_codes.transpose();
  kv.k_scale.resize(std::size_t(sh.keys_padded));
  for (int j = 0; j < sh.keys_padded; ++j) kv.k_scale[std::size_t(j)] = row_scale(kv.k.tensor, pl.k, j);
  if (pl.smoothing.q) kv.k_smoothed = std::move(k.residual);

  // V: smoothed over the real keys; quantized along the keys (V^T) when its scales are block scales.
  quant::Smoothed<float> v = quant::smooth(v_in, 0, pl.smoothing.v, pl.smoothing.key_mean_chunk);
  if (pl.smoothing.v) kv.v.mean.assign(v.means.data(), v.means.data() + v.means.size());
  const MatrixF v_rows = padded(v.residual, sh.keys_padded, sh.value_dim);
  const bool v_transposed = block_scaled(pl.v);
  kv.v.tensor = quant::quantize(v_transposed ? MatrixF(v_rows.transpose()) : v_rows, pl.quant_spec(Role::v), "V");
  Operand vt = make_operand(kv.v.tensor, pl.v, false, cx.pv_values);
  if (v_transposed) {
    kv.v_operand.codes = vt.codes.transpose();
    kv.v_scales = vt.scale_codes.transpose();
    if (cx.pv_values) {  // keys x value_dim, as the products read them
      kv.v_operand.floats.resize(vt.floats.size());
      for (int c = 0; c < sh.value_dim; ++c)
        for (int j = 0; j < sh.keys_padded; ++j)
          kv.v_operand.floats[std::size_t(j) * std::size_t(sh.value_dim) + std::size_t(c)] =
              vt.floats[std::size_t(c) * std::size_t(sh.keys_padded) + std::size_t(j)];
    }
    kv.v_scale.assign(std::size_t(sh.value_dim), 1.0f);
    for (int c = 0; c < sh.value_dim; ++c) kv.v_scale[std::size_t(c)] = kv.v.tensor.outer_of(c);
  } else {
    kv.v_operand = std::move(vt);
    kv.v_scale.resize(std::size_t(sh.value_dim));
    for (int c = 0; c < sh.value_dim; ++c)
      kv.v_scale[std::size_t(c)] = kv.v.tensor.scales[std::size_t(kv.v.tensor.group_of(0, c))];
  }
  return kv;
}

PreparedQ prepare_q(const Context& cx, const MatrixF& q_in, const std::vector<float>& k_mean) {
  const Pipeline& pl = cx.pipeline;
  const Shape& sh = cx.shape;
  PreparedQ out;
  // The LSE's row bias: what K smoothing took out of the row's scores (q as the scores see it).
  out.lse_bias.assign(std::size_t(sh.tokens), 0.0f);
  if (pl.smoothing.k)
    for (int i = 0; i < sh.tokens; ++i)
      out.lse_bias[std::size_t(i)] =
          steps::smoothing_bias([&](int c) { return q_in(i, c); }, k_mean.data(), sh.head_dim, cx.softmax_scale_log2);
  quant::Smoothed<float> q = quant::smooth(q_in, pl.tiling.block_q, pl.smoothing.q);
  if (pl.smoothing.q) {
    out.means = q.means;
    out.q.mean.assign(q.means.data(), q.means.data() + q.means.size());
  }
  out.q.tensor = quant::quantize(padded(q.residual, sh.tokens_padded, sh.head_dim), pl.quant_spec(Role::q), "Q");
  out.operand = make_operand(out.q.tensor, pl.q, cx.qk_integer, cx.qk_values);
  out.row_scale.resize(std::size_t(sh.tokens_padded));
  for (int i = 0; i < sh.tokens_padded; ++i)
    out.row_scale[std::size_t(i)] = steps::fold_softmax_scale(row_scale(out.q.tensor, pl.q, i), cx.softmax_scale_log2);
  return out;
}

}  // namespace lowbit::attention::detail
