// Smoothing identities in exact rational arithmetic (boost::multiprecision::cpp_rational), with
// block sizes that do not divide the row count (a ragged last block) and means that are not
// dyadic; and the baselines' invariants.
#include <catch2/catch.hpp>

#include <random>

#include <boost/multiprecision/cpp_int.hpp>
#include <boost/multiprecision/eigen.hpp>  // Eigen::NumTraits for Boost.Multiprecision numbers

#include "emulation/quant/rotation.hpp"
#include "emulation/quant/smoothing.hpp"

// Boost 1.74's cpp_int asks whether a type is a byte container (for its constructor from one)
// in a way that is a hard error for Eigen expressions, and Eigen's scalar-times-matrix operator
// asks whether an expression converts to the scalar: Eigen expressions are not byte containers.
namespace boost::multiprecision::detail {
template <class C>
  requires requires { C::RowsAtCompileTime; }
struct is_byte_container<C> : std::false_type {};
}  // namespace boost::multiprecision::detail

using namespace lowbit;
using namespace lowbit::quant;
using Rational = boost::multiprecision::cpp_rational;
using MatrixR = Matrix<Rational>;

namespace {

// Small integers with a large channel bias.
MatrixR integer_tensor(int rows, int cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  MatrixR x(rows, cols);
  for (int c = 0; c < cols; ++c) {
    const int bias = int(rng() % 41) - 20;
    for (int r = 0; r < rows; ++r) x(r, c) = Rational(bias + int(rng() % 19) - 9);
  }
  return x;
}

bool row_constant(const MatrixR& m) {
  for (int r = 0; r < m.rows(); ++r)
    for (int c = 1; c < m.cols(); ++c)
      if (m(r, c) != m(r, 0)) return false;
  return true;
}

}  // namespace

TEST_CASE("smoothing Q and K plus the corrections reproduces Q K^T exactly", "[smoothing][exact]") {
  // 18 rows: blocks of 4, 5 and 7 leave a ragged last block (2, 3, 4 rows), and their means
  // are thirds, fifths and sevenths.
  const MatrixR q = integer_tensor(18, 6, 1), k = integer_tensor(18, 6, 2);
  const MatrixR exact = q * k.transpose();
  int checked = 0;
  for (int q_block : {0, 3, 4, 5, 7, 18})
    for (int k_block : {0, 4, 7})
      for (bool smooth_q : {false, true})
        for (bool smooth_k : {false, true}) {
          INFO("q_block=" << q_block << " k_block=" << k_block << " smooth_q=" << smooth_q << " smooth_k=" << smooth_k);
          const auto sq = smooth(q, q_block, smooth_q), sk = smooth(k, k_block, smooth_k);
          const MatrixR product = sq.residual * sk.residual.transpose();
          CHECK(correct_scores(product, sq, sk, ScoreCorrection::full) == exact);
          if (k_block == 0 || !smooth_k) {
            // Softmax drops B = Q kbar^T: what is left differs from Q K^T by a constant per row.
            CHECK(row_constant(exact - correct_scores(product, sq, sk, ScoreCorrection::softmax)));
          } else {
            CHECK_THROWS_WITH(correct_scores(product, sq, sk, ScoreCorrection::softmax),
                              Catch::Contains("softmax does not remove it"));
          }
          ++checked;
        }
  CHECK(checked == 72);
}

TEST_CASE("the smoothed residual has zero channel mean in every block, the ragged last one too", "[smoothing][exact]") {
  const MatrixR x = integer_tensor(10, 4, 3);
  for (int block : {3, 4}) {  // 3, 3, 3, 1 rows; 4, 4, 2 rows
    const auto s = smooth(x, block);
    const int blocks = (10 + block - 1) / block;
    REQUIRE(s.means.rows() == blocks);
    for (int b = 0; b < blocks; ++b)
      for (int c = 0; c < 4; ++c) {
        Rational sum = 0, sum_x = 0;
        const int first = block * b, last = std::min(10, first + block);
        for (int r = first; r < last; ++r) sum += s.residual(r, c), sum_x += x(r, c);
        CHECK(sum == 0);
        CHECK(s.means(b, c) == sum_x / (last - first));
      }
  }
  // A mean of 3 integers is a third: float64 could not hold it, the rational does.
  MatrixR thirds(3, 1);
  thirds << 2, 1, 1;
  CHECK(smooth(thirds, 3).means(0, 0) == Rational(4, 3));
}

TEST_CASE("smoothing V: P gamma(V) + vbar reproduces P V when rows of P sum to one", "[smoothing][exact]") {
  const MatrixR v = integer_tensor(9, 5, 4);
  MatrixR p(6, 9);
  for (int r = 0; r < p.rows(); ++r) {  // positive weights normalised to sum one: sevenths, ninths, ...
    for (int c = 0; c < 9; ++c) p(r, c) = Rational(1 + (r + 2 * c) % 5);
    const Rational sum = p.row(r).sum();
    p.row(r) /= sum;
  }
  const auto sv = smooth(v, 0);
  REQUIRE(sv.means(0, 0) == v.col(0).sum() / 9);
  const MatrixR ones = MatrixR::Ones(6, 1);
  CHECK(correct_output(MatrixR(p * sv.residual), sv, ones) == p * v);
}

