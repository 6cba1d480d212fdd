// forward(): the tiled pass of pipeline.hpp. Per (batch, KV head) the K and V operands are prepared
// once (forward_operands.hpp's prepare_group, which prepare_operands also runs), then every Q head of the group and every block of block_q queries
// runs on its own (a thread block of the kernel), in parallel.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <optional>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "emulation/attention/flash2_split.hpp"
#include "emulation/attention/flash2_steps.hpp"
#include "emulation/attention/flash3_steps.hpp"
#include "emulation/attention/sage2_sm90_steps.hpp"
#include "emulation/attention/forward_operands.hpp"
#include "emulation/attention/pipeline.hpp"
#include "emulation/convert.hpp"
#include "emulation/layout.hpp"
#include "emulation/mma/gemm.hpp"
#include "numerics/parallel.hpp"

namespace lowbit::attention {
using namespace detail;  // the operands (forward_operands.hpp)
namespace {

constexpr float kNegInf = steps::kNegativeInfinity;

// ---- the integer QK^T: exact s32 sums, as every integer MMA computes them --------------------------

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LOWBIT_ATTENTION_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LOWBIT_ATTENTION_CLONES
#endif

// out[r * cols + c] = sum_i a[r * depth + i] * b[c * depth + i].
LOWBIT_ATTENTION_CLONES void integer_products(const std::int16_t* a, int rows, const std::int16_t* b, int cols, int depth,
                                              std::int32_t* out) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::int16_t* x = a + std::ptrdiff_t(r) * depth;
      const std::int16_t* y = b + std::ptrdiff_t(c) * depth;
      std::int32_t sum = 0;
      for (int i = 0; i < depth; ++i) sum += std::int32_t(x[i]) * std::int32_t(y[i]);
      out[std::ptrdiff_t(r) * cols + c] = sum;
    }
}

// c + a . b as a chain of fp32 fmas (compiled for FMA where the CPU has it: one instruction
// instead of a libm call; fma is correctly rounded either way).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("fma", "default")))
#endif
float fma_chain(const float* a, const float* b, std::ptrdiff_t b_stride, int n, float c) {
  for (int i = 0; i < n; ++i) c = std::fma(a[i], b[std::ptrdiff_t(i) * b_stride], c);
  return c;
}

// One product of values: the fp32 fma chain from c, or the instruction's accumulation.
float value_dot(const std::optional<mma::WideAccumulation>& wide, const float* a, const float* b, std::ptrdiff_t b_stride,
                int n, float c) {
  return wide ? wide->dot(a, b, b_stride, n, c) : fma_chain(a, b, b_stride, n, c);
}

// ---- one block of queries -------------------------------------------------------------------------------

float accumulator_value(const Format& f, std::uint32_t bits) {
  if (f == formats::s32) return float(std::int32_t(bits));  // exact: the sums stay below 2^24 (validate)
  return f == formats::fp16 ? float(decode(formats::fp16, bits)) : std::bit_cast<float>(bits);
}

// P's columns and V's rows as a kernel that keeps P in registers feeds each 32-key k step (p-keys=registers).
void order_keys_as_registers(MatrixCode& p, MatrixCode& v) {
  static constexpr layout::AccumulatorToA8 kMap = layout::accumulator_to_a8(layout::AccumulatorToA8::kGroupColumns);
  static_assert(kMap.consistent);
  constexpr int kStep = layout::AccumulatorToA8::kGroupColumns;
  const MatrixCode p_keys = p, v_keys = v;
  for (int first = 0; first + kStep <= p.cols(); first += kStep)
    for (int c = 0; c < kStep; ++c) {
      p.col(first + c) = p_keys.col(first + kMap.key_of_column[std::size_t(c)]);
      v.row(first + c) = v_keys.row(first + kMap.key_of_column[std::size_t(c)]);
    }
}

// A lane's share of a row's block sum: its columns (lane_of_column) in column order, as a tree.
float lane_sum(const float* p, int block_kv, int lane) {
  float v[64];
  int n = 0;
  for (int c = 0; c < block_kv; ++c)
    if (steps::lane_of_column(c) == lane) v[n++] = p[c];
  switch (n) {
    case 2: return steps::tree_sum<2>(v);
    case 4: return steps::tree_sum<4>(v);
    case 8: return steps::tree_sum<8>(v);
    case 16: return steps::tree_sum<16>(v);
    case 32: return steps::tree_sum<32>(v);
    case 64: return steps::tree_sum<64>(v);
  }
  throw std::logic_error("lane_sum: block_kv " + std::to_string(block_kv) + " was not validated");
}

