// The tiled float64 attention gradients against a dense float64 implementation written from the
// textbook formulas (D_i = sum_j p_ij dP_ij there, not dO . O), and the dense gradients against
// central finite differences of the dense forward pass.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "numerics/attention_backward_reference.hpp"

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

MatrixD softmax_rows(const MatrixD& s) {
  MatrixD p(s.rows(), s.cols());
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    const double m = s.row(i).maxCoeff();
    for (Eigen::Index j = 0; j < s.cols(); ++j) p(i, j) = std::exp(s(i, j) - m);
    p.row(i) /= p.row(i).sum();
  }
  return p;
}

MatrixD scores(const MatrixD& q, const MatrixD& k, bool causal) {
  MatrixD s = q * k.transpose() / std::sqrt(double(q.cols()));
  if (causal)
    for (Eigen::Index i = 0; i < s.rows(); ++i)
      for (Eigen::Index j = i + 1; j < s.cols(); ++j) s(i, j) = -std::numeric_limits<double>::infinity();
  return s;
}

struct Dense {
  MatrixD dq, dk, dv;
};

Dense dense_backward(const MatrixD& q, const MatrixD& k, const MatrixD& v, const MatrixD& d_out, bool causal) {
  const MatrixD p = softmax_rows(scores(q, k, causal));
  const MatrixD dp = d_out * v.transpose();
  MatrixD ds = p.cwiseProduct(dp);
  const Eigen::VectorXd delta = ds.rowwise().sum();
  ds = p.cwiseProduct(dp.colwise() - delta);
  const double scale = 1.0 / std::sqrt(double(q.cols()));
  return {ds * k * scale, ds.transpose() * q * scale, p.transpose() * d_out};
}

double loss(const MatrixD& q, const MatrixD& k, const MatrixD& v, const MatrixD& d_out, bool causal) {
  return (softmax_rows(scores(q, k, causal)) * v).cwiseProduct(d_out).sum();
}

double max_abs_difference(const std::vector<double>& tiled, std::size_t offset, const MatrixD& dense) {
  double worst = 0;
  for (Eigen::Index i = 0; i < dense.rows(); ++i)
    for (Eigen::Index c = 0; c < dense.cols(); ++c)
      worst = std::max(worst, std::fabs(tiled[offset + std::size_t(i * dense.cols() + c)] - dense(i, c)));
  return worst;
}

}  // namespace

TEST_CASE("tiled float64 gradients equal the dense ones", "[attention][reference][backward]") {
  // 150 queries and keys (ragged 64-tiles), GQA 4 on 2, value dim 48, causal and not.
  const int N = 150, d = 32, dv = 48;
  const Tensor4 q = random_tensor(1, 4, N, d, 1, 0.5), k = random_tensor(1, 2, N, d, 2, 2.0),
                v = random_tensor(1, 2, N, dv, 3, 1.0), d_out = random_tensor(1, 4, N, dv, 4, 0.0);
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const ReferenceGradients g = reference_attention_backward(q, k, v, d_out, {.causal = causal, .threads = 2});
    double worst = 0, scale = 0;
    std::vector<MatrixD> dk(2, MatrixD::Zero(N, d)), dvs(2, MatrixD::Zero(N, dv));
    for (int h = 0; h < 4; ++h) {
      const Dense r = dense_backward(q.head(0, h).cast<double>(), k.head(0, h / 2).cast<double>(),
                                     v.head(0, h / 2).cast<double>(), d_out.head(0, h).cast<double>(), causal);
      worst = std::max(worst, max_abs_difference(g.dq, q.offset(0, h, 0), r.dq));
      scale = std::max(scale, r.dq.cwiseAbs().maxCoeff());
      dk[std::size_t(h / 2)] += r.dk;
      dvs[std::size_t(h / 2)] += r.dv;
    }
    for (int g2 = 0; g2 < 2; ++g2) {
      worst = std::max(worst, max_abs_difference(g.dk, k.offset(0, g2, 0), dk[std::size_t(g2)]));
      worst = std::max(worst, max_abs_difference(g.dv, v.offset(0, g2, 0), dvs[std::size_t(g2)]));
    }
    CHECK(scale > 0.01);
    CHECK(worst < 1e-12 * std::max(1.0, scale));
  }
}

TEST_CASE("the dense gradients are the derivatives of sum(dO * O)", "[attention][reference][backward]") {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  const int N = 12, d = 8;
  MatrixD q(N, d), k(N, d), v(N, d), d_out(N, d);
  for (MatrixD* m : {&q, &k, &v, &d_out})
    for (Eigen::Index i = 0; i < m->size(); ++i) m->data()[i] = normal(rng);
  for (bool causal : {false, true}) {
    const Dense g = dense_backward(q, k, v, d_out, causal);
    const double h = 1e-5;
    double worst = 0;
    for (auto [x, grad] : {std::pair{&q, &g.dq}, std::pair{&k, &g.dk}, std::pair{&v, &g.dv}})
      for (Eigen::Index i = 0; i < x->size(); i += 5) {
        const double keep = x->data()[i];
        x->data()[i] = keep + h;
        const double up = loss(q, k, v, d_out, causal);
        x->data()[i] = keep - h;
        const double down = loss(q, k, v, d_out, causal);
        x->data()[i] = keep;
        worst = std::max(worst, std::fabs((up - down) / (2 * h) - grad->data()[i]));
      }
    CHECK(worst < 1e-8);
  }
}

TEST_CASE("gradients: a dO that does not fit is named", "[attention][reference][backward]") {
  const Tensor4 q = random_tensor(1, 2, 10, 8, 1, 0), k = random_tensor(1, 1, 10, 8, 2, 0),
                v = random_tensor(1, 1, 10, 6, 3, 0), d_out = random_tensor(1, 2, 10, 8, 4, 0);
  CHECK_THROWS_WITH(reference_attention_backward(q, k, v, d_out), Catch::Contains("dO [1, 2, 10, 8] does not fit"));
}