TEST_CASE("linear attention: full corrections reproduce ((Q K^T) .* D) V exactly", "[smoothing][exact]") {
  // Chunkwise linear attention, no softmax: a causal decay mask D = (2/3)^(i-j), per-block means
  // for both Q and K (as the proposal has them; blocks of 5 and 3 over 16 rows, ragged), and V
  // smoothed.
  const int n = 16;
  const MatrixR q = integer_tensor(n, 4, 6), k = integer_tensor(n, 4, 7), v = integer_tensor(n, 3, 8);
  MatrixR d = MatrixR::Zero(n, n);
  for (int i = 0; i < n; ++i) d(i, i) = 1;
  for (int i = 1; i < n; ++i)
    for (int j = 0; j < i; ++j) d(i, j) = d(i - 1, j) * 2 / 3;
  const MatrixR exact = (q * k.transpose()).cwiseProduct(d) * v;
  const auto sq = smooth(q, 5), sk = smooth(k, 3), sv = smooth(v, 0);
  const MatrixR s = correct_scores(MatrixR(sq.residual * sk.residual.transpose()), sq, sk, ScoreCorrection::full);
  const MatrixR weights = s.cwiseProduct(d);
  CHECK(correct_output(MatrixR(weights * sv.residual), sv, MatrixR(weights.rowwise().sum())) == exact);
  // Without the row bias B the result is wrong: the term does not vanish without softmax.
  MatrixR partial = sq.residual * sk.residual.transpose();
  const MatrixR ds = score_correction(sq, sk);
  for (int r = 0; r < n; ++r) partial.row(r) += ds.row(sq.block_of(r));
  CHECK(partial.cwiseProduct(d) * v != exact);
}

TEST_CASE("random Hadamard rotation is orthogonal and seedable", "[rotation]") {
  for (int d : {1, 2, 8, 64, 128}) {
    const RandomHadamard h(d, 42);
    const MatrixD m = h.matrix();
    CHECK((m * m.transpose() - MatrixD::Identity(d, d)).cwiseAbs().maxCoeff() < 1e-14);
    // Unnormalised, every entry is +-1 and Hadamard * Hadamard^T = d I exactly.
    const MatrixD unnormalised = m * std::sqrt(double(d));
    CHECK((unnormalised.cwiseAbs().array() - 1.0).abs().maxCoeff() < 1e-14);
  }
  const RandomHadamard a(64, 1), b(64, 1), c(64, 2);
  CHECK(a.matrix() == b.matrix());
  CHECK(a.matrix() != c.matrix());
  CHECK_THROWS_WITH(RandomHadamard(96, 1), Catch::Contains("not a power of two"));
}

TEST_CASE("rotating Q and K keeps Q K^T (to float rounding), and apply() is x H", "[rotation]") {
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal;
  MatrixF q(32, 64), k(40, 64);
  for (int i = 0; i < q.size(); ++i) q.data()[i] = normal(rng) + (i % 64 == 5 ? 20.0f : 0.0f);
  for (int i = 0; i < k.size(); ++i) k.data()[i] = normal(rng);
  const RandomHadamard h(64, 3);
  const MatrixD expect = q.cast<double>() * h.matrix();
  CHECK((h.apply(q).cast<double>() - expect).cwiseAbs().maxCoeff() < 1e-5 * expect.cwiseAbs().maxCoeff());
  const MatrixD before = q.cast<double>() * k.cast<double>().transpose();
  const MatrixD after = h.apply(q).cast<double>() * h.apply(k).cast<double>().transpose();
  CHECK((after - before).cwiseAbs().maxCoeff() < 1e-5 * before.cwiseAbs().maxCoeff());
  // The outlier channel is spread over all channels.
  CHECK(h.apply(q).cwiseAbs().maxCoeff() < 0.5f * q.cwiseAbs().maxCoeff());
}

TEST_CASE("SmoothAttn migration: factor sqrt(max|Q_c| / max|K_c|) keeps Q K^T", "[rotation]") {
  MatrixF q(2, 2), k(2, 2);
  q << 4, 1,  //
      -2, 0.5;
  k << 1, 2,  //
      0.5, -8;
  const MigratedQk m = smooth_attn(q, k, 0.5);
  CHECK(m.factor[0] == 2.0);                      // sqrt(4) / sqrt(1)
  CHECK(m.factor[1] == std::sqrt(1.0) / std::sqrt(8.0));
  CHECK(m.q(0, 0) == 2.0f);
  CHECK(m.k(1, 0) == 1.0f);
  const MatrixD before = q.cast<double>() * k.cast<double>().transpose();
  const MatrixD after = m.q.cast<double>() * m.k.cast<double>().transpose();
  CHECK((after - before).cwiseAbs().maxCoeff() < 1e-6);
  // After migration both channels have max|Q_c| = max|K_c| (alpha = 0.5).
  CHECK(m.q.col(1).cwiseAbs().maxCoeff() == Approx(m.k.col(1).cwiseAbs().maxCoeff()));
  CHECK_THROWS_WITH(smooth_attn(q, k, 0.0), Catch::Contains("alpha"));
}
