#include "tests/attention_gpu/sage2_model.hpp"

#include <algorithm>
#include <stdexcept>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/sage2_hopper.hpp"
#include "emulation/convert.hpp"
#include "emulation/mma/gemm.hpp"
#include "emulation/quant/quantize.hpp"
#include "kernels/sm90/fragment.hpp"
#include "numerics/parallel.hpp"

namespace lowbit::test {
namespace {

namespace steps = lowbit::attention::steps;
using kernels::attention::DType;
using kernels::attention::Sage2Problem;

const Format& element_format(DType t) { return t == DType::fp16 ? formats::fp16 : formats::bf16; }

// One head of a [b, h, t, d] tensor (the problem's layout) as a tokens x dim float matrix.
MatrixF head_matrix(const Sage2Problem& p, std::span<const std::uint16_t> x, int b, int h, int heads) {
  const Format& f = element_format(p.dtype);
  MatrixF m(p.tokens, p.head_dim);
  for (int t = 0; t < p.tokens; ++t)
    for (int c = 0; c < p.head_dim; ++c) m(t, c) = float(decode(f, x[p.element_offset(b, h, t, heads) + std::size_t(c)]));
  return m;
}

struct HeadQuantized {
  quant::QuantizedTensor codes;  // Q or K' (int8), or V (e4m3)
  std::vector<float> mean;       // K only
};

}  // namespace

Sage2ModelResult sage2_model(const Sage2Problem& p, std::span<const std::uint16_t> q, std::span<const std::uint16_t> k,
                             std::span<const std::uint16_t> v, std::span<const int> only_q_blocks) {
  if (auto why = p.validate()) throw std::invalid_argument("sage2_model: " + *why);
  if (q.size() != p.elements(p.heads_q) || k.size() != p.elements(p.heads_kv) || v.size() != p.elements(p.heads_kv))
    throw std::invalid_argument("sage2_model: tensor sizes do not fit the problem");
  const auto recipe = p.recipe();
  const int d = p.head_dim, n = p.tokens, pq = p.padded_q(), pkv = p.padded_kv();
  const int block_q = recipe.block_q, block_kv = recipe.block_kv;
  const quant::Grouping q_grouping = quant::grouping::per_thread(recipe.qk_tiling(), quant::Operand::q);
  const quant::Grouping k_grouping = quant::grouping::per_thread(recipe.qk_tiling(), quant::Operand::k);
  const float softmax_scale = steps::softmax_scale_log2(d);

  // ---- quantization, head by head --------------------------------------------------------------
  std::vector<quant::QuantizedTensor> qq(std::size_t(p.batch * p.heads_q)), kq(std::size_t(p.batch * p.heads_kv)),
      vq(std::size_t(p.batch * p.heads_kv));
  std::vector<std::vector<float>> k_mean(std::size_t(p.batch * p.heads_kv));
  parallel_for(std::size_t(p.batch * (p.heads_q + p.heads_kv)), [&](std::size_t item, unsigned) {
    const int b = int(item) / (p.heads_q + p.heads_kv), h = int(item) % (p.heads_q + p.heads_kv);
    if (h < p.heads_q) {
      qq[std::size_t(b * p.heads_q + h)] =
          quant::quantize(head_matrix(p, q, b, h, p.heads_q), quant::presets::int8(q_grouping), "Q");
      return;
    }
    const int hk = h - p.heads_q;
    MatrixF kh = head_matrix(p, k, b, hk, p.heads_kv);
    std::vector<float> mean(static_cast<std::size_t>(d));
    for (int c = 0; c < d; ++c) {  // the recipe's chunked double sums
      double total = 0.0;
      for (int first = 0; first < n; first += recipe.key_mean_chunk) {
        double chunk = 0.0;
        for (int t = first; t < std::min(n, first + recipe.key_mean_chunk); ++t) chunk = lowbit::attention::add_key(chunk, kh(t, c));
        total = lowbit::attention::add_chunk_sum(total, chunk);
      }
      mean[std::size_t(c)] = lowbit::attention::key_mean(total, n);
    }
    for (int t = 0; t < n; ++t)
      for (int c = 0; c < d; ++c) kh(t, c) = lowbit::attention::smooth_key(kh(t, c), mean[std::size_t(c)]);
    kq[std::size_t(b * p.heads_kv + hk)] = quant::quantize(kh, quant::presets::int8(k_grouping), "K'");
    k_mean[std::size_t(b * p.heads_kv + hk)] = std::move(mean);
    vq[std::size_t(b * p.heads_kv + hk)] = quant::quantize(
        head_matrix(p, v, b, hk, p.heads_kv), quant::presets::fp8(formats::e4m3, quant::grouping::per_channel()), "V");
  });

  Sage2ModelResult result;
  auto& out_q = result.quantized;
  const auto sizes = kernels::attention::QuantizedSizes::of(p);
  out_q.q_codes.resize(sizes.q_codes);
  out_q.q_scales.resize(sizes.q_scales);
  out_q.k_codes.resize(sizes.k_codes);
  out_q.k_scales.resize(sizes.k_scales);
  out_q.k_mean.resize(sizes.k_mean);
  out_q.v_codes.resize(sizes.v_codes);
  out_q.v_scales.resize(sizes.v_scales);
  out_q.q_bias.resize(sizes.q_bias);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const std::size_t head = std::size_t(b * p.heads_q + h);
      const std::vector<float>& kbar = k_mean[std::size_t(b * p.heads_kv + h / (p.heads_q / p.heads_kv))];
      const MatrixF qh = head_matrix(p, q, b, h, p.heads_q);
      for (int t = 0; t < pq; ++t)
        out_q.q_bias[head * std::size_t(pq) + std::size_t(t)] = steps::smoothing_bias(
            [&](int c) { return t < n ? qh(t, c) : 0.0f; }, kbar.data(), d, softmax_scale);
    }
  for (std::size_t head = 0; head < qq.size(); ++head) {
    const auto& t = qq[head];
    for (int r = 0; r < pq; ++r)
      for (int c = 0; c < d; ++c) out_q.q_codes[(head * pq + std::size_t(r)) * std::size_t(d) + std::size_t(c)] = std::int8_t(t.codes(r, c));
    for (std::size_t g = 0; g < t.scales.size(); ++g)
      out_q.q_scales[head * t.scales.size() + g] = steps::fold_softmax_scale(t.scales[g], softmax_scale);
  }
  constexpr auto p_map = kernels::sm90::accumulator_to_a8(128);
  static_assert(p_map.consistent);
  for (std::size_t head = 0; head < kq.size(); ++head) {
    const auto& t = kq[head];
    for (int r = 0; r < pkv; ++r)
      for (int c = 0; c < d; ++c) out_q.k_codes[(head * pkv + std::size_t(r)) * std::size_t(d) + std::size_t(c)] = std::int8_t(t.codes(r, c));
    std::copy(t.scales.begin(), t.scales.end(), out_q.k_scales.begin() + std::ptrdiff_t(head * t.scales.size()));
    std::copy(k_mean[head].begin(), k_mean[head].end(), out_q.k_mean.begin() + std::ptrdiff_t(head) * d);
    const auto& vt = vq[head];
    std::copy(vt.scales.begin(), vt.scales.end(), out_q.v_scales.begin() + std::ptrdiff_t(head) * d);
    for (int c = 0; c < d; ++c)
      for (int position = 0; position < pkv; ++position) {
        const int key = position / 32 * 32 + p_map.key_of_column[position % 32];
        out_q.v_codes[(head * std::size_t(d) + std::size_t(c)) * std::size_t(pkv) + std::size_t(position)] =
            key < n ? std::uint8_t(vt.codes(key, c)) : 0;
      }
  }

