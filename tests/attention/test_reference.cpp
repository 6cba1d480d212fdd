// The tiled float64 reference against the dense one, and the fp32 preset against the reference
// within the float32 error bound stated below.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "emulation/attention/pipeline.hpp"
#include "numerics/attention.hpp"
#include "numerics/attention_reference.hpp"

using namespace lowbit;

namespace {

Tensor4 random_tensor(int batch, int heads, int tokens, int dim, std::uint64_t seed, double bias) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Tensor4 t(batch, heads, tokens, dim);
  std::vector<double> channel(static_cast<std::size_t>(dim));
  for (double& c : channel) c = bias * normal(rng);
  for (std::size_t i = 0; i < t.size(); ++i) t.values[i] = float(_Float16(channel[i % std::size_t(dim)] + normal(rng)));
  return t;
}

// Dense float64 attention of one head (numerics/attention.hpp), masked top-left when causal.
MatrixD dense(const Tensor4& q, const Tensor4& k, const Tensor4& v, int b, int h, bool causal) {
  const int g = h / (q.heads / k.heads);
  MatrixD s = q.head(b, h).cast<double>() * k.head(b, g).cast<double>().transpose() / std::sqrt(double(q.dim));
  if (causal)
    for (int i = 0; i < s.rows(); ++i)
      for (int j = i + 1; j < s.cols(); ++j) s(i, j) = -std::numeric_limits<double>::infinity();
  return attention_from_scores(s, v.head(b, g).cast<double>());
}

}  // namespace

TEST_CASE("tiled float64 reference equals the dense one", "[attention][reference]") {
  // 300 queries (ragged 32-query tiles), 600 keys (ragged 256-key tiles), GQA 4 on 2.
  const Tensor4 q = random_tensor(2, 4, 300, 64, 1, 1.0), k = random_tensor(2, 2, 600, 64, 2, 3.0),
                v = random_tensor(2, 2, 600, 48, 3, 2.0);
  for (bool causal : {false, true}) {
    const ReferenceAttention r = reference_attention(q, k, v, {.causal = causal, .threads = 2});
    double worst = 0, lse_worst = 0;
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 4; ++h) {
        const MatrixD d = dense(q, k, v, b, h, causal);
        const std::size_t head = std::size_t(b * 4 + h);
        for (int i = 0; i < 300; ++i)
          for (int c = 0; c < 48; ++c)
            worst = std::max(worst, std::fabs(r.output[(head * 300 + std::size_t(i)) * 48 + std::size_t(c)] - d(i, c)));
        // LSE: log sum exp of the scores, from scratch.
        for (int i = 0; i < 300; i += 37) {
          const int keys = causal ? i + 1 : 600;
          std::vector<double> s;
          for (int j = 0; j < keys; ++j) {
            double dot = 0;
            for (int c = 0; c < 64; ++c) dot += double(q.row(b, h, i)[c]) * k.row(b, h / 2, j)[c];
            s.push_back(dot / 8.0);
          }
          const double m = *std::max_element(s.begin(), s.end());
          double sum = 0;
          for (double x : s) sum += std::exp(x - m);
          lse_worst = std::max(lse_worst, std::fabs(r.lse[head * 300 + std::size_t(i)] - (m + std::log(sum))));
        }
      }
    CHECK(worst < 1e-12);
    CHECK(lse_worst < 1e-12);
  }
  CHECK_THROWS_WITH(reference_attention(q, random_tensor(2, 3, 600, 64, 4, 1.0), v), Catch::Contains("shapes do not fit"));
}

// The fp32 preset's error bound. Per query row i with N_i visible keys in B_i KV blocks, u = 2^-24,
// and delta_i = max_j c (gamma_d A_ij + 2.01 u |q_i . k_j|) the scores' error in log2 units
// (c = log2(e) / sqrt(d), A_ij = sum_c |q_ic k_jc|, gamma_d = d u / (1 - d u): the fma chain):
//   |out_ic - ref_ic| <= max_j |v_jc| * E_i + 1e-12 max_j |v_jc|,
//   E_i = (2^(2 delta_i) - 1) + 1.01 u (1.75 N_i + 2 B_i + log2(block_kv) + 8)
// (scores: weights within 2^(+-delta_i) of the exact ones; per key, the rounded subtraction
// before exp2 and exp2's rounding: u/e + u/2 against a row maximum of 1; the fma chains of o
// over the keys and of l over the blocks and lanes, and the normalization; alpha's errors
// multiply o and l alike and cancel; the last term is the reference's own error).
TEST_CASE("fp32 preset: within the float32 bound of the float64 reference", "[attention][reference][fp32]") {
  const attention::Pipeline p = attention::preset("fp32", 64);
  const double u = 0x1p-24;
  for (bool causal : {false, true}) {
    const Tensor4 q = random_tensor(1, 2, 333, 64, 7, 1.0), k = random_tensor(1, 1, 333, 64, 8, 3.0),
                  v = random_tensor(1, 1, 333, 64, 9, 2.0);
    const attention::ForwardResult r = attention::forward(p, q, k, v, {.causal = causal});
    const ReferenceAttention ref = reference_attention(q, k, v, {.causal = causal});
    const double c = std::log2(std::exp(1.0)) / 8.0, gamma = 64 * u / (1 - 64 * u);
    std::size_t outside = 0;
    double worst_ratio = 0;
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 333; ++i) {
        const int keys = causal ? i + 1 : 333;
        const int last_row = std::min(333, (i / p.tiling.block_q + 1) * p.tiling.block_q) - 1;
        const int blocks = ((causal ? last_row + 1 : 333) + p.tiling.block_kv - 1) / p.tiling.block_kv;
        double delta = 0;
        std::vector<double> vmax(64, 0.0);
        for (int j = 0; j < keys; ++j) {
          double a = 0, dot = 0;
          for (int ch = 0; ch < 64; ++ch) {
            const double x = double(q.row(0, h, i)[ch]) * k.row(0, 0, j)[ch];
            a += std::fabs(x);
            dot += x;
            vmax[std::size_t(ch)] = std::max(vmax[std::size_t(ch)], double(std::fabs(v.row(0, 0, j)[ch])));
          }
          delta = std::max(delta, c * (gamma * a + 2.01 * u * std::fabs(dot)));
        }
        const double e = (std::exp2(2 * delta) - 1) + 1.01 * u * (1.75 * keys + 2 * blocks + std::log2(p.tiling.block_kv) + 8);
        for (int ch = 0; ch < 64; ++ch) {
          const std::size_t at = (std::size_t(h) * 333 + std::size_t(i)) * 64 + std::size_t(ch);
          const double error = std::fabs(double(r.output[at]) - ref.output[at]);
          const double bound = vmax[std::size_t(ch)] * (e + 1e-12);
          outside += error > bound;
          worst_ratio = std::max(worst_ratio, error / bound);
        }
      }
    INFO("largest error / bound: " << worst_ratio);
    CHECK(outside == 0);
    // The output is fp32 (nothing rounded further), and the error is not zero: the bound is tested.
    CHECK(worst_ratio > 0);
  }
}
