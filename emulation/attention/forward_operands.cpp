// The operands of forward(): forward_operands.hpp's preparation of K, V and Q.
#include "emulation/attention/forward_operands.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "emulation/attention/flash2_steps.hpp"
#include "emulation/attention/kernel_steps.hpp"
#include "emulation/convert.hpp"
#include "emulation/quant/rotation.hpp"
#include "emulation/quant/smoothing.hpp"
#include "numerics/nonfinite.hpp"
#include "numerics/parallel.hpp"

namespace lowbit::attention::detail {
namespace {

int round_up(int v, int m) { return (v + m - 1) / m * m; }

// NaN/Inf: how many, and where the first is, as [batch, head, token, channel].
void check_finite(const Tensor4& t, const std::string& name) {
  const auto r = scan_nonfinite(std::span<const float>(t.values));
  if (!r.any()) return;
  const std::size_t i = r.first_index, d = std::size_t(t.dim), tokens = std::size_t(t.tokens), heads = std::size_t(t.heads);
  throw std::invalid_argument(fmt::format(
      "{}: {} non-finite value{} ({} NaN, {} Inf), the first at [{}, {}, {}, {}] ({}); attention inputs must be finite",
      name, r.count(), r.count() == 1 ? "" : "s", r.nan_count, r.inf_count, i / d / tokens / heads, i / d / tokens % heads,
      i / d % tokens, i % d, r.first_is_nan ? "NaN" : "Inf"));
}

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

void check_arguments(const Pipeline& pl, const Tensor4& q, const Tensor4& k, const Tensor4& v, const ForwardOptions& options) {
  const auto fail = [](const std::string& why) { throw std::invalid_argument(why); };
  const auto shape_of = [](const std::string& name, const Tensor4& t) { return name + " " + t.shape_text(); };
  for (const auto& [t, name] : {std::pair{&q, &options.q_name}, std::pair{&k, &options.k_name}, std::pair{&v, &options.v_name}})
    if (t->size() == 0 || t->size() != Tensor4::count(t->batch, t->heads, t->tokens, t->dim))
      fail(*name + ": empty, or holds " + std::to_string(t->size()) + " values for its shape " + t->shape_text());
  if (k.batch != q.batch || v.batch != q.batch)
    fail("batch sizes differ: " + shape_of(options.q_name, q) + ", " + shape_of(options.k_name, k) + ", " +
         shape_of(options.v_name, v));
  if (k.heads != v.heads)
    fail("head counts differ: " + shape_of(options.k_name, k) + ", " + shape_of(options.v_name, v));
  if (q.heads % k.heads != 0)
    fail(fmt::format("{} has {} heads, which {} heads of K and V do not divide (GQA: {}, {})", options.q_name, q.heads,
                     k.heads, shape_of(options.k_name, k), shape_of(options.v_name, v)));
  if (k.tokens != v.tokens)
    fail("token counts differ: " + shape_of(options.k_name, k) + ", " + shape_of(options.v_name, v));
  if (q.dim != k.dim)
    fail("head dimensions differ: " + shape_of(options.q_name, q) + ", " + shape_of(options.k_name, k));
  if (auto why = pl.validate(q.dim, v.dim)) fail("pipeline " + pl.name + ": " + *why);
  if (!options.descales.empty()) {
    const auto n = std::size_t(3) * std::size_t(q.batch) * std::size_t(k.heads);
    const std::string& name = options.descales_name;
    if (pl.softmax != Softmax::flash3) fail(name + ": descales are FlashAttention-3's (softmax=flash3)");
    if (pl.descale.q != 1.0f || pl.descale.k != 1.0f || pl.descale.v != 1.0f)
      fail(name + ": descales given twice, per (batch, KV head) and as the descale stage");
    if (options.descales.size() != n)
      fail(fmt::format("{}: {} values; FlashAttention-3 takes [3, batch, kv_heads] = [3, {}, {}] ({})", name,
                       options.descales.size(), q.batch, k.heads, n));
    for (const auto* op : {&pl.q, &pl.k, &pl.v})
      if (op->granularity != Granularity::none)
        fail(name + ": descales scale E4M3 values as they are: set Q, K and V to granularity none (q=e4m3:none, "
             "k=e4m3:none, v=e4m3:none)");
    for (std::size_t i = 0; i < n; ++i)
      if (!(options.descales[i] > 0.0f) || !std::isfinite(options.descales[i]))
        fail(fmt::format("{}: value {} at [{}, {}, {}] is not a finite positive number", name, options.descales[i],
                         i / (n / 3), i % (n / 3) / std::size_t(k.heads), i % std::size_t(k.heads)));
  }
  if (!options.key_means.empty()) {
    const std::string& name = options.key_means_name;
    const auto n = std::size_t(q.batch) * std::size_t(k.heads) * std::size_t(k.dim);
    if (!pl.smoothing.k) fail(name + ": a K mean replaces the one K smoothing takes; the pipeline has smooth-k=off");
    if (options.key_means.size() != n)
      fail(fmt::format("{}: {} values; K's mean is [batch, kv_heads, head_dim] = [{}, {}, {}] ({})", name,
                       options.key_means.size(), q.batch, k.heads, k.dim, n));
    for (std::size_t i = 0; i < n; ++i)
      if (!std::isfinite(options.key_means[i]))
        fail(fmt::format("{}: value {} at [{}, {}, {}] is not finite", name, options.key_means[i],
                         i / (n / std::size_t(q.batch)), i / std::size_t(k.dim) % std::size_t(k.heads), i % std::size_t(k.dim)));
  }
  check_finite(q, options.q_name);
  check_finite(k, options.k_name);
  check_finite(v, options.v_name);
}

Pipeline tiled_pipeline(const Pipeline& pl, bool causal) {
  Pipeline tiled = pl;
  tiled.tiling.block_kv = pl.tiling.kv_block(causal);
  tiled.tiling.block_kv_causal = 0;
  return tiled;
}

Context make_context(const Pipeline& pl, const Tensor4& q, const Tensor4& k, const Tensor4& v, const ForwardOptions& options) {
  const bool flash2 = pl.softmax == Softmax::flash2;
  Context cx{pl, {}, options.causal, pl.causal_align == CausalAlign::bottom_right ? k.tokens - q.tokens : 0,
             flash2 ? flash2::softmax_scale_log2(q.dim) : steps::softmax_scale_log2(q.dim), flash2::softmax_scale(q.dim),
             options.kv_block_begin, options.kv_block_end,
             pl.qk.on_values(), false, pl.pv.on_values(),
             std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  if (pl.qk.has_instruction()) cx.qk = pl.qk_instruction();
  if (pl.pv.has_instruction()) cx.pv = pl.pv_instruction(v.dim);
  if (pl.qk.wide()) cx.qk_wide.emplace(*cx.qk);
  if (pl.pv.wide()) cx.pv_wide.emplace(*cx.pv);
  cx.qk_integer = !cx.qk_values && cx.qk->atom.d == formats::s32;
  cx.shape = {q.tokens, k.tokens, q.dim, v.dim, round_up(q.tokens, pl.tiling.block_q),
              round_up(k.tokens, pl.tiling.block_kv), pl.qk_depth(q.dim)};
  return cx;
}

PreparedGroup prepare_group(const Context& cx, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                            const ForwardOptions& options, int b, int g) {
  const Pipeline& pl = cx.pipeline;
  const int group = q.heads / k.heads;
  std::vector<MatrixF> qs;
  for (int h = g * group; h < (g + 1) * group; ++h) qs.push_back(q.head(b, h));
  MatrixF kh = k.head(b, g);
  transform_qk(pl, qs, kh);
  const float* key_mean = options.key_means.empty() ? nullptr
                          : options.key_means.data() + (std::size_t(b) * std::size_t(k.heads) + std::size_t(g)) * std::size_t(k.dim);
  PreparedKv kv = prepare_kv(cx, kh, v.head(b, g), key_mean);
  kv.descale = pl.descale;
  if (!options.descales.empty()) {
    const std::size_t at = std::size_t(b) * std::size_t(k.heads) + std::size_t(g), n = options.descales.size() / 3;
    kv.descale = {options.descales[at], options.descales[n + at], options.descales[2 * n + at]};
  }
  std::vector<PreparedQ> pqs(static_cast<std::size_t>(group));
  parallel_for(std::size_t(group), options.threads, [&](std::size_t i, unsigned) { pqs[i] = prepare_q(cx, qs[i], kv.k.mean); });
  return {std::move(kv), std::move(pqs)};
}

void round_output(ForwardResult& result) {
  result.output_codes.resize(result.output.size());
  encode(result.output_format, std::span<const float>(result.output), std::span<Code>(result.output_codes),
         {Rounding::nearest_even, Overflow::inf});
}

}  // namespace lowbit::attention::detail

namespace lowbit::attention {

PreparedOperands prepare_operands(const Pipeline& pipeline, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                  const ForwardOptions& options) {
  detail::check_arguments(pipeline, q, k, v, options);
  if (options.split_pass())
    throw std::invalid_argument("prepare_operands: the operands are a whole pass's (kv_block_begin 0, kv_block_end -1)");
  auto run = std::make_unique<const Pipeline>(
      pipeline.tiling.kv_block(options.causal) != pipeline.tiling.block_kv ? detail::tiled_pipeline(pipeline, options.causal)
                                                                           : pipeline);
  if (run->tiling.block_kv != pipeline.tiling.block_kv) detail::check_arguments(*run, q, k, v, options);
  detail::Context cx = detail::make_context(*run, q, k, v, options);
  PreparedOperands out{std::move(run), cx, {}};
  // Groups are independent: one per worker (each then prepares its Q heads alone), or, with one
  // group, its Q heads in parallel.
  const std::size_t groups = std::size_t(q.batch) * std::size_t(k.heads);
  ForwardOptions per_group = options;
  if (groups > 1) per_group.threads = 1;
  out.groups.resize(groups);
  parallel_for(groups, options.threads, [&](std::size_t i, unsigned) {
    out.groups[i] = detail::prepare_group(out.context, q, k, v, per_group, int(i) / k.heads, int(i) % k.heads);
  });
  return out;
}

}  // namespace lowbit::attention
