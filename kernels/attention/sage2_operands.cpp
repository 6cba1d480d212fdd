#include "kernels/attention/sage2_operands.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "emulation/attention/kernel_steps.hpp"
#include "kernels/sm90/fragment.hpp"

namespace lowbit::kernels::attention {

namespace steps = lowbit::attention::steps;

Sage2HostQuantized lay_out_operands(const Sage2Problem& p, const Sage2EmulatedOperands& operands) {
  const auto fail = [](const std::string& why) { throw std::logic_error("lay_out_operands: " + why); };
  const std::size_t q_heads = std::size_t(p.batch) * std::size_t(p.heads_q), kv_heads = std::size_t(p.batch) * std::size_t(p.heads_kv);
  if (operands.q.size() != q_heads || operands.q_bias.size() != q_heads || operands.k.size() != kv_heads ||
      operands.v.size() != kv_heads)
    fail("the operands' head counts are not the problem's");
  const QuantizedSizes sizes = QuantizedSizes::of(p);
  const std::size_t d = std::size_t(p.head_dim), pq = std::size_t(p.padded_q()), pkv = std::size_t(p.padded_kv());
  const std::size_t tokens = std::size_t(p.tokens);
  const int block_kv = p.recipe().block_kv;
  constexpr auto p_map = sm90::accumulator_to_a8(128);  // V^T's key order (block_kv = 128)
  static_assert(p_map.consistent);
  if (block_kv != 128) fail("V^T's key order is derived for block_kv = 128");
  const float softmax_scale = steps::softmax_scale_log2(p.head_dim);

  Sage2HostQuantized out;
  for_each_quantized_buffer([&](const char*, auto, auto host, auto count) { (out.*host).resize(sizes.*count); });
  for (std::size_t head = 0; head < q_heads; ++head) {
    const quant::QuantizedTensor& t = operands.q[head]->tensor;
    const std::span<const float> bias = operands.q_bias[head];
    if (std::size_t(t.padded_rows) != pq || std::size_t(t.codes.cols()) != d || t.scales.size() != sizes.q_scales / q_heads ||
        bias.size() != tokens)
      fail("Q head " + std::to_string(head) + " is not laid out as the kernel's");
    for (std::size_t i = 0; i < pq; ++i)
      for (std::size_t c = 0; c < d; ++c) out.q_codes[(head * pq + i) * d + c] = std::int8_t(t.codes(Eigen::Index(i), Eigen::Index(c)));
    for (std::size_t g = 0; g < t.scales.size(); ++g)
      out.q_scales[head * t.scales.size() + g] = steps::fold_softmax_scale(t.scales[g], softmax_scale);
    const int b = int(head) / p.heads_q, h = int(head) % p.heads_q;
    const std::vector<float>& k_mean = operands.k[std::size_t(b * p.heads_kv + h / (p.heads_q / p.heads_kv))]->mean;
    if (k_mean.size() != d) fail("K's mean has " + std::to_string(k_mean.size()) + " channels");
    std::copy(bias.begin(), bias.end(), out.q_bias.begin() + std::ptrdiff_t(head * pq));
    const float padding_bias = steps::smoothing_bias([](int) { return 0.0f; }, k_mean.data(), p.head_dim, softmax_scale);
    std::fill(out.q_bias.begin() + std::ptrdiff_t(head * pq + tokens), out.q_bias.begin() + std::ptrdiff_t((head + 1) * pq),
              padding_bias);
  }
  for (std::size_t head = 0; head < kv_heads; ++head) {
    const lowbit::attention::QuantizedHead& k = *operands.k[head];
    const lowbit::attention::QuantizedHead& v = *operands.v[head];
    const quant::QuantizedTensor& kt = k.tensor;
    const quant::QuantizedTensor& vt = v.tensor;  // keys x d, per-channel scales
    if (std::size_t(kt.padded_rows) != pkv || std::size_t(kt.codes.cols()) != d || kt.scales.size() != sizes.k_scales / kv_heads)
      fail("K head " + std::to_string(head) + " is not laid out as the kernel's");
    if (std::size_t(vt.codes.cols()) != d || v.mean.size() != (p.smooth_v ? d : 0))
      fail("V head " + std::to_string(head) + " is not laid out as the kernel's (or its mean is missing or left over)");
    for (std::size_t j = 0; j < pkv; ++j)
      for (std::size_t c = 0; c < d; ++c)
        out.k_codes[head * pkv * d + std::size_t(k_code_offset(int(j), int(c), p.head_dim, block_kv))] =
            std::int8_t(kt.codes(Eigen::Index(j), Eigen::Index(c)));
    std::copy(kt.scales.begin(), kt.scales.end(), out.k_scales.begin() + std::ptrdiff_t(head * kt.scales.size()));
    std::copy(k.mean.begin(), k.mean.end(), out.k_mean.begin() + std::ptrdiff_t(head * d));
    std::copy(v.mean.begin(), v.mean.end(), out.v_mean.begin() + std::ptrdiff_t(head * v.mean.size()));
    for (std::size_t c = 0; c < d; ++c) {
      out.v_scales[head * d + c] = vt.scales[std::size_t(vt.group_of(0, int(c)))];
      for (std::size_t position = 0; position < pkv; ++position) {
        const std::size_t key = position / 32 * 32 + std::size_t(p_map.key_of_column[position % 32]);
        out.v_codes[head * pkv * d + std::size_t(v_code_offset(int(c), int(position), p.head_dim, block_kv))] =
            key < std::size_t(vt.codes.rows()) && key < tokens ? std::uint8_t(vt.codes(Eigen::Index(key), Eigen::Index(c))) : 0;
      }
    }
  }
  return out;
}

Sage2HostQuantized lay_out_operands(const Sage2Problem& p, const lowbit::attention::PreparedOperands& prepared) {
  if (prepared.groups.size() != std::size_t(p.batch) * std::size_t(p.heads_kv))
    throw std::logic_error("lay_out_operands: the prepared groups are not the problem's KV heads");
  Sage2EmulatedOperands operands;
  const int group = p.heads_q / p.heads_kv;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const auto& q = prepared.groups[std::size_t(b * p.heads_kv + h / group)].q.at(std::size_t(h % group));
      operands.q.push_back(&q.q);
      operands.q_bias.emplace_back(q.lse_bias);
    }
  for (const auto& g : prepared.groups) {
    operands.k.push_back(&g.kv.k);
    operands.v.push_back(&g.kv.v);
  }
  return lay_out_operands(p, operands);
}

}  // namespace lowbit::kernels::attention
