#include "verification/sage2_emulated.hpp"

#include <stdexcept>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/pipeline.hpp"
#include "emulation/convert.hpp"
#include "kernels/sm90/fragment.hpp"
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

  // The quantized operands in the device buffers' layout (sage2_attention.hpp).
  const auto sizes = kernels::attention::QuantizedSizes::of(p);
  auto& out = e.quantized;
  const std::size_t d = std::size_t(p.head_dim), pq = std::size_t(p.padded_q()), pkv = std::size_t(p.padded_kv());
  const float softmax_scale = steps::softmax_scale_log2(p.head_dim);
  out.q_codes.resize(sizes.q_codes);
  out.q_scales.resize(sizes.q_scales);
  out.q_bias.resize(sizes.q_bias);
  out.k_codes.resize(sizes.k_codes);
  out.k_scales.resize(sizes.k_scales);
  out.k_mean.resize(sizes.k_mean);
  out.v_codes.resize(sizes.v_codes);
  out.v_scales.resize(sizes.v_scales);
  for (std::size_t head = 0; head < r.q.size(); ++head) {
    const quant::QuantizedTensor& t = r.q[head].tensor;
    if (std::size_t(t.padded_rows) != pq || std::size_t(t.codes.cols()) != d || t.scales.size() != sizes.q_scales / r.q.size())
      throw std::logic_error("emulate_sage2: the pipeline's Q is not laid out as the kernel's");
    for (std::size_t i = 0; i < pq; ++i)
      for (std::size_t c = 0; c < d; ++c) out.q_codes[(head * pq + i) * d + c] = std::int8_t(t.codes(Eigen::Index(i), Eigen::Index(c)));
    for (std::size_t g = 0; g < t.scales.size(); ++g)
      out.q_scales[head * t.scales.size() + g] = steps::fold_softmax_scale(t.scales[g], softmax_scale);
    // The LSE's row bias as forward() forms it (steps::smoothing_bias of the row and K's mean).
    const int b = int(head) / p.heads_q, h = int(head) % p.heads_q;
    const std::vector<float>& mean = r.k[std::size_t(b * p.heads_kv + h / (p.heads_q / p.heads_kv))].mean;
    for (std::size_t i = 0; i < pq; ++i)
      out.q_bias[head * pq + i] =
          i < std::size_t(p.tokens)
              ? steps::smoothing_bias([&](int c) { return tq.row(b, h, int(i))[c]; }, mean.data(), p.head_dim, softmax_scale)
              : steps::smoothing_bias([](int) { return 0.0f; }, mean.data(), p.head_dim, softmax_scale);
  }
  constexpr auto p_map = kernels::sm90::accumulator_to_a8(128);  // V^T's key order (block_kv = 128)
  static_assert(p_map.consistent);
  const int block_kv = p.recipe().block_kv;
  if (block_kv != 128) throw std::logic_error("emulate_sage2: V^T's key order is derived for block_kv = 128");
  for (std::size_t head = 0; head < r.k.size(); ++head) {
    const quant::QuantizedTensor& kt = r.k[head].tensor;
    for (std::size_t j = 0; j < pkv; ++j)
      for (std::size_t c = 0; c < d; ++c)
        out.k_codes[head * pkv * d + std::size_t(kernels::attention::k_code_offset(int(j), int(c), p.head_dim, block_kv))] =
            std::int8_t(kt.codes(Eigen::Index(j), Eigen::Index(c)));
    std::copy(kt.scales.begin(), kt.scales.end(), out.k_scales.begin() + std::ptrdiff_t(head * kt.scales.size()));
    std::copy(r.k[head].mean.begin(), r.k[head].mean.end(), out.k_mean.begin() + std::ptrdiff_t(head * d));
    const quant::QuantizedTensor& vt = r.v[head].tensor;  // keys x d, per-channel scales
    for (std::size_t c = 0; c < d; ++c) {
      out.v_scales[head * d + c] = vt.scales[std::size_t(vt.group_of(0, int(c)))];
      for (std::size_t position = 0; position < pkv; ++position) {
        const std::size_t key = position / 32 * 32 + std::size_t(p_map.key_of_column[position % 32]);
        out.v_codes[head * pkv * d + std::size_t(kernels::attention::v_code_offset(int(c), int(position), p.head_dim, block_kv))] =
            key < std::size_t(vt.codes.rows()) && key < std::size_t(p.tokens) ? std::uint8_t(vt.codes(Eigen::Index(key), Eigen::Index(c))) : 0;
      }
    }
  }
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