// P as the P V instruction reads it, and the factor its result is multiplied by (per row).
struct PBlock {
  MatrixCode codes;             // rows x block_kv
  MatrixCode scales;            // rows x (block_kv / block): block-scaled P
  std::vector<float> factor;    // per row; empty: none
  std::vector<float> values;    // rows x block_kv, products of values: a code times its block scale (fp32: P)
};

void p_codes(const Pipeline& pl, const MatrixF& p, bool values, PBlock& out) {
  const int rows = int(p.rows()), cols = int(p.cols());
  out.factor.clear();
  switch (pl.p.scale) {
    case PScale::static_exponent:
      if (pl.p.format == formats::fp32) {
        out.values.assign(p.data(), p.data() + p.size());
        return;
      }
      out.codes.resize(rows, cols);
      if (pl.p.format == formats::e4m3) {
        for (Eigen::Index i = 0; i < p.size(); ++i) out.codes.data()[i] = steps::e4m3_code(p.data()[i]);
      } else {  // cvt.rn(.satfinite) of fp16, bf16, e5m2, ...; integers (cvt.rni.sat, or cvt.rzi.sat)
        encode(pl.p.format, std::span<const float>(p.data(), std::size_t(p.size())),
               std::span<Code>(out.codes.data(), std::size_t(out.codes.size())), {pl.p.rounding, Overflow::saturate});
      }
      break;
    case PScale::per_block: {
      quant::QuantSpec spec;
      spec.element = pl.p.format;
      spec.conversion.rounding = pl.p.rounding;
      const quant::QuantizedTensor t = quant::quantize(p, spec, "P");
      out.codes = t.codes;
      out.factor.assign(std::size_t(rows), t.scales[0]);
      break;
    }
    case PScale::two_level:
    case PScale::microscale: {
      const quant::QuantizedTensor t = quant::quantize(p, pl.p.block_spec(), "P");
      const int block = t.spec.grouping.col_block;
      out.codes = t.codes;
      out.scales.resize(rows, cols / block);
      for (int r = 0; r < rows; ++r)
        for (int g = 0; g < cols / block; ++g) out.scales(r, g) = t.scale_codes[std::size_t(t.group_of(r, g * block))];
      if (pl.p.scale == PScale::two_level) {
        out.factor.resize(std::size_t(rows));
        for (int r = 0; r < rows; ++r) out.factor[std::size_t(r)] = t.outer_of(r);
      }
      break;
    }
  }
  if (!values) return;
  const Format scale_format = pl.p.block_spec().scale.format;
  const int block = out.scales.size() ? cols / int(out.scales.cols()) : 0;
  out.values.resize(std::size_t(p.size()));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      float x = float(decode(pl.p.format, out.codes(r, c)));
      if (block) x = steps::mul_rn(x, float(decode(scale_format, out.scales(r, c / block))));
      out.values[std::size_t(r) * std::size_t(cols) + std::size_t(c)] = x;
    }
}

struct RowState {
  float m = kNegInf, offset = kNegInf;
  float lanes[steps::kLanesPerRow] = {};
};

