// Shapley values and one-at-a-time attributions on games whose answers are known, and the
// per-element error distribution on errors whose quantiles are known.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "numerics/attribution.hpp"
#include "numerics/error_distribution.hpp"

using namespace lowbit;

TEST_CASE("Shapley values of known games", "[attribution]") {
  SECTION("additive: each factor gets its own contribution") {
    const double c[3] = {1.0, 2.5, -0.5};
    std::vector<double> v(8);
    for (std::size_t s = 0; s < 8; ++s)
      for (int i = 0; i < 3; ++i) v[s] += (s >> i & 1) ? c[i] : 0.0;
    const Attribution a = attribute(v);
    for (int i = 0; i < 3; ++i) {
      CHECK(a.shapley[std::size_t(i)] == Approx(c[i]));
      CHECK(a.added[std::size_t(i)] == Approx(c[i]));
      CHECK(a.removed[std::size_t(i)] == Approx(c[i]));
    }
  }
  SECTION("unanimity: only all factors together matter, so they share equally") {
    std::vector<double> v(16, 0.0);
    v[15] = 1.0;
    const Attribution a = attribute(v);
    for (int i = 0; i < 4; ++i) {
      CHECK(a.shapley[std::size_t(i)] == Approx(0.25));
      CHECK(a.added[std::size_t(i)] == 0.0);
      CHECK(a.removed[std::size_t(i)] == 1.0);
    }
  }
  SECTION("a dummy factor gets 0; the values sum to v(all) - v(none)") {
    // v(S) = max of the present factors' weights, factor 2 weighs 0 and never changes v.
    const double w[4] = {3.0, 1.0, 0.0, 2.0};
    std::vector<double> v(16);
    for (std::size_t s = 0; s < 16; ++s)
      for (int i = 0; i < 4; ++i)
        if (s >> i & 1) v[s] = std::max(v[s], w[i]);
    const Attribution a = attribute(v);
    CHECK(a.shapley[2] == Approx(0.0).margin(1e-15));
    CHECK(std::accumulate(a.shapley.begin(), a.shapley.end(), 0.0) == Approx(v[15] - v[0]));
    // Factor 0 (weight 3) over the 6 orders of {0, 1, 3}: first in 2 orders (adds 3 each), after
    // factor 1 alone (adds 2), after factor 3 alone (adds 1), last in 2 orders (adds 1 each): 11/6.
    CHECK(a.shapley[0] == Approx(11.0 / 6));
  }
  CHECK_THROWS_WITH(attribute(std::vector<double>(6)), Catch::Contains("not 2^n"));
}

TEST_CASE("per-element error distribution", "[error-distribution]") {
  // Errors 1, 2, ..., 1000 (times 1e-3): the quantiles by nearest rank.
  std::vector<double> r(1000), a(1000);
  for (int i = 0; i < 1000; ++i) {
    r[std::size_t(i)] = 5.0;
    a[std::size_t(i)] = 5.0 + (i % 2 ? 1 : -1) * 1e-3 * (i + 1);
  }
  const ErrorDistribution d = error_distribution(r, a);
  CHECK(d.quantiles.p50 == Approx(0.500));
  CHECK(d.quantiles.p90 == Approx(0.900));
  CHECK(d.quantiles.p99 == Approx(0.990));
  CHECK(d.quantiles.p999 == Approx(0.999));
  CHECK(d.quantiles.max == Approx(1.000));
  CHECK(d.histogram.total() == 1000);
  // log10(0.05) = -1.30: the bin [-1.4, -1.3), index (12 - 1.4) * 10 = 106.
  ErrorHistogram one;
  one.add(0.05);
  CHECK(ErrorHistogram::bin_low(106) == Approx(-1.4));
  CHECK(one.counts[106] == 1);
  CHECK(one.total() == 1);
  ErrorHistogram h;
  h.add(0.0);
  h.add(1e-13);
  h.add(1e5);
  h.add(std::nan(""));
  CHECK(h.below == 2);
  CHECK(h.above == 2);
  h.merge(d.histogram);
  CHECK(h.total() == 1004);
}
