#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "numerics/attention.hpp"
#include "numerics/metrics.hpp"

using namespace lowbit;

TEST_CASE("cosine, relative L1 and RMSE on a hand-worked example", "[metrics]") {
  const std::vector<double> r{1, 2, 3, 4}, a{1, 2, 3, 5};
  const ErrorMetrics m = compare(r, a);
  CHECK(m.cosine == Approx(34.0 / std::sqrt(30.0 * 39.0)).epsilon(1e-15));
  CHECK(m.relative_l1 == Approx(0.1).epsilon(1e-15));
  CHECK(m.rmse == Approx(0.5).epsilon(1e-15));
  CHECK(m.max_abs == 1.0);
  CHECK(compare(r, r).cosine == Approx(1.0).epsilon(1e-15));
  CHECK_THROWS_WITH(compare(r, std::vector<double>{1, 2}), Catch::Contains("4 values"));
}

TEST_CASE("ULP distance counts floats between", "[metrics]") {
  CHECK(ulp_distance(1.0f, 1.0f) == 0);
  CHECK(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)) == 1);
  CHECK(ulp_distance(0.0f, -0.0f) == 0);
  CHECK(ulp_distance(-std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::denorm_min()) == 2);
  CHECK(ulp_distance(1.0f, std::nanf("")) == std::numeric_limits<std::uint64_t>::max());
}

TEST_CASE("reference attention: uniform scores average V, rows of softmax sum to one", "[metrics]") {
  MatrixD q = MatrixD::Zero(3, 4), k = MatrixD::Random(5, 4), v = MatrixD::Random(5, 2);
  const MatrixD o = attention_reference(q, k, v);
  for (int r = 0; r < 3; ++r) CHECK((o.row(r) - v.colwise().mean()).cwiseAbs().maxCoeff() < 1e-15);
  const MatrixD p = softmax_rows(MatrixD::Random(4, 7) * 50);
  for (int r = 0; r < 4; ++r) CHECK(p.row(r).sum() == Approx(1.0).epsilon(1e-15));
}
