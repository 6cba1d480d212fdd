#include "verification/sage2_emulated.hpp"

#include <stdexcept>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/pipeline.hpp"
#include "emulation/convert.hpp"
#include "kernels/attention/sage2_operands.hpp"
#include "numerics/tensor.hpp"

namespace lowbit::verification {
namespace {

namespace steps = lowbit::attention::steps;
using kernels::attention::DType;
using kernels::attention::Sage2Problem;

const Format& element_format(DType t) { return t == DType::fp16 ? formats::fp16 : formats::bf16; }

// fp16/bf16 codes in the problem's layout -> [batch, heads, tokens, dim] floats.
Tensor4 to_tensor(const Sage2Problem& p, std::span<const std::uint16_t> x, int heads) {
  const Format& f = element_format(p.dtype);
  Tensor4 t(p.batch, heads, p.tokens, p.head_dim);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < p.tokens; ++i)
        for (int c = 0; c < p.head_dim; ++c)
          t.row(b, h, i)[c] = float(decode(f, x[p.element_offset(b, h, i, heads) + std::size_t(c)]));
  return t;
}

attention::Pipeline sage2_8b(const Sage2Problem& p) {
  attention::Pipeline pl = attention::preset(attention::sage2_8b_preset(p.exp2), p.head_dim);
  pl.output = element_format(p.dtype);
  if (p.in_place) pl.accumulation = {attention::Accumulation::in_place, 0};
  pl.smoothing.v = p.smooth_v;
  pl.row_sum = p.row_sum;
  return pl;
}

}  // namespace

Sage2Emulated emulate_sage2(const Sage2Problem& p, std::span<const std::uint16_t> q, std::span<const std::uint16_t> k,
                            std::span<const std::uint16_t> v) {
  if (auto why = p.validate()) throw std::invalid_argument("emulate_sage2: " + *why);
  const Tensor4 tq = to_tensor(p, q, p.heads_q), tk = to_tensor(p, k, p.heads_kv), tv = to_tensor(p, v, p.heads_kv);
  attention::ForwardOptions options;
  options.causal = p.causal;
  const attention::ForwardResult r = attention::forward(sage2_8b(p), tq, tk, tv, options);

  Sage2Emulated e;
  e.out.resize(p.elements(p.heads_q));
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.tokens; ++i)
        for (int c = 0; c < p.head_dim; ++c)
          e.out[p.element_offset(b, h, i, p.heads_q) + std::size_t(c)] =
              std::uint16_t(r.output_codes[tq.offset(b, h, i) + std::size_t(c)]);
  e.lse = r.lse;

  // The quantized operands in the device buffers' layout (sage2_operands.hpp), with the LSE's row
  // bias of the real rows as forward() forms it (steps::smoothing_bias of the row and K's mean).
  const float softmax_scale = steps::softmax_scale_log2(p.head_dim);
  std::vector<std::vector<float>> q_bias(r.q.size());
  kernels::attention::Sage2EmulatedOperands operands;
  for (std::size_t head = 0; head < r.q.size(); ++head) {
    const int b = int(head) / p.heads_q, h = int(head) % p.heads_q;
    const std::vector<float>& mean = r.k[std::size_t(b * p.heads_kv + h / (p.heads_q / p.heads_kv))].mean;
    for (int i = 0; i < p.tokens; ++i)
      q_bias[head].push_back(
          steps::smoothing_bias([&](int c) { return tq.row(b, h, i)[c]; }, mean.data(), p.head_dim, softmax_scale));
    operands.q.push_back(&r.q[head]);
    operands.q_bias.emplace_back(q_bias[head]);
  }
  for (std::size_t head = 0; head < r.k.size(); ++head) {
    operands.k.push_back(&r.k[head]);
    operands.v.push_back(&r.v[head]);
  }
  e.quantized = kernels::attention::lay_out_operands(p, operands);
  return e;
}

Sage2EmulatedRows emulate_sage2_rows(const Sage2Problem& p, std::span<const std::uint16_t> q,
                                     std::span<const std::uint16_t> k, std::span<const std::uint16_t> v,
                                     std::span<const int> rows) {
  if (p.batch != 1 || p.heads_q != 1 || p.heads_kv != 1 || p.layout != kernels::attention::Layout::bhnd)
    throw std::invalid_argument("emulate_sage2_rows: one head, [batch, heads, tokens, dim]");
  const int bq = p.recipe().block_q;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i] < 0 || rows[i] >= p.tokens || (i % std::size_t(bq) == 0 && rows[i] % bq != 0) ||
        (i % std::size_t(bq) != 0 && rows[i] != rows[i - 1] + 1) || (p.causal && rows[i] != int(i)))
      throw std::invalid_argument("emulate_sage2_rows: rows must be whole Q blocks (a prefix when causal)");
  const Format& f = element_format(p.dtype);
  const int n_rows = int(rows.size());
  Tensor4 tq(1, 1, n_rows, p.head_dim);
  for (int i = 0; i < n_rows; ++i)
    for (int c = 0; c < p.head_dim; ++c)
      tq.row(0, 0, i)[c] = float(decode(f, q[std::size_t(rows[std::size_t(i)]) * std::size_t(p.head_dim) + std::size_t(c)]));
  const Tensor4 tk = to_tensor(p, k, 1), tv = to_tensor(p, v, 1);
  attention::ForwardOptions options;
  options.causal = p.causal;
  options.keep_operands = false;
  const attention::ForwardResult r = attention::forward(sage2_8b(p), tq, tk, tv, options);
  Sage2EmulatedRows e;
  e.out.assign(r.output_codes.begin(), r.output_codes.end());
  e.lse = r.lse;
  return e;
}

}  // namespace lowbit::verification
