#include "tests/attention/plain_attention.hpp"

#include <bit>
#include <cmath>

#include "emulation/attention/flash2_steps.hpp"
#include "emulation/attention/flash3_steps.hpp"
#include "emulation/attention/sage2_sm90_steps.hpp"
#include "emulation/convert.hpp"
#include "emulation/layout.hpp"
#include "emulation/mma/gemm.hpp"
#include "emulation/mma/wide.hpp"
#include "emulation/quant/rotation.hpp"

namespace lowbit::test {
namespace {

using namespace lowbit::attention;
namespace st = lowbit::attention::steps;

bool block_scaled(const OperandStage& op) { return op.granularity == Granularity::nvfp4 || op.granularity == Granularity::mx; }

// x minus the mean of each run of `block` rows (0: all rows); the mean's double sum taken over
// runs of `chunk` rows (0: one run). Returns the means, one row per block.
MatrixF subtract_means(MatrixF& x, int block, int chunk) {
  const int rows = int(x.rows()), cols = int(x.cols());
  const int span = block > 0 ? block : rows;
  MatrixF means((rows + span - 1) / span, cols);
  for (int b = 0; b * span < rows; ++b) {
    const int first = b * span, last = std::min(rows, first + span);
    for (int c = 0; c < cols; ++c) {
      double total = 0;
      const int run = chunk > 0 ? chunk : last - first;
      for (int start = first; start < last; start += run) {
        double partial = 0;
        for (int r = start; r < std::min(last, start + run); ++r) partial += x(r, c);
        total += partial;
      }
      means(b, c) = float(total / (last - first));
    }
    for (int r = first; r < last; ++r)
      for (int c = 0; c < cols; ++c) x(r, c) = x(r, c) - means(b, c);
  }
  return means;
}

MatrixF zero_padded(const MatrixF& x, int rows) {
  MatrixF out = MatrixF::Zero(rows, x.cols());
  out.topRows(x.rows()) = x;
  return out;
}

float scale_of_row(const quant::QuantizedTensor& t, const OperandStage& op, int row) {
  return block_scaled(op) ? t.outer_of(row) : t.scales[std::size_t(t.group_of(row, 0))];
}

// Block scale codes of rows [first, first + count) of t (its groups run along the columns).
MatrixCode block_scales(const quant::QuantizedTensor& t, int first, int count, int first_col, int cols) {
  const int block = t.spec.grouping.col_block;
  MatrixCode s(count, cols / block);
  for (int r = 0; r < count; ++r)
    for (int g = 0; g < cols / block; ++g) s(r, g) = t.scale_codes[std::size_t(t.group_of(first + r, first_col + g * block))];
  return s;
}

float accumulator_float(const Format& f, std::uint32_t bits) {
  if (f == formats::s32) return float(std::int32_t(bits));
  return f == formats::fp16 ? float(decode(formats::fp16, bits)) : std::bit_cast<float>(bits);
}

// The value a product of values reads: the element, times its block scale if it has one.
float element_value(const quant::QuantizedTensor& t, int row, int col) {
  const float x = float(decode(t.spec.element, t.codes(row, col)));
  if (t.spec.grouping.col_block == 0 || t.scale_codes.empty() || t.spec.scale.format == formats::fp32) return x;
  return st::mul_rn(x, float(decode(t.spec.scale.format, t.scale_codes[std::size_t(t.group_of(row, col))])));
}

// fp32 fmas in order from c, or the instruction's accumulation (wide).
float dot(const std::optional<mma::WideAccumulation>& wide, const std::vector<float>& a, const std::vector<float>& b, float c) {
  if (wide) return wide->dot(a.data(), b.data(), 1, int(a.size()), c);
  for (std::size_t i = 0; i < a.size(); ++i) c = st::fma_rn(a[i], b[i], c);
  return c;
}

float lane_tree_sum(const std::vector<float>& p, int lane) {
  std::vector<float> mine;
  for (std::size_t c = 0; c < p.size(); ++c)
    if (st::lane_of_column(int(c)) == lane) mine.push_back(p[c]);
  switch (mine.size()) {
    case 2: return st::tree_sum<2>(mine.data());
    case 4: return st::tree_sum<4>(mine.data());
    case 8: return st::tree_sum<8>(mine.data());
    case 16: return st::tree_sum<16>(mine.data());
    case 32: return st::tree_sum<32>(mine.data());
    case 64: return st::tree_sum<64>(mine.data());
  }
  throw std::logic_error("lane_tree_sum: unexpected lane size");
}

}  // namespace

bool plain_supports(const Pipeline& pipeline) { return pipeline.p.scale != PScale::per_block; }

PlainResult plain_forward(const Pipeline& pl, const Tensor4& q_in, const Tensor4& k_in, const Tensor4& v_in, bool causal) {
  const int N = q_in.tokens, keys = k_in.tokens, d = q_in.dim, dv = v_in.dim;
  const int bq = pl.tiling.block_q, bkv = pl.tiling.kv_block(causal);
  const int shift = pl.causal_align == CausalAlign::bottom_right ? k_in.tokens - q_in.tokens : 0;  // the causal diagonal's
  const int group = q_in.heads / k_in.heads;
  const std::optional<mma::Instruction> qk = pl.qk.has_instruction() ? std::optional(pl.qk_instruction()) : std::nullopt;
  const std::optional<mma::Instruction> pv = pl.pv.has_instruction() ? std::optional(pl.pv_instruction(dv)) : std::nullopt;
  std::optional<mma::WideAccumulation> qk_wide, pv_wide;
  if (pl.qk.wide()) qk_wide.emplace(*qk);
  if (pl.pv.wide()) pv_wide.emplace(*pv);
  const int depth = pl.qk_depth(d);
  const int tokens_padded = (N + bq - 1) / bq * bq, keys_padded = (keys + bkv - 1) / bkv * bkv;
  const bool flash2 = pl.softmax == Softmax::flash2;  // m then holds the raw maximum (flash2_steps.hpp)
  const bool flash3 = pl.softmax == Softmax::flash3;  // likewise (flash3_steps.hpp)
  const float offset3 = pl.p.log2_scale;              // flash3: P's offset
  const bool sage2 = sage2_released(pl.softmax);  // raw accumulators, per-lane scales (sage2_sm90_steps.hpp)
  // The key at position j of a block's P V (p-keys=registers: each 32-key k step in register order).
  constexpr layout::AccumulatorToA8 p_map = layout::accumulator_to_a8(32);
  const bool row_sum_pv = pl.row_sum == st::RowSum::pv;
  const auto key_at = [&](int j) { return pl.p_keys == PKeys::registers ? j / 32 * 32 + p_map.key_of_column[std::size_t(j % 32)] : j; };
  const int sage2_dequantized =
      pl.softmax == Softmax::sage2_sm89 ? sage2_sm90::kDequantizedBlocksSm89 : sage2_sm90::kDequantizedBlocksSm90;
  const float sm_sage2 = sage2_sm90::softmax_scale_log2(d);
  const float sm = flash2 ? flash2::softmax_scale_log2(d) : st::softmax_scale_log2(d);

  PlainResult out;
  out.output.assign(std::size_t(q_in.batch) * q_in.heads * N * dv, 0.0f);
  out.lse.assign(std::size_t(q_in.batch) * q_in.heads * N, 0.0f);
  out.q.resize(std::size_t(q_in.batch) * q_in.heads);
  out.k.resize(std::size_t(q_in.batch) * k_in.heads);
  out.v.resize(out.k.size());

  for (int b = 0; b < q_in.batch; ++b)
    for (int g = 0; g < k_in.heads; ++g) {
      // Transforms (the quantizer's), then means and residuals in this file's own loops.
      std::vector<MatrixF> qs;
      for (int h = g * group; h < (g + 1) * group; ++h) qs.push_back(q_in.head(b, h));
      MatrixF kx = k_in.head(b, g), vx = v_in.head(b, g);
      if (pl.smoothing.transform == Transform::hadamard) {
        const quant::RandomHadamard rot(d, pl.smoothing.hadamard_seed);
        for (MatrixF& x : qs) x = rot.apply(x);
        kx = rot.apply(kx);
      } else if (pl.smoothing.transform == Transform::smooth_attn) {
        MatrixF all(N * group, d);
        for (int i = 0; i < group; ++i) all.middleRows(i * N, N) = qs[std::size_t(i)];
        const quant::MigratedQk m = quant::smooth_attn(all, kx, pl.smoothing.smooth_attn_alpha);
        for (int i = 0; i < group; ++i) qs[std::size_t(i)] = m.q.middleRows(i * N, N);
        kx = m.k;
      }
      QuantizedHead& K = out.k[std::size_t(b) * k_in.heads + g];
      QuantizedHead& V = out.v[std::size_t(b) * k_in.heads + g];
      if (pl.smoothing.k) {
        const MatrixF k_original = kx;
        MatrixF mean = subtract_means(kx, 0, pl.smoothing.key_mean_chunk);
        // PyTorch's half k.mean(), then k - km rounded to its format (or not: fp32)
        const auto to = [](const Format& f, float x) { return float(round_to_format(f, double(x))); };
        for (int c = 0; c < d; ++c) mean(0, c) = to(pl.smoothing.key_mean_format, mean(0, c));
        for (int r = 0; r < keys; ++r)
          for (int c = 0; c < d; ++c) kx(r, c) = to(pl.smoothing.key_residual_format, k_original(r, c) - mean(0, c));
        K.mean.assign(mean.data(), mean.data() + mean.size());
      }
      if (pl.smoothing.v) {
        const MatrixF mean = subtract_means(vx, 0, pl.smoothing.key_mean_chunk);
        V.mean.assign(mean.data(), mean.data() + mean.size());
      }
      K.tensor = quant::quantize_reference(zero_padded(kx, keys_padded), pl.quant_spec(Role::k), "K");
      const bool v_t = block_scaled(pl.v);
      const MatrixF v_rows = zero_padded(vx, keys_padded);
      V.tensor = quant::quantize_reference(v_t ? MatrixF(v_rows.transpose()) : v_rows, pl.quant_spec(Role::v), "V");
      const auto v_code = [&](int key, int c) { return v_t ? V.tensor.codes(c, key) : V.tensor.codes(key, c); };
      const auto v_value = [&](int key, int c) { return v_t ? element_value(V.tensor, c, key) : element_value(V.tensor, key, c); };
      const auto v_scale = [&](int c) {
        return v_t ? V.tensor.outer_of(c) : V.tensor.scales[std::size_t(V.tensor.group_of(0, c))];
      };

      for (int i = 0; i < group; ++i) {
        const int h = g * group + i;
        MatrixF qx = qs[std::size_t(i)];
        QuantizedHead& Q = out.q[std::size_t(b) * q_in.heads + h];
        MatrixF qbar;
        if (pl.smoothing.q) {
          qbar = subtract_means(qx, bq, 0);
          Q.mean.assign(qbar.data(), qbar.data() + qbar.size());
        }
        Q.tensor = quant::quantize_reference(zero_padded(qx, tokens_padded), pl.quant_spec(Role::q), "Q");

        for (int row = 0; row < N; ++row) {
          const int qb = row / bq, last_row = std::min(N, (qb + 1) * bq) - 1;
          const float q_scale = st::fold_softmax_scale(scale_of_row(Q.tensor, pl.q, row), sm);
          const float sm3 = flash3::scale_log2(d, st::mul_rn(scale_of_row(Q.tensor, pl.q, row), pl.descale.q),
                                               st::mul_rn(scale_of_row(K.tensor, pl.k, 0), pl.descale.k));
          float m = st::kNegativeInfinity, offset = st::kNegativeInfinity;
          float lanes[4] = {0, 0, 0, 0};
          std::vector<float> o(std::size_t(dv), 0.0f);
          const int blocks = keys_padded / bkv;
          // sage2: the kernel's last iteration (ascending), which runs its query tile's padded rows too.
          const int tile_last_row = (qb + 1) * bq - 1;
          int last_block = -1;
          for (int kb = 0; kb < blocks; ++kb)
            if (kb * bkv < keys && !(causal && kb * bkv > tile_last_row + shift)) last_block = kb;
          for (int step = 0; step < blocks; ++step) {
            const int kb = pl.tiling.kv_order == KvOrder::ascending ? step : blocks - 1 - step;
            const int first = kb * bkv;
            if (first >= keys || (causal && first > last_row + shift)) continue;
            // Scores: acc[j] the accumulator and scale[j] its pair's scale, s[j] the rounded score.
            std::vector<float> s(static_cast<std::size_t>(bkv)), acc(s.size()), scale(s.size());
            if (pl.qk.on_values()) {
              std::vector<float> qv(static_cast<std::size_t>(depth)), kv(static_cast<std::size_t>(depth));
              for (int c = 0; c < depth; ++c) qv[std::size_t(c)] = element_value(Q.tensor, row, c);
              for (int j = 0; j < bkv; ++j) {
                for (int c = 0; c < depth; ++c) kv[std::size_t(c)] = element_value(K.tensor, first + j, c);
                acc[std::size_t(j)] = dot(qk_wide, qv, kv, 0.0f);
                scale[std::size_t(j)] = st::score_scale(q_scale, scale_of_row(K.tensor, pl.k, first + j));
              }
            } else {
              const MatrixCode a = Q.tensor.codes.middleRows(row, 1);
              const MatrixCode bt = K.tensor.codes.middleRows(first, bkv).transpose();
              const MatrixCode zero = MatrixCode::Zero(1, bkv);
              MatrixCode sa, sb;
              if (qk->atom.block_scaled()) {
                sa = block_scales(Q.tensor, row, 1, 0, depth);
                sb = block_scales(K.tensor, first, bkv, 0, depth).transpose();
              }
              const MatrixCode dres = mma::gemm(*qk, {a, bt, zero, qk->atom.block_scaled() ? &sa : nullptr, qk->atom.block_scaled() ? &sb : nullptr});
              for (int j = 0; j < bkv; ++j) {
                scale[std::size_t(j)] = st::score_scale(q_scale, scale_of_row(K.tensor, pl.k, first + j));
                acc[std::size_t(j)] = qk->atom.d == formats::s32 ? float(std::int32_t(dres(0, j)))
                                                                 : accumulator_float(qk->atom.d, dres(0, j));
              }
            }
            const bool fused = pl.exponential.argument == st::ExpArgument::fused && !sage2;
            for (int j = 0; j < bkv; ++j) {
              if (fused) scale[std::size_t(j)] = st::fused_scale(scale[std::size_t(j)]);
              s[std::size_t(j)] = st::dequantize_score(acc[std::size_t(j)], scale[std::size_t(j)]);
            }
            if (sage2) {  // the last blocks' scores dequantized, their scale plain; the others' raw, the scale fused
              const bool dequantized_first = kb > last_block - sage2_dequantized;
              for (int j = 0; j < bkv; ++j) {
                const float dq = sage2_sm90::dequantization(scale_of_row(Q.tensor, pl.q, row), scale_of_row(K.tensor, pl.k, first + j));
                s[std::size_t(j)] = dequantized_first ? flash3::mul_ftz(acc[std::size_t(j)], dq) : acc[std::size_t(j)];
                scale[std::size_t(j)] = dequantized_first ? sm_sage2 : st::mul_rn(sm_sage2, dq);
              }
            }
            for (int j = 0; j < bkv; ++j) {
              const int key = first + j;
              if (pl.smoothing.q) {
                float delta = 0;
                if (key < keys)
                  for (int c = 0; c < d; ++c) delta = st::fma_rn(qbar(qb, c), kx(key, c), delta);
                s[std::size_t(j)] = st::add_score_correction(s[std::size_t(j)], delta, sm);
              }
              if (key >= keys || (causal && key > row + shift))
                s[std::size_t(j)] = acc[std::size_t(j)] = sage2 ? sage2_sm90::kMasked : st::kNegativeInfinity;
            }
            if (sage2) {  // lane t's maximum at its own scale, the quad's maximum of those
              const float old_max = m == st::kNegativeInfinity ? sage2_sm90::kMasked : m;
              float m_new = old_max;
              for (int j = 0; j < bkv; ++j) {
                float lane_raw = sage2_sm90::kMasked;
                for (int c = 0; c < bkv; ++c)
                  if (sage2_sm90::lane_of_key(c) == sage2_sm90::lane_of_key(j)) lane_raw = std::max(lane_raw, s[std::size_t(c)]);
                m_new = std::max(m_new, sage2_sm90::lane_max(lane_raw, scale[std::size_t(j)], pl.p.log2_scale));
              }
              const float alpha = sage2_sm90::rescale(old_max, m_new);
              for (int j = 0; j < bkv; ++j) s[std::size_t(j)] = sage2_sm90::probability(s[std::size_t(j)], scale[std::size_t(j)], m_new);
              for (int lane = 0; lane < 4; ++lane) lanes[lane] = sage2_sm90::lane_sum(lanes[lane], alpha, s.data(), bkv, lane);
              m = m_new;
              MatrixCode pc(1, bkv), vb(bkv, dv);
              for (int j = 0; j < bkv; ++j) pc(0, j) = st::e4m3_code(s[std::size_t(key_at(j))]);
              for (int j = 0; j < bkv; ++j)
                for (int c = 0; c < dv; ++c) vb(j, c) = v_code(first + key_at(j), c);
              const MatrixCode r = mma::gemm(*pv, {pc, vb, MatrixCode::Zero(1, dv)});
              for (int c = 0; c < dv; ++c)
                o[std::size_t(c)] = sage2_sm90::accumulate(o[std::size_t(c)], alpha, accumulator_float(pv->atom.d, r(0, c)));
              continue;
            }
            // Online softmax (the maximum of the rounded scores either way; flash2: of the raw ones).
            float m_new = m;
            for (int j = 0; j < bkv; ++j)
              m_new = std::max(m_new, flash2 || flash3 ? acc[std::size_t(j)] : s[std::size_t(j)]);
            const float offset_new = st::row_offset(m_new, pl.p.log2_scale);
            const float alpha = flash2   ? flash2::rescale(m, m_new, sm)
                                : flash3 ? flash3::rescale(m, m_new, sm3)
                                         : pl.exponential.rescale(offset, offset_new);
            std::vector<float> p(static_cast<std::size_t>(bkv));
            for (int j = 0; j < bkv; ++j)
              p[std::size_t(j)] =
                  flash2   ? flash2::probability(acc[std::size_t(j)], sm, flash2::scaled_max(m_new, sm))
                  : flash3 ? flash3::probability(acc[std::size_t(j)], sm3, flash3::scaled_max(m_new, sm3, offset3))
                  : fused  ? pl.exponential.fused_probability(acc[std::size_t(j)], scale[std::size_t(j)], offset_new)
                           : pl.exponential.probability(s[std::size_t(j)], offset_new);
            for (int lane = 0; lane < 4 && !row_sum_pv; ++lane)
              lanes[lane] = flash2 || flash3 ? flash2::lane_sum(lanes[lane], alpha, p.data(), bkv, lane)
                                             : st::update_row_sum(lanes[lane], alpha, lane_tree_sum(p, lane));
            m = m_new;
            offset = st::carried_offset(m_new, offset_new);
            // P codes, their block scales and the factor R is multiplied by.
            MatrixCode pc(1, bkv), ps;
            float factor = 1;
            bool has_factor = false;
            int p_block = 0;
            if (pl.p.format == formats::fp32) {
            } else if (pl.p.scale == PScale::static_exponent) {
              for (int j = 0; j < bkv; ++j)
                pc(0, j) = pl.p.format == formats::e4m3
                               ? st::e4m3_code(p[std::size_t(j)])
                               : encode(pl.p.format, double(p[std::size_t(j)]), {pl.p.rounding, Overflow::saturate});
            } else {
              const MatrixF prow = Eigen::Map<const MatrixF>(p.data(), 1, bkv);
              const quant::QuantizedTensor t = quant::quantize_reference(prow, pl.p.block_spec(), "P");
              pc = t.codes;
              p_block = t.spec.grouping.col_block;
              ps = block_scales(t, 0, 1, 0, bkv);
              if (pl.p.scale == PScale::two_level) factor = t.outer_of(0), has_factor = true;
            }
            // P V on values.
            if (pl.pv.on_values()) {
              std::vector<float> pvals(static_cast<std::size_t>(bkv));
              for (int j = 0; j < bkv; ++j) {
                if (pl.p.format == formats::fp32) {
                  pvals[std::size_t(j)] = p[std::size_t(j)];
                  continue;
                }
                float x = float(decode(pl.p.format, pc(0, j)));
                if (p_block) x = st::mul_rn(x, float(decode(pl.p.block_spec().scale.format, ps(0, j / p_block))));
                pvals[std::size_t(j)] = x;
              }
              const int interval = pv && pl.accumulation.mmas_per_flush > 0 ? pl.accumulation.mmas_per_flush * pv->atom.k : bkv;
              const bool in_place = pl.accumulation.mode == Accumulation::in_place;
              for (int c = 0; c < dv; ++c)
                for (int j0 = 0; j0 < bkv; j0 += interval) {
                  const int width = std::min(interval, bkv - j0);
                  std::vector<float> a(pvals.begin() + j0, pvals.begin() + j0 + width), vv(static_cast<std::size_t>(width));
                  for (int j = 0; j < width; ++j) vv[std::size_t(j)] = v_value(first + j0 + j, c);
                  float r = dot(pv_wide, a, vv, in_place ? st::mul_rn(o[std::size_t(c)], alpha) : 0.0f);
                  if (in_place) {
                    o[std::size_t(c)] = r;
                    continue;
                  }
                  if (has_factor) r = st::mul_rn(r, factor);
                  o[std::size_t(c)] = st::accumulate_output(o[std::size_t(c)], j0 == 0 ? alpha : 1.0f, r);
                }
              continue;
            }
            if (pl.accumulation.mode == Accumulation::in_place) {
              MatrixCode c_bits(1, dv);
              for (int c = 0; c < dv; ++c)
                c_bits(0, c) = std::bit_cast<std::uint32_t>((flash3 ? flash3::mul_ftz : st::mul_rn)(o[std::size_t(c)], alpha));
              MatrixCode vb(bkv, dv), pk(1, bkv);
              for (int j = 0; j < bkv; ++j) {
                pk(0, j) = pc(0, key_at(j));
                for (int c = 0; c < dv; ++c) vb(j, c) = v_code(first + key_at(j), c);
              }
              const MatrixCode r = mma::gemm(*pv, {pk, vb, c_bits});
              for (int c = 0; c < dv; ++c) o[std::size_t(c)] = std::bit_cast<float>(r(0, c));
              continue;
            }
            const int interval = pl.accumulation.mmas_per_flush > 0 ? pl.accumulation.mmas_per_flush * pv->atom.k : bkv;
            for (int j0 = 0; j0 < bkv; j0 += interval) {
              const int width = std::min(interval, bkv - j0);
              MatrixCode vb(width, dv), pa(1, width);
              for (int j = 0; j < width; ++j) {
                pa(0, j) = pc(0, key_at(j0 + j));
                for (int c = 0; c < dv; ++c) vb(j, c) = v_code(first + key_at(j0 + j), c);
              }
              MatrixCode sa, sb;
              if (pv->atom.block_scaled()) {
                sa = ps.middleCols(j0 / p_block, width / p_block);
                sb = block_scales(V.tensor, 0, dv, first + j0, width).transpose();
              }
              const MatrixCode zero = MatrixCode::Zero(1, dv);
              const MatrixCode r = mma::gemm(*pv, {pa, vb, zero, pv->atom.block_scaled() ? &sa : nullptr, pv->atom.block_scaled() ? &sb : nullptr});
              for (int c = 0; c < dv; ++c) {
                float R = accumulator_float(pv->atom.d, r(0, c));
                if (has_factor) R = st::mul_rn(R, factor);
                o[std::size_t(c)] = st::accumulate_output(o[std::size_t(c)], j0 == 0 ? alpha : 1.0f, R);
              }
              if (row_sum_pv) {  // P's codes times a column of ones, flushed into l as o
                const MatrixCode ones = MatrixCode::Constant(width, 1, encode(pv->atom.b, 1.0));
                const MatrixCode sum = mma::gemm(*pv, {pa, ones, MatrixCode::Zero(1, 1)});
                lanes[0] = st::accumulate_output(lanes[0], j0 == 0 ? alpha : 1.0f, accumulator_float(pv->atom.d, sum(0, 0)));
              }
            }
          }
          const float l = flash2 || flash3 ? flash2::combine_lanes(lanes[0], lanes[1], lanes[2], lanes[3])
                          : row_sum_pv     ? lanes[0]
                                           : st::combine_lanes(lanes[0], lanes[1], lanes[2], lanes[3]);
          const float inverse = flash2 ? flash2::inverse_row_sum(l) : st::inverse_row_sum(l);
          const std::size_t at = (std::size_t(b) * q_in.heads + h) * N + row;
          if (sage2) {
            for (int c = 0; c < dv; ++c) out.output[at * dv + c] = sage2_sm90::output(o[std::size_t(c)], l, v_scale(c));
            out.lse[at] = sage2_sm90::log_sum_exp(m, l);
            continue;
          }
          if (flash3) {
            const float factor = flash3::output_scale(l, st::mul_rn(v_scale(0), pl.descale.v));
            for (int c = 0; c < dv; ++c) out.output[at * dv + c] = flash3::mul_ftz(o[std::size_t(c)], factor);
            out.lse[at] = flash3::log_sum_exp(m, l, sm3, offset3);
            continue;
          }
          for (int c = 0; c < dv; ++c) {
            float y = st::normalize_output(o[std::size_t(c)], inverse, v_scale(c));
            if (pl.smoothing.v) y = st::add_value_mean(y, V.mean[std::size_t(c)]);
            out.output[at * dv + c] = y;
          }
          float bias = 0.0f;  // the row bias K smoothing removed
          if (pl.smoothing.k)
            bias = st::smoothing_bias([&](int c) { return qs[std::size_t(i)](row, c); }, K.mean.data(), d, sm);
          out.lse[at] = flash2 ? flash2::log_sum_exp(m, l, flash2::softmax_scale(d)) : pl.exponential.log_sum_exp(offset, l, bias);
        }
      }
    }
  out.output_codes.resize(out.output.size());
  for (std::size_t i = 0; i < out.output.size(); ++i)
    out.output_codes[i] = encode(pl.output, double(out.output[i]), {Rounding::nearest_even, Overflow::inf});
  return out;
}

}  // namespace lowbit::test