// Runs one block of queries; returns the multiply-accumulates it emulated.
std::uint64_t run_query_block(const Context& cx, const PreparedQ& pq, const PreparedKv& kv, int block, float* out,
                              float* lse) {
  const Pipeline& pl = cx.pipeline;
  const Shape& sh = cx.shape;
  const int bq = pl.tiling.block_q, bkv = pl.tiling.block_kv;
  const int first_row = block * bq, rows = std::min(bq, sh.tokens - first_row);
  const int last_row = first_row + rows - 1;
  const int kv_blocks = sh.keys_padded / bkv;
  const int kv_begin = cx.kv_block_begin, kv_end = cx.kv_block_end < 0 ? kv_blocks : std::min(cx.kv_block_end, kv_blocks);
  const int dv = sh.value_dim;

  const auto n_rows = static_cast<std::size_t>(rows), n_keys = static_cast<std::size_t>(bkv);
  std::vector<RowState> state(n_rows);
  std::vector<float> o(n_rows * std::size_t(dv), 0.0f), alpha(n_rows), delta(n_keys);
  MatrixF s(rows, bkv), p(rows, bkv);
  // Fused exponent argument: s keeps the accumulators (exact) and pair_scale their fused scales;
  // flash2 and flash3 keep the raw accumulators (their scale is one per head); sage2-sm90 too, with
  // its per-pair scale in sage2_scale (the last block: the dequantized scores and the plain scale).
  const bool flash2 = pl.softmax == Softmax::flash2, flash3 = pl.softmax == Softmax::flash3;
  const bool sage2 = sage2_released(pl.softmax);
  const int sage2_dequantized =
      pl.softmax == Softmax::sage2_sm89 ? sage2_sm90::kDequantizedBlocksSm89 : sage2_sm90::kDequantizedBlocksSm90;
  const bool fused = pl.exponential.fused() && !flash2 && !flash3 && !sage2;
  // row-sum=pv: l is lanes[0], the P V instruction's sum of P's codes (a column of ones) flushed as o.
  const bool row_sum_pv = pl.row_sum == steps::RowSum::pv;
  // flash3: the kernel's descales are the operands' per-tensor scales times the stage's.
  const float flash3_offset = pl.p.log2_scale;
  const float flash3_scale =
      flash3 ? flash3::scale_log2(sh.head_dim, steps::mul_rn(row_scale(pq.q.tensor, pl.q, 0), kv.descale.q),
                                  steps::mul_rn(row_scale(kv.k.tensor, pl.k, 0), kv.descale.k))
             : 0.0f;
  const float flash3_v_descale = flash3 ? steps::mul_rn(kv.v_scale[0], kv.descale.v) : 0.0f;
  MatrixF pair_scale(fused ? rows : 0, fused ? bkv : 0);
  MatrixF sage2_scale(sage2 ? rows : 0, sage2 ? bkv : 0);
  const float sage2_scale_log2 = sage2 ? sage2_sm90::softmax_scale_log2(sh.head_dim) : 0.0f;
  const auto put_score = [&](int r, int c, float acc, float scale) {
    if (flash2 || flash3 || sage2) {
      s(r, c) = acc;
      return;
    }
    if (!fused) {
      s(r, c) = steps::dequantize_score(acc, scale);
      return;
    }
    s(r, c) = acc;
    pair_scale(r, c) = steps::fused_scale(scale);
  };
  std::vector<std::int32_t> s_int(n_rows * n_keys);
  PBlock pb;
  std::uint64_t macs = 0;
  const MatrixCode q_codes = cx.qk_values || cx.qk_integer ? MatrixCode() : MatrixCode(pq.operand.codes.middleRows(first_row, rows));
  const MatrixCode q_scales = pq.operand.scale_codes.size() ? MatrixCode(pq.operand.scale_codes.middleRows(first_row, rows)) : MatrixCode();

  const auto block_of_step = [&](int step) { return pl.tiling.kv_order == KvOrder::ascending ? step : kv_blocks - 1 - step; };
  const auto runs = [&](int kb) {
    const int first_key = kb * bkv;
    return kb >= kv_begin && kb < kv_end &&  // not another split's
           first_key < sh.keys && !(cx.causal && first_key > last_row + cx.causal_offset);  // not every key masked
  };
  // SageAttention2's kernels run the KV blocks up to their query tile's end, its padded rows included
  // (causal: keys below min(keys, first_row + bq)): with fewer queries than keys that can be a block past
  // the last real row's, all masked (it changes no value), but it counts among the last blocks that
  // dequantize their scores first.
  const int sage2_last_block = ((cx.causal ? std::min(sh.keys, first_row + bq + cx.causal_offset) : sh.keys) - 1) / bkv;

  for (int step = 0; step < kv_blocks; ++step) {
    const int kb = block_of_step(step);
    const int first_key = kb * bkv;
    if (!runs(kb)) continue;
    macs += std::uint64_t(rows) * std::uint64_t(bkv) * std::uint64_t(sh.depth + dv);

    // 1. S = Q K^T, dequantized into log2 units (fused: the accumulators and their scales).
    const auto pair_scale_of = [&](int r, int c) {
      return steps::score_scale(pq.row_scale[std::size_t(first_row + r)], kv.k_scale[std::size_t(first_key + c)]);
    };
    if (cx.qk_integer) {
      integer_products(pq.operand.ints.data() + std::size_t(first_row) * std::size_t(sh.depth), rows,
                       kv.k_operand.ints.data() + std::size_t(first_key) * std::size_t(sh.depth), bkv, sh.depth,
                       s_int.data());
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < bkv; ++c)
          put_score(r, c, float(s_int[std::size_t(r * bkv + c)]), pair_scale_of(r, c));  // |acc| < 2^24: exact
    } else if (cx.qk_values) {
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < bkv; ++c) {
          const float* x = pq.operand.floats.data() + std::size_t(first_row + r) * std::size_t(sh.depth);
          const float* y = kv.k_operand.floats.data() + std::size_t(first_key + c) * std::size_t(sh.depth);
          const float acc = value_dot(cx.qk_wide, x, y, 1, sh.depth, 0.0f);
          put_score(r, c, acc, pair_scale_of(r, c));
        }
    } else {
      const MatrixCode b = kv.k_codes_t.middleCols(first_key, bkv);
      const MatrixCode zero = MatrixCode::Zero(rows, bkv);
      const MatrixCode b_scales = kv.k_scales_t.size() ? MatrixCode(kv.k_scales_t.middleCols(first_key, bkv)) : MatrixCode();
      const MatrixCode d = mma::gemm(*cx.qk, {q_codes, b, zero, q_scales.size() ? &q_scales : nullptr,
                                              b_scales.size() ? &b_scales : nullptr});
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < bkv; ++c)
          put_score(r, c, accumulator_value(cx.qk->atom.d, d(r, c)), pair_scale_of(r, c));
    }
    if (sage2) {  // the kernel's last iterations dequantize the scores first (sage2_sm90_steps.hpp)
      const bool dequantized_first = kb > sage2_last_block - sage2_dequantized;
      for (int r = 0; r < rows; ++r) {
        const float q_scale = row_scale(pq.q.tensor, pl.q, first_row + r);
        for (int c = 0; c < bkv; ++c) {
          const float dequantization = sage2_sm90::dequantization(q_scale, kv.k_scale[std::size_t(first_key + c)]);
          if (dequantized_first) s(r, c) = flash3::mul_ftz(s(r, c), dequantization);
          sage2_scale(r, c) = dequantized_first ? sage2_scale_log2 : steps::mul_rn(sage2_scale_log2, dequantization);
        }
      }
    }
    if (pl.smoothing.q) {
      const int qblock = first_row / bq;  // Q's smoothing blocks are its thread blocks
      for (int c = 0; c < bkv; ++c) {
        float acc = 0;
        if (first_key + c < sh.keys)
          for (int i = 0; i < sh.head_dim; ++i) acc = steps::fma_rn(pq.means(qblock, i), kv.k_smoothed(first_key + c, i), acc);
        delta[std::size_t(c)] = acc;
      }
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < bkv; ++c)
          s(r, c) = steps::add_score_correction(s(r, c), delta[std::size_t(c)], cx.softmax_scale_log2);
    }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < bkv; ++c) {
        const int key = first_key + c;
        if (key >= sh.keys || (cx.causal && key > first_row + r + cx.causal_offset)) s(r, c) = sage2 ? sage2_sm90::kMasked : kNegInf;
      }

    // 2-6. Online softmax, row by row.
    for (int r = 0; r < rows && flash2; ++r) {
      RowState& st = state[std::size_t(r)];
      float m = st.m;
      for (int c = 0; c < bkv; ++c) m = std::max(m, s(r, c));
      alpha[std::size_t(r)] = flash2::rescale(st.m, m, cx.softmax_scale_log2);
      const float scaled_max = flash2::scaled_max(m, cx.softmax_scale_log2);
      for (int c = 0; c < bkv; ++c) p(r, c) = flash2::probability(s(r, c), cx.softmax_scale_log2, scaled_max);
      for (int lane = 0; lane < steps::kLanesPerRow; ++lane)
        st.lanes[lane] = flash2::lane_sum(st.lanes[lane], alpha[std::size_t(r)], &p(r, 0), bkv, lane);
      st.m = m;
    }
    for (int r = 0; r < rows && flash3; ++r) {
      RowState& st = state[std::size_t(r)];
      float m = st.m;
      for (int c = 0; c < bkv; ++c) m = std::max(m, s(r, c));
      alpha[std::size_t(r)] = flash3::rescale(st.m, m, flash3_scale);
      const float scaled_max = flash3::scaled_max(m, flash3_scale, flash3_offset);
      for (int c = 0; c < bkv; ++c) p(r, c) = flash3::probability(s(r, c), flash3_scale, scaled_max);
      for (int lane = 0; lane < steps::kLanesPerRow; ++lane)
        st.lanes[lane] = flash2::lane_sum(st.lanes[lane], alpha[std::size_t(r)], &p(r, 0), bkv, lane);
      st.m = m;
    }
    for (int r = 0; r < rows && sage2; ++r) {
      RowState& st = state[std::size_t(r)];
      const float old_max = st.m == kNegInf ? sage2_sm90::kMasked : st.m;
      float m = old_max;
      for (int lane = 0; lane < steps::kLanesPerRow; ++lane) {
        float raw = sage2_sm90::kMasked;
        for (int c = 2 * lane; c < bkv; c += 8) raw = std::max({raw, s(r, c), s(r, c + 1)});
        m = std::max(m, sage2_sm90::lane_max(raw, sage2_scale(r, 2 * lane), pl.p.log2_scale));
      }
      alpha[std::size_t(r)] = sage2_sm90::rescale(old_max, m);
      for (int c = 0; c < bkv; ++c) p(r, c) = sage2_sm90::probability(s(r, c), sage2_scale(r, c), m);
      for (int lane = 0; lane < steps::kLanesPerRow; ++lane)
        st.lanes[lane] = sage2_sm90::lane_sum(st.lanes[lane], alpha[std::size_t(r)], &p(r, 0), bkv, lane);
      st.m = m;
    }
    for (int r = 0; r < rows && !flash2 && !flash3 && !sage2; ++r) {
      RowState& st = state[std::size_t(r)];
      float m = st.m;
      for (int c = 0; c < bkv; ++c)
        m = std::max(m, fused ? steps::dequantize_score(s(r, c), pair_scale(r, c)) : s(r, c));
      const float offset = steps::row_offset(m, pl.p.log2_scale);
      alpha[std::size_t(r)] = pl.exponential.rescale(st.offset, offset);
      for (int c = 0; c < bkv; ++c)
        p(r, c) = fused ? pl.exponential.fused_probability(s(r, c), pair_scale(r, c), offset)
                        : pl.exponential.probability(s(r, c), offset);
      for (int lane = 0; lane < steps::kLanesPerRow && !row_sum_pv; ++lane)
        st.lanes[lane] = steps::update_row_sum(st.lanes[lane], alpha[std::size_t(r)], lane_sum(&p(r, 0), bkv, lane));
      st.m = m;
      st.offset = steps::carried_offset(m, offset);
    }

    // 7. P codes.
    p_codes(pl, p, cx.pv_values, pb);

    // 8-9. P V into o.
    const int first_v = first_key;
    if (cx.pv_values) {
      // Flush intervals as the instruction's (fp32-fma without one: the whole block).
      const int chunk = cx.pv && pl.accumulation.mmas_per_flush > 0 ? pl.accumulation.mmas_per_flush * cx.pv->atom.k : bkv;
      const bool in_place = pl.accumulation.mode == Accumulation::in_place;
      for (int r = 0; r < rows; ++r) {
        float* orow = &o[std::size_t(r) * std::size_t(dv)];
        const float a = alpha[std::size_t(r)];
        const float* prow = &pb.values[std::size_t(r) * std::size_t(bkv)];
        for (int c = 0; c < dv; ++c) {
          const float* vcol = &kv.v_operand.floats[std::size_t(first_v) * std::size_t(dv) + std::size_t(c)];
          for (int j0 = 0; j0 < bkv; j0 += chunk) {
            const int width = std::min(chunk, bkv - j0);
            float acc = in_place ? steps::mul_rn(orow[c], a) : 0.0f;
            acc = value_dot(cx.pv_wide, prow + j0, vcol + std::ptrdiff_t(j0) * dv, dv, width, acc);
            if (in_place) {
              orow[c] = acc;
              continue;
            }
            if (!pb.factor.empty()) acc = steps::mul_rn(acc, pb.factor[std::size_t(r)]);
            orow[c] = steps::accumulate_output(orow[c], j0 == 0 ? a : 1.0f, acc);
          }
        }
      }
      continue;
    }
    const mma::Instruction& pv = *cx.pv;
    if (pl.accumulation.mode == Accumulation::in_place) {
      MatrixCode c_bits(rows, dv);
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < dv; ++c)
          c_bits(r, c) = std::bit_cast<std::uint32_t>(
              (flash3 ? flash3::mul_ftz : steps::mul_rn)(o[std::size_t(r) * std::size_t(dv) + std::size_t(c)], alpha[std::size_t(r)]));
      MatrixCode b = kv.v_operand.codes.middleRows(first_v, bkv);
      MatrixCode a = pb.codes;
      if (pl.p_keys == PKeys::registers) order_keys_as_registers(a, b);
      const MatrixCode d = mma::gemm(pv, {a, b, c_bits});
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < dv; ++c) o[std::size_t(r) * std::size_t(dv) + std::size_t(c)] = std::bit_cast<float>(d(r, c));
      continue;
    }
    const int chunk = pl.accumulation.mmas_per_flush > 0 ? pl.accumulation.mmas_per_flush * pv.atom.k : bkv;
    for (int j0 = 0; j0 < bkv; j0 += chunk) {
      const int width = std::min(chunk, bkv - j0);
      MatrixCode a = pb.codes.middleCols(j0, width);
      MatrixCode b = kv.v_operand.codes.middleRows(first_v + j0, width);
      if (pl.p_keys == PKeys::registers) order_keys_as_registers(a, b);
      const MatrixCode zero = MatrixCode::Zero(rows, dv);
      MatrixCode a_scales, b_scales;
      if (pv.atom.block_scaled()) {
        a_scales = pb.scales.middleCols(j0 / pv.atom.scale_block, width / pv.atom.scale_block);
        b_scales = kv.v_scales.middleRows((first_v + j0) / pv.atom.scale_block, width / pv.atom.scale_block);
      }
      const MatrixCode d = mma::gemm(pv, {a, b, zero, pv.atom.block_scaled() ? &a_scales : nullptr,
                                          pv.atom.block_scaled() ? &b_scales : nullptr});
      if (row_sum_pv) {
        const MatrixCode ones = MatrixCode::Constant(width, 1, encode(pv.atom.b, 1.0));
        const MatrixCode sums = mma::gemm(pv, {a, ones, MatrixCode::Zero(rows, 1)});
        for (int r = 0; r < rows; ++r) {
          float& l = state[std::size_t(r)].lanes[0];
          l = steps::accumulate_output(l, j0 == 0 ? alpha[std::size_t(r)] : 1.0f, accumulator_value(pv.atom.d, sums(r, 0)));
        }
      }
      for (int r = 0; r < rows; ++r) {
        const float a_r = j0 == 0 ? alpha[std::size_t(r)] : 1.0f;  // later intervals of the block add plainly
        for (int c = 0; c < dv; ++c) {
          float R = accumulator_value(pv.atom.d, d(r, c));
          if (!pb.factor.empty()) R = steps::mul_rn(R, pb.factor[std::size_t(r)]);
          float& oc = o[std::size_t(r) * std::size_t(dv) + std::size_t(c)];
          oc = sage2 ? sage2_sm90::accumulate(oc, a_r, R) : steps::accumulate_output(oc, a_r, R);
        }
      }
    }
  }

  // The end of each row.
  for (int r = 0; r < rows; ++r) {
    const RowState& st = state[std::size_t(r)];
    const float l = flash2 || flash3 ? flash2::combine_lanes(st.lanes[0], st.lanes[1], st.lanes[2], st.lanes[3])
                    : row_sum_pv     ? st.lanes[0]
                                     : steps::combine_lanes(st.lanes[0], st.lanes[1], st.lanes[2], st.lanes[3]);
    if (flash3) {
      const float factor = flash3::output_scale(l, flash3_v_descale);
      for (int c = 0; c < dv; ++c)
        out[std::size_t(first_row + r) * std::size_t(dv) + std::size_t(c)] =
            flash3::mul_ftz(o[std::size_t(r) * std::size_t(dv) + std::size_t(c)], factor);
      lse[first_row + r] = flash3::log_sum_exp(st.m, l, flash3_scale, flash3_offset);
      continue;
    }
    if (sage2) {
      for (int c = 0; c < dv; ++c)
        out[std::size_t(first_row + r) * std::size_t(dv) + std::size_t(c)] =
            sage2_sm90::output(o[std::size_t(r) * std::size_t(dv) + std::size_t(c)], l, kv.v_scale[std::size_t(c)]);
      lse[first_row + r] = sage2_sm90::log_sum_exp(st.m, l);
      continue;
    }
    const float inverse = flash2 ? flash2::inverse_row_sum(l) : steps::inverse_row_sum(l);
    for (int c = 0; c < dv; ++c) {
      float y = steps::normalize_output(o[std::size_t(r) * std::size_t(dv) + std::size_t(c)], inverse,
                                        kv.v_scale[std::size_t(c)]);
      if (pl.smoothing.v) y = steps::add_value_mean(y, kv.v.mean[std::size_t(c)]);
      out[std::size_t(first_row + r) * std::size_t(dv) + std::size_t(c)] = y;
    }
    lse[first_row + r] = flash2 ? flash2::log_sum_exp(st.m, l, cx.softmax_scale, cx.kv_block_end >= 0 || cx.kv_block_begin > 0)
                                : pl.exponential.log_sum_exp(st.offset, l, pq.lse_bias[std::size_t(first_row + r)]);
  }
  return macs;
}

}  // namespace

