#include "emulation/attention/backward.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <span>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/pipeline.hpp"
#include "emulation/convert.hpp"
#include "emulation/mma/gemm.hpp"
#include "emulation/quant/quantize.hpp"
#include "numerics/nonfinite.hpp"
#include "numerics/parallel.hpp"

namespace lowbit::attention {
namespace {

constexpr const char* kF16Mma = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
constexpr float kNegInf = steps::kNegativeInfinity;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LOWBIT_BACKWARD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LOWBIT_BACKWARD_CLONES
#endif

// out[r * n + c] = sum_i a[r * depth + i] * b[c * depth + i], exact (|sum| < 127^2 * depth < 2^31).
LOWBIT_BACKWARD_CLONES void integer_products(const std::int32_t* a, int m, const std::int32_t* b, int n, int depth,
                                             std::int32_t* out) {
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c) {
      const std::int32_t* x = a + std::ptrdiff_t(r) * depth;
      const std::int32_t* y = b + std::ptrdiff_t(c) * depth;
      std::int32_t sum = 0;
      for (int i = 0; i < depth; ++i) sum += x[i] * y[i];
      out[std::ptrdiff_t(r) * n + c] = sum;
    }
}

// A tile as one product reads it (rows x depth, the contraction along the columns).
struct Tile {
  BackwardOperands kind = BackwardOperands::int8_per_block;
  int rows = 0, depth = 0;
  std::vector<std::int32_t> ints;  // INT8 codes' values
  std::vector<float> row_scale;    // per row
  MatrixCode codes;                // FP16 codes
};

Tile make_tile(const MatrixF& x, BackwardOperands kind, bool scale_per_row = false) {
  Tile t;
  t.kind = kind;
  t.rows = int(x.rows());
  t.depth = int(x.cols());
  if (kind == BackwardOperands::fp16) {
    t.codes.resize(x.rows(), x.cols());
    encode(formats::fp16, std::span<const float>(x.data(), std::size_t(x.size())),
           std::span<Code>(t.codes.data(), std::size_t(t.codes.size())), {Rounding::nearest_even, Overflow::inf});
    return t;
  }
  const quant::QuantSpec spec = quant::presets::int8(scale_per_row ? quant::grouping::per_token() : quant::grouping::per_tensor());
  const quant::QuantizedTensor q = quant::quantize(x, spec, "tile");
  t.ints.resize(std::size_t(t.rows) * std::size_t(t.depth));
  t.row_scale.resize(std::size_t(t.rows));
  for (int r = 0; r < t.rows; ++r) {
    t.row_scale[std::size_t(r)] = q.scales[std::size_t(q.group_of(r, 0))];
    for (int c = 0; c < t.depth; ++c)
      t.ints[std::size_t(r) * std::size_t(t.depth) + std::size_t(c)] = std::int32_t(decode(formats::int8, q.codes(r, c)));
  }
  return t;
}

// a (m x depth) times b (n x depth) transposed: m x n in fp32.
MatrixF product(const Tile& a, const Tile& b, const mma::Instruction& f16) {
  if (a.kind != b.kind || a.depth != b.depth) throw std::logic_error("sage_bwd: tiles of a product do not match");
  MatrixF out(a.rows, b.rows);
  if (a.kind == BackwardOperands::fp16) {
    const MatrixCode bt = b.codes.transpose();
    const MatrixCode zero = MatrixCode::Zero(a.rows, b.rows);
    const MatrixCode d = mma::gemm(f16, {a.codes, bt, zero}, {.mmas_per_flush = 0, .pad_k = true});
    for (Eigen::Index i = 0; i < d.size(); ++i) out.data()[i] = std::bit_cast<float>(d.data()[i]);
    return out;
  }
  std::vector<std::int32_t> sums(std::size_t(a.rows) * std::size_t(b.rows));
  integer_products(a.ints.data(), a.rows, b.ints.data(), b.rows, a.depth, sums.data());
  for (int r = 0; r < a.rows; ++r)
    for (int c = 0; c < b.rows; ++c)
      out(r, c) = steps::mul_rn(float(sums[std::size_t(r) * std::size_t(b.rows) + std::size_t(c)]),
                                steps::mul_rn(a.row_scale[std::size_t(r)], b.row_scale[std::size_t(c)]));
  return out;
}

void check_finite(const Tensor4& t, const char* name) {
  const auto r = scan_nonfinite(std::span<const float>(t.values));
  if (r.any())
    throw std::invalid_argument(fmt::format("{}: {} non-finite value{} (the first at index {}); inputs must be finite",
                                            name, r.count(), r.count() == 1 ? "" : "s", r.first_index));
}

}  // namespace