  // ---- attention, one (batch, Q head, Q block) at a time ---------------------------------------
  const mma::Instruction pv = mma::find_instruction(
      "sm_90", "wgmma.mma_async.sync.aligned.m64n" + std::to_string(d) + "k32.f32.e4m3.e4m3");
  constexpr int kPerLane = 128 / steps::kLanesPerRow;
  if (block_kv != 128) throw std::logic_error("sage2_model: written for block_kv = 128");
  result.out.assign(p.elements(p.heads_q), 0);
  result.lse.assign(std::size_t(p.batch) * p.heads_q * n, 0.0f);
  const int q_blocks = pq / block_q, group_size = p.heads_q / p.heads_kv;
  std::vector<int> blocks(only_q_blocks.begin(), only_q_blocks.end());
  if (blocks.empty())
    for (int qb = 0; qb < q_blocks; ++qb) blocks.push_back(qb);
  for (int qb : blocks)
    if (qb < 0 || qb >= q_blocks) throw std::invalid_argument("sage2_model: Q block " + std::to_string(qb) + " out of range");
  const int per_head = int(blocks.size());
  const Format& out_format = element_format(p.dtype);
  parallel_for(std::size_t(p.batch * p.heads_q * per_head), [&](std::size_t item, unsigned) {
    const int qb = blocks[item % std::size_t(per_head)], hq = int(item) / per_head % p.heads_q, b = int(item) / per_head / p.heads_q;
    const int hk = hq / group_size;
    const auto& qt = qq[std::size_t(b * p.heads_q + hq)];
    const auto& kt = kq[std::size_t(b * p.heads_kv + hk)];
    const auto& vt = vq[std::size_t(b * p.heads_kv + hk)];
    const std::int8_t* k_codes = &out_q.k_codes[std::size_t(b * p.heads_kv + hk) * std::size_t(pkv) * std::size_t(d)];
    const int q0 = qb * block_q;
    const int last_key = (p.causal ? std::min(n, q0 + block_q) : n) - 1;
    const int kv_count = last_key / block_kv + 1;
    std::vector<float> m(std::size_t(block_q), steps::kNegativeInfinity), offset(std::size_t(block_q), steps::kNegativeInfinity);
    std::vector<float> lane_sum(std::size_t(block_q) * steps::kLanesPerRow, 0.0f), o(std::size_t(block_q) * d, 0.0f);
    std::vector<float> alpha(static_cast<std::size_t>(block_q)), s(static_cast<std::size_t>(block_kv));
    MatrixCode p_codes(block_q, block_kv), v_block(block_kv, d), zero = MatrixCode::Zero(block_q, d);
    for (int i = 0; i < kv_count; ++i) {
      const int j = recipe.kv_order == lowbit::attention::KvOrder::ascending ? i : kv_count - 1 - i;
      const int kv0 = j * block_kv;
      for (int r = 0; r < block_q; ++r) {
        const int query = q0 + r;
        const std::int8_t* q_row = &out_q.q_codes[(std::size_t(b * p.heads_q + hq) * std::size_t(pq) + std::size_t(query)) * std::size_t(d)];
        const float q_folded = steps::fold_softmax_scale(qt.scales[std::size_t(qt.group_of(query, 0))], softmax_scale);
        float block_max = steps::kNegativeInfinity;
        for (int c = 0; c < block_kv; ++c) {
          const int key = kv0 + c;
          std::int32_t acc = 0;  // exact: |acc| <= 127 * 127 * d
          for (int e = 0; e < d; ++e) acc += std::int32_t(q_row[e]) * std::int32_t(k_codes[std::size_t(key) * std::size_t(d) + std::size_t(e)]);
          const float scale = steps::score_scale(q_folded, kt.scales[std::size_t(kt.group_of(key, 0))]);
          s[std::size_t(c)] = key >= n || (p.causal && key > query) ? steps::kNegativeInfinity : steps::dequantize_score(acc, scale);
          block_max = std::max(block_max, s[std::size_t(c)]);
        }
        float& mr = m[std::size_t(r)];
        mr = std::max(mr, block_max);
        const float new_offset = steps::row_offset(mr, recipe.p_log2_scale);
        alpha[std::size_t(r)] = steps::rescale(offset[std::size_t(r)], new_offset, recipe.exp2);
        offset[std::size_t(r)] = new_offset;
        float lane_values[steps::kLanesPerRow][kPerLane];
        int filled[steps::kLanesPerRow] = {};
        for (int c = 0; c < block_kv; ++c) {
          const float pc = steps::probability(s[std::size_t(c)], new_offset, recipe.exp2);
          const int lane = steps::lane_of_column(c);
          lane_values[lane][filled[lane]++] = pc;
          p_codes(r, c) = steps::e4m3_code(pc);
        }
        for (int lane = 0; lane < steps::kLanesPerRow; ++lane) {
          float& l = lane_sum[std::size_t(r) * steps::kLanesPerRow + std::size_t(lane)];
          l = steps::update_row_sum(l, alpha[std::size_t(r)], steps::tree_sum<kPerLane>(lane_values[lane]));
        }
      }
      for (int key = 0; key < block_kv; ++key)
        for (int c = 0; c < d; ++c) v_block(key, c) = kv0 + key < n ? vt.codes(kv0 + key, c) : 0;
      const MatrixCode r_bits = mma::gemm(pv, {p_codes, v_block, zero});
      for (int r = 0; r < block_q; ++r)
        for (int c = 0; c < d; ++c) {
          float& acc = o[std::size_t(r) * d + std::size_t(c)];
          acc = steps::accumulate_output(acc, alpha[std::size_t(r)], steps::bits_float(r_bits(r, c)));
        }
    }
    for (int r = 0; r < block_q; ++r) {
      const int query = q0 + r;
      if (query >= n) break;
      const float* l = &lane_sum[std::size_t(r) * steps::kLanesPerRow];
      const float row_sum = steps::combine_lanes(l[0], l[1], l[2], l[3]);
      const float inverse = steps::inverse_row_sum(row_sum);
      for (int c = 0; c < d; ++c) {
        const float value = steps::normalize_output(o[std::size_t(r) * d + std::size_t(c)], inverse, vt.scales[std::size_t(c)]);
        result.out[p.element_offset(b, hq, query, p.heads_q) + std::size_t(c)] =
            std::uint16_t(encode(out_format, double(value), {.rounding = Rounding::nearest_even, .overflow = Overflow::inf}));
      }
      result.lse[(std::size_t(b) * p.heads_q + std::size_t(hq)) * n + std::size_t(query)] =
          steps::log_sum_exp(offset[std::size_t(r)], row_sum,
                             out_q.q_bias[(std::size_t(b) * p.heads_q + std::size_t(hq)) * std::size_t(pq) + std::size_t(query)]);
    }
  });
  return result;
}

}  // namespace lowbit::test