ForwardResult ForwardResult::shaped(const Tensor4& q, const Tensor4& k, const Tensor4& v, const Format& output_format) {
  ForwardResult r;
  r.batch = q.batch;
  r.heads = q.heads;
  r.kv_heads = k.heads;
  r.tokens = q.tokens;
  r.keys = k.tokens;
  r.head_dim = q.dim;
  r.value_dim = v.dim;
  r.output_format = output_format;
  return r;
}

Tensor4 ForwardResult::rounded_output() const {
  Tensor4 t(batch, heads, tokens, value_dim);
  for (std::size_t i = 0; i < output_codes.size(); ++i) t.values[i] = float(decode(output_format, output_codes[i]));
  return t;
}

ForwardResult forward(const Pipeline& pl, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                      const ForwardOptions& options) {
  check_arguments(pl, q, k, v, options);
  if (pl.tiling.kv_block(options.causal) != pl.tiling.block_kv)  // the kernel's causal tile
    return forward(tiled_pipeline(pl, options.causal), q, k, v, options);
  const bool flash2 = pl.softmax == Softmax::flash2;
  if (flash2 && !options.split_pass()) {
    const int splits = flash2::split_count(q.batch, q.heads, k.heads, q.tokens, k.tokens, q.dim, pl.tiling.sms);
    if (splits > 1) return flash2::split_forward(pl, q, k, v, options, splits);
  }
  const Context cx = make_context(pl, q, k, v, options);

  ForwardResult result = ForwardResult::shaped(q, k, v, pl.output);
  result.output.assign(std::size_t(q.batch) * std::size_t(q.heads) * std::size_t(q.tokens) * std::size_t(v.dim), 0.0f);
  result.lse.assign(std::size_t(q.batch) * std::size_t(q.heads) * std::size_t(q.tokens), 0.0f);
  if (options.keep_operands) {
    result.q.resize(std::size_t(q.batch) * std::size_t(q.heads));
    result.k.resize(std::size_t(q.batch) * std::size_t(k.heads));
    result.v.resize(result.k.size());
  }

  std::atomic<std::uint64_t> macs{0};
  const int group = q.heads / k.heads;
  const int q_blocks = cx.shape.tokens_padded / pl.tiling.block_q;
  for (int b = 0; b < q.batch; ++b)
    for (int g = 0; g < k.heads; ++g) {
      PreparedGroup prepared = prepare_group(cx, q, k, v, options, b, g);
      const PreparedKv& kv = prepared.kv;
      std::vector<PreparedQ>& pqs = prepared.q;
      parallel_for(std::size_t(group) * std::size_t(q_blocks), options.threads, [&](std::size_t item, unsigned) {
        const int i = int(item) / q_blocks, block = int(item) % q_blocks, h = g * group + i;
        const std::size_t head = std::size_t(b) * std::size_t(q.heads) + std::size_t(h);
        macs += run_query_block(cx, pqs[std::size_t(i)], kv, block,
                                result.output.data() + head * std::size_t(q.tokens) * std::size_t(v.dim),
                                result.lse.data() + head * std::size_t(q.tokens));
      });
      if (options.keep_operands) {
        for (int i = 0; i < group; ++i)
          result.q[std::size_t(b) * std::size_t(q.heads) + std::size_t(g * group + i)] = std::move(pqs[std::size_t(i)].q);
        result.k[std::size_t(b) * std::size_t(k.heads) + std::size_t(g)] = kv.k;
        result.v[std::size_t(b) * std::size_t(k.heads) + std::size_t(g)] = kv.v;
      }
    }

  result.macs = macs;
  round_output(result);
  return result;
}

}  // namespace lowbit::attention