std::string BackwardBitComparison::text(std::string_view a_name, std::string_view b_name) const {
  if (differ == 0) return fmt::format("{}: {} equal", tensor, compared);
  return fmt::format("{}: {} of {} differ, the first at {}: {} {:#010x} vs {} {:#010x}", tensor, differ, compared, first,
                     a_name, first_a, b_name, first_b);
}

std::vector<BackwardBitComparison> compare_bits(const BackwardResult& a, const BackwardResult& b) {
  std::vector<BackwardBitComparison> out;
  for (const auto& [name, x, y] : {std::tuple{"O", &a.output, &b.output}, std::tuple{"LSE", &a.lse, &b.lse},
                                   std::tuple{"dQ", &a.dq, &b.dq}, std::tuple{"dK", &a.dk, &b.dk},
                                   std::tuple{"dV", &a.dv, &b.dv}}) {
    if (x->size() != y->size())
      throw std::invalid_argument(fmt::format("compare_bits: {} has {} values against {}", name, x->size(), y->size()));
    BackwardBitComparison c{name, x->size()};
    for (std::size_t i = 0; i < x->size(); ++i) {
      const auto p = std::bit_cast<std::uint32_t>((*x)[i]), q = std::bit_cast<std::uint32_t>((*y)[i]);
      if (p == q) continue;
      if (c.differ++ == 0) c.first = std::int64_t(i), c.first_a = p, c.first_b = q;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::optional<std::string> SageBwdConfig::validate() const {
  if (block_q < 1 || block_kv < 1) return fmt::format("tiles {} x {} must be positive", block_q, block_kv);
  return std::nullopt;
}

std::vector<std::string> sagebwd_presets() { return {"sagebwd", "sagebwd-int8-dp", "fp16"}; }

SageBwdConfig sagebwd_preset(const std::string& name) {
  SageBwdConfig c;
  c.name = name;
  if (name == "sagebwd") return c;
  if (name == "sagebwd-int8-dp") {
    c.dp = BackwardOperands::int8_per_block;
    return c;
  }
  if (name == "fp16") {
    c.qk = c.pv = c.dv = c.dp = c.dq = c.dk = BackwardOperands::fp16;
    return c;
  }
  throw std::invalid_argument("unknown backward preset '" + name + "' (sagebwd, sagebwd-int8-dp, fp16)");
}

BackwardResult sage_bwd(const SageBwdConfig& config, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                        const Tensor4& d_out, bool causal, unsigned threads) {
  if (auto why = config.validate()) throw std::invalid_argument("sage_bwd " + config.name + ": " + *why);
  if (k.batch != q.batch || v.batch != q.batch || k.heads != v.heads || q.heads % k.heads != 0 || k.tokens != v.tokens ||
      q.dim != k.dim || d_out.batch != q.batch || d_out.heads != q.heads || d_out.tokens != q.tokens || d_out.dim != v.dim)
    throw std::invalid_argument(fmt::format("sage_bwd: shapes do not fit: Q {}, K {}, V {}, dO {}", q.shape_text(),
                                            k.shape_text(), v.shape_text(), d_out.shape_text()));
  check_finite(q, "Q");
  check_finite(k, "K");
  check_finite(v, "V");
  check_finite(d_out, "dO");
  const mma::Instruction f16 = mma::find_instruction(config.arch, kF16Mma);
  const int N = q.tokens, keys = k.tokens, d = q.dim, dv = v.dim, group = q.heads / k.heads;
  const int bq = config.block_q, bkv = config.block_kv;
  const float scale_log2 = steps::softmax_scale_log2(d);                 // log2(e) / sqrt(d)
  const float inv_sqrt_d = float(1.0 / std::sqrt(double(d)));
  BackwardResult out;
  out.output.assign(std::size_t(q.batch) * std::size_t(q.heads) * std::size_t(N) * std::size_t(dv), 0.0f);
  out.lse.assign(std::size_t(q.batch) * std::size_t(q.heads) * std::size_t(N), 0.0f);
  out.dq.assign(q.size(), 0.0f);
  out.dk.assign(k.size(), 0.0f);
  out.dv.assign(v.size(), 0.0f);
  const int q_tiles = (N + bq - 1) / bq, k_tiles = (keys + bkv - 1) / bkv;

  // Scores of Q tile i and KV tile j in log2 units, masked.
  const auto scores = [&](const Tile& qt, const Tile& kt, int q0, int k0) {
    MatrixF s = product(qt, kt, f16);
    for (int r = 0; r < s.rows(); ++r)
      for (int c = 0; c < s.cols(); ++c)
        s(r, c) = causal && k0 + c > q0 + r ? kNegInf : steps::mul_rn(s(r, c), scale_log2);
    return s;
  };

  parallel_for(std::size_t(q.batch) * std::size_t(k.heads), threads, [&](std::size_t item, unsigned) {
    const int b = int(item) / k.heads, g = int(item) % k.heads;
    const MatrixF K = k.head(b, g), V = v.head(b, g);
    std::vector<Tile> k_tiles_qk(static_cast<std::size_t>(k_tiles));
    for (int j = 0; j < k_tiles; ++j) {
      const int k0 = j * bkv, n = std::min(bkv, keys - k0);
      k_tiles_qk[std::size_t(j)] = make_tile(K.middleRows(k0, n), config.qk);
    }
    MatrixF dK = MatrixF::Zero(keys, d), dV = MatrixF::Zero(keys, dv);
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const MatrixF Q = q.head(b, h), dO = d_out.head(b, h);
      std::vector<Tile> q_tiles_qk(static_cast<std::size_t>(q_tiles));
      for (int i = 0; i < q_tiles; ++i) {
        const int q0 = i * bq, n = std::min(bq, N - q0);
        q_tiles_qk[std::size_t(i)] = make_tile(Q.middleRows(q0, n), config.qk);
      }
      // Forward (Algorithm 2).
      MatrixF O = MatrixF::Zero(N, dv);
      std::vector<float> L(static_cast<std::size_t>(N));
      for (int i = 0; i < q_tiles; ++i) {
        const int q0 = i * bq, rows = std::min(bq, N - q0);
        std::vector<float> m(static_cast<std::size_t>(rows), kNegInf), l(static_cast<std::size_t>(rows), 0.0f);
        MatrixF o = MatrixF::Zero(rows, dv);
        for (int j = 0; j < k_tiles; ++j) {
          const int k0 = j * bkv, cols = std::min(bkv, keys - k0);
          if (causal && k0 > q0 + rows - 1) break;
          const MatrixF s = scores(q_tiles_qk[std::size_t(i)], k_tiles_qk[std::size_t(j)], q0, k0);
          MatrixF p(rows, cols);
          std::vector<float> alpha(static_cast<std::size_t>(rows));
          for (int r = 0; r < rows; ++r) {
            const float m_new = std::max(m[std::size_t(r)], s.row(r).maxCoeff());
            alpha[std::size_t(r)] = m[std::size_t(r)] == kNegInf ? 0.0f : exp2_exact(steps::sub_rn(m[std::size_t(r)], m_new));
            float sum = 0;
            for (int c = 0; c < cols; ++c) sum = steps::add_rn(sum, p(r, c) = exp2_exact(steps::sub_rn(s(r, c), m_new)));
            l[std::size_t(r)] = steps::fma_rn(l[std::size_t(r)], alpha[std::size_t(r)], sum);
            m[std::size_t(r)] = m_new;
          }
          const MatrixF pv = product(make_tile(p, config.pv, true), make_tile(V.middleRows(k0, cols).transpose(), config.pv), f16);
          for (int r = 0; r < rows; ++r)
            for (int c = 0; c < dv; ++c) o(r, c) = steps::fma_rn(o(r, c), alpha[std::size_t(r)], pv(r, c));
        }
        for (int r = 0; r < rows; ++r) {
          const float inverse = steps::div_rn(1.0f, l[std::size_t(r)]);
          for (int c = 0; c < dv; ++c) O(q0 + r, c) = steps::mul_rn(o(r, c), inverse);
          L[std::size_t(q0 + r)] = steps::add_rn(m[std::size_t(r)], log2_exact(l[std::size_t(r)]));
        }
      }
      // D_i = rowsum(dO_i O_i).
      std::vector<float> D(static_cast<std::size_t>(N));
      for (int r = 0; r < N; ++r) {
        float sum = 0;
        for (int c = 0; c < dv; ++c) sum = steps::fma_rn(dO(r, c), O(r, c), sum);
        D[std::size_t(r)] = sum;
      }
      // Backward (Algorithm 3).
      MatrixF dQ = MatrixF::Zero(N, d);
      for (int j = 0; j < k_tiles; ++j) {
        const int k0 = j * bkv, cols = std::min(bkv, keys - k0);
        const MatrixF Kj = K.middleRows(k0, cols), Vj = V.middleRows(k0, cols);
        const Tile v_dp = make_tile(Vj, config.dp), k_dq = make_tile(Kj.transpose(), config.dq);
        for (int i = causal ? k0 / bq : 0; i < q_tiles; ++i) {
          const int q0 = i * bq, rows = std::min(bq, N - q0);
          if (causal && k0 > q0 + rows - 1) continue;
          const MatrixF s = scores(q_tiles_qk[std::size_t(i)], k_tiles_qk[std::size_t(j)], q0, k0);
          MatrixF p(rows, cols);
          for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) p(r, c) = exp2_exact(steps::sub_rn(s(r, c), L[std::size_t(q0 + r)]));
          const MatrixF dOi = dO.middleRows(q0, rows), Qi = Q.middleRows(q0, rows);
          const MatrixF dv_part = product(make_tile(p.transpose(), config.dv), make_tile(dOi.transpose(), config.dv), f16);
          const MatrixF dp = product(make_tile(dOi, config.dp), v_dp, f16);
          MatrixF ds(rows, cols);
          for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) ds(r, c) = steps::mul_rn(p(r, c), steps::sub_rn(dp(r, c), D[std::size_t(q0 + r)]));
          const MatrixF dq_part = product(make_tile(ds, config.dq), k_dq, f16);
          const MatrixF dk_part = product(make_tile(ds.transpose(), config.dk), make_tile(Qi.transpose(), config.dk), f16);
          for (int r = 0; r < rows; ++r)
            for (int c = 0; c < d; ++c) dQ(q0 + r, c) = steps::fma_rn(dq_part(r, c), inv_sqrt_d, dQ(q0 + r, c));
          for (int r = 0; r < cols; ++r) {
            for (int c = 0; c < d; ++c) dK(k0 + r, c) = steps::fma_rn(dk_part(r, c), inv_sqrt_d, dK(k0 + r, c));
            for (int c = 0; c < dv; ++c) dV(k0 + r, c) = steps::add_rn(dV(k0 + r, c), dv_part(r, c));
          }
        }
      }
      const std::size_t head = std::size_t(b) * std::size_t(q.heads) + std::size_t(h);
      std::copy(O.data(), O.data() + O.size(), out.output.begin() + std::ptrdiff_t(head * std::size_t(N) * std::size_t(dv)));
      for (int r = 0; r < N; ++r) out.lse[head * std::size_t(N) + std::size_t(r)] = L[std::size_t(r)] * steps::kLn2;
      std::copy(dQ.data(), dQ.data() + dQ.size(), out.dq.begin() + std::ptrdiff_t(q.offset(b, h, 0)));
    }
    std::copy(dK.data(), dK.data() + dK.size(), out.dk.begin() + std::ptrdiff_t(k.offset(b, g, 0)));
    std::copy(dV.data(), dV.data() + dV.size(), out.dv.begin() + std::ptrdiff_t(v.offset(b, g, 0)));
  });
  return out;
}

}  // namespace lowbit::attention
