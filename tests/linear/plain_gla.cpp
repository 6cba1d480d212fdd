#include "tests/linear/plain_gla.hpp"

#include <bit>
#include <cstdint>

#include "emulation/convert.hpp"
#include "emulation/linear/linear_steps.hpp"
#include "emulation/mma/gemm.hpp"

namespace lowbit::test {
namespace {

namespace st = lowbit::linear::steps;

Code cast(const Format& f, float x) {
  return encode(f, double(x), {.rounding = Rounding::nearest_even, .overflow = f.has_inf() ? Overflow::inf : Overflow::saturate});
}

// The codes of a quantized tensor's row, or one encode() per value for a cast; and its row scale.
struct Row {
  std::vector<Code> codes;
  float scale = 1;
};

Row quantized_row(const quant::QuantizedTensor& t, int r) {
  Row out{{}, t.scales[std::size_t(t.group_of(r, 0))]};
  for (int c = 0; c < t.padded_cols; ++c) out.codes.push_back(t.codes(r, c));
  return out;
}

Row cast_row(const Format& f, const float* x, int n) {
  Row out;
  for (int i = 0; i < n; ++i) out.codes.push_back(cast(f, x[i]));
  return out;
}

// Mean of each run of `block` rows (0: all), summed in double in row order, rounded once; x becomes
// the residual.
MatrixF subtract_means(MatrixF& x, int block) {
  const int rows = int(x.rows()), span = block > 0 ? block : rows;
  MatrixF means((rows + span - 1) / span, x.cols());
  for (int b = 0; b * span < rows; ++b) {
    const int first = b * span, last = std::min(rows, first + span);
    for (int c = 0; c < x.cols(); ++c) {
      double total = 0;
      for (int r = first; r < last; ++r) total += x(r, c);
      means(b, c) = float(total / (last - first));
      for (int r = first; r < last; ++r) x(r, c) = x(r, c) - means(b, c);
    }
  }
  return means;
}

// One row of A (depth codes) against columns of B (each depth codes): M = 1 through the model.
std::vector<std::uint32_t> row_product(const mma::Instruction& in, const std::vector<Code>& a,
                                       const std::vector<std::vector<Code>>& b_columns,
                                       const std::vector<std::uint32_t>& c, int mmas_per_flush = 0) {
  const Eigen::Index depth = Eigen::Index(a.size()), n = Eigen::Index(b_columns.size());
  MatrixCode am(1, depth), bm(depth, n), cm(1, n);
  for (Eigen::Index i = 0; i < depth; ++i) am(0, i) = a[std::size_t(i)];
  for (Eigen::Index j = 0; j < n; ++j) {
    for (Eigen::Index i = 0; i < depth; ++i) bm(i, j) = b_columns[std::size_t(j)][std::size_t(i)];
    cm(0, j) = c[std::size_t(j)];
  }
  const MatrixCode d = mma::gemm(in, {am, bm, cm}, mma::KLoop{mmas_per_flush, true});
  return std::vector<std::uint32_t>(d.data(), d.data() + n);
}

std::int64_t integer_dot(const Format& f, const std::vector<Code>& a, const std::vector<Code>& b) {
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::int64_t(decode(f, a[i])) * std::int64_t(decode(f, b[i]));
  return sum;
}

std::vector<Code> padded(std::vector<Code> codes, std::size_t depth) {
  codes.resize(depth, 0);
  return codes;
}

}  // namespace

linear::ForwardResult plain_gla(const linear::Pipeline& p, const MatrixF& q, const MatrixF& k, const MatrixF& v,
                                const MatrixF& log_alpha, const MatrixF* initial_state) {
  const int tokens = int(q.rows()), dk = int(q.cols()), dv = int(v.cols());
  const int C = p.shape.chunk, c = p.shape.sub_chunk;
  const auto score_in = p.score_instruction(), value_in = p.value_instruction(dv), state_in = p.state_instruction(dv);
  const auto q_spec = p.score_spec(quant::Operand::q), k_spec = p.score_spec(quant::Operand::k);
  const auto p_spec = p.p_spec(), v_spec = p.v_spec();
  linear::ForwardResult r{MatrixF(tokens, dv), MatrixF(tokens, dv), MatrixF::Zero(tokens, C),
                          initial_state ? *initial_state : MatrixF::Zero(dk, dv)};
  for (int first = 0; first < tokens; first += C) {
    const int L = std::min(C, tokens - first);
    MatrixF g(L, dk);
    for (int x = 0; x < dk; ++x) {
      float sum = 0;
      for (int t = 0; t < L; ++t) g(t, x) = sum = t == 0 ? st::log2_gate(log_alpha(first, x)) : st::gate_sum(sum, st::log2_gate(log_alpha(first + t, x)));
    }
    MatrixF P = MatrixF::Zero(L, L);
    // Scores, one query sub-chunk at a time (its quantization groups span its rows).
    for (int i = 0; i * c < L; ++i) {
      const int qi = i * c, qn = std::min(c, L - qi), keys = qi;
      for (int t = qi; t < qi + qn; ++t)
        for (int s = qi; s <= t; ++s) P(t, s) = st::diagonal_score(&q(first + t, 0), &g(t, 0), &k(first + s, 0), &g(s, 0), dk);
      if (i == 0) continue;
      MatrixF qg(qn, dk), kg(keys, dk);
      for (int t = 0; t < qn; ++t)
        for (int x = 0; x < dk; ++x) qg(t, x) = st::gated(q(first + qi + t, x), g(qi + t, x), g(qi, x));
      for (int s = 0; s < keys; ++s)
        for (int x = 0; x < dk; ++x) kg(s, x) = st::gated(k(first + s, x), g(qi, x), g(s, x));
      if (!score_in) {
        for (int t = 0; t < qn; ++t)
          for (int s = 0; s < keys; ++s) P(qi + t, s) = st::dot(&qg(t, 0), &kg(s, 0), dk);
        continue;
      }
      MatrixF q_res = qg, k_res = kg, q_mean, k_means;
      if (p.scores.smooth) {
        q_mean = subtract_means(q_res, 0);
        k_means = subtract_means(k_res, c);
      }
      std::optional<quant::QuantizedTensor> qq, kq;
      if (q_spec) {
        qq = quant::quantize_reference(q_res, *q_spec, "Q~");
        kq = quant::quantize_reference(k_res, *k_spec, "K~");
      }
      const auto q_row = [&](int t) { return qq ? quantized_row(*qq, t) : cast_row(score_in->atom.a, &q_res(t, 0), dk); };
      const auto k_row = [&](int s) { return kq ? quantized_row(*kq, s) : cast_row(score_in->atom.b, &k_res(s, 0), dk); };
      std::size_t depth = 0;
      std::vector<std::vector<Code>> k_cols;
      std::vector<float> k_scales;
      for (int s = 0; s < keys; ++s) {
        Row kr = k_row(s);
        depth = std::max(depth, kr.codes.size());
        k_cols.push_back(kr.codes);
        k_scales.push_back(kr.scale);
      }
      for (int t = 0; t < qn; ++t) {
        Row qr = q_row(t);
        depth = std::max(depth, qr.codes.size());
        qr.codes = padded(qr.codes, depth);
        for (auto& col : k_cols) col = padded(col, depth);
        std::vector<float> scores(static_cast<std::size_t>(keys));
        if (score_in->atom.d == formats::s32) {
          for (int s = 0; s < keys; ++s)
            scores[std::size_t(s)] = st::dequantize_score(std::int32_t(integer_dot(score_in->atom.a, qr.codes, k_cols[std::size_t(s)])),
                                                          st::score_scale(qr.scale, k_scales[std::size_t(s)]));
        } else {
          const auto d = row_product(*score_in, qr.codes, k_cols, std::vector<std::uint32_t>(std::size_t(keys), 0));
          for (int s = 0; s < keys; ++s) {
            const float acc = std::bit_cast<float>(d[std::size_t(s)]);
            scores[std::size_t(s)] = qq ? st::dequantize_score(acc, st::score_scale(qr.scale, k_scales[std::size_t(s)])) : acc;
          }
        }
        for (int s = 0; s < keys; ++s) {
          float score = scores[std::size_t(s)];
          if (p.scores.smooth)
            score = st::corrected_score(score, st::dot(&q_mean(0, 0), &k_res(s, 0), dk),
                                        p.scores.correction == quant::ScoreCorrection::full
                                            ? st::dot(&qg(t, 0), &k_means(s / c, 0), dk)
                                            : 0.0f);
          P(qi + t, s) = score;
        }
      }
    }
    r.scores.block(first, 0, L, L) = P;

    // P V, one query row at a time.
    const MatrixF v_chunk = v.middleRows(first, L);
    std::optional<quant::QuantizedTensor> pq, vq;
    if (p_spec) {
      pq = quant::quantize_reference(P, *p_spec, "P");
      vq = quant::quantize_reference(v_chunk, *v_spec, "V");
    }
    std::vector<std::vector<Code>> v_cols;
    if (value_in)
      for (int y = 0; y < dv; ++y) {
        std::vector<Code> col;
        for (int s = 0; s < L; ++s) col.push_back(vq ? vq->codes(s, y) : cast(value_in->atom.b, v_chunk(s, y)));
        v_cols.push_back(col);
      }
    for (int t = 0; t < L; ++t) {
      if (!value_in) {
        for (int y = 0; y < dv; ++y) {
          float acc = 0;
          for (int s = 0; s <= t; ++s) acc = st::fma_rn(P(t, s), v_chunk(s, y), acc);
          r.intra(first + t, y) = acc;
        }
        continue;
      }
      const Row pr = pq ? quantized_row(*pq, t) : cast_row(value_in->atom.a, &P(t, 0), L);
      const auto d = row_product(*value_in, pr.codes, v_cols, std::vector<std::uint32_t>(std::size_t(dv), 0), p.values.mmas_per_flush);
      for (int y = 0; y < dv; ++y) {
        const float acc = std::bit_cast<float>(d[std::size_t(y)]);
        r.intra(first + t, y) = pq ? st::dequantize_value(acc, pr.scale, vq->scales[std::size_t(vq->group_of(0, y))]) : acc;
      }
    }

    // Inter-chunk output and the state, one row at a time.
    const MatrixF state = r.state;
    std::vector<std::vector<Code>> s_cols;
    if (state_in)
      for (int y = 0; y < dv; ++y) {
        std::vector<Code> col;
        for (int x = 0; x < dk; ++x) col.push_back(cast(state_in->atom.b, state(x, y)));
        s_cols.push_back(col);
      }
    for (int t = 0; t < L; ++t) {
      std::vector<float> a(static_cast<std::size_t>(dk));
      for (int x = 0; x < dk; ++x) a[std::size_t(x)] = st::gated(q(first + t, x), g(t, x), 0.0f);
      std::vector<float> inter(static_cast<std::size_t>(dv));
      if (state_in) {
        const auto d = row_product(*state_in, cast_row(state_in->atom.a, a.data(), dk).codes, s_cols,
                                   std::vector<std::uint32_t>(std::size_t(dv), 0));
        for (int y = 0; y < dv; ++y) inter[std::size_t(y)] = std::bit_cast<float>(d[std::size_t(y)]);
      } else {
        for (int y = 0; y < dv; ++y) {
          float acc = 0;
          for (int x = 0; x < dk; ++x) acc = st::fma_rn(a[std::size_t(x)], state(x, y), acc);
          inter[std::size_t(y)] = acc;
        }
      }
      for (int y = 0; y < dv; ++y) r.output(first + t, y) = st::add_outputs(inter[std::size_t(y)], r.intra(first + t, y));
    }
    std::vector<std::vector<Code>> v_state_cols;
    if (state_in)
      for (int y = 0; y < dv; ++y) {
        std::vector<Code> col;
        for (int s = 0; s < L; ++s) col.push_back(cast(state_in->atom.b, v_chunk(s, y)));
        v_state_cols.push_back(col);
      }
    for (int x = 0; x < dk; ++x) {
      const float factor = st::decay(g(L - 1, x), 0.0f);
      std::vector<float> kd(static_cast<std::size_t>(L));
      for (int s = 0; s < L; ++s) kd[std::size_t(s)] = st::gated(k(first + s, x), g(L - 1, x), g(s, x));
      std::vector<std::uint32_t> decayed(static_cast<std::size_t>(dv));
      for (int y = 0; y < dv; ++y) decayed[std::size_t(y)] = std::bit_cast<std::uint32_t>(st::mul_rn(state(x, y), factor));
      if (state_in) {
        const auto d = row_product(*state_in, cast_row(state_in->atom.a, kd.data(), L).codes, v_state_cols, decayed);
        for (int y = 0; y < dv; ++y) r.state(x, y) = std::bit_cast<float>(d[std::size_t(y)]);
      } else {
        for (int y = 0; y < dv; ++y) {
          float acc = std::bit_cast<float>(decayed[std::size_t(y)]);
          for (int s = 0; s < L; ++s) acc = st::fma_rn(kd[std::size_t(s)], v_chunk(s, y), acc);
          r.state(x, y) = acc;
        }
      }
    }
  }
  return r;
}

}  // namespace lowbit::test
