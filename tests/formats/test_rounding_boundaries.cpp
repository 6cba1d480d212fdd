// Both neighbours of every rounding boundary, every mode, every overflow policy, every format of
// at most 16 bits: encode against the independent value-list reference (format_reference.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "tests/formats/format_reference.hpp"

using namespace lowbit;
using lowbit::testing::ReferenceFormat;

namespace {

constexpr Overflow kOverflows[]{Overflow::saturate, Overflow::inf, Overflow::nan};

void add_with_neighbours(std::vector<double>& points, double x, int steps) {
  points.push_back(x);
  double up = x, down = x;
  for (int i = 0; i < steps; ++i) {
    up = std::nextafter(up, INFINITY);
    down = std::nextafter(down, -INFINITY);
    points.push_back(up);
    points.push_back(down);
  }
}

// Every value, every midpoint between neighbours (beyond max finite included), the doubles either
// side of each, two interior points per gap, the underflow and overflow regions and the specials;
// with both signs.
std::vector<double> boundary_points(const ReferenceFormat& r) {
  const std::vector<double> line = r.extended_values();
  const double max = r.values().back();
  std::vector<double> points;
  for (std::size_t i = 0; i + 1 < line.size(); ++i) {
    const double a = line[i], b = line[i + 1];
    const double midpoint = (a + b) / 2;
    REQUIRE(midpoint - a == b - midpoint);  // the midpoint is exact
    add_with_neighbours(points, a, 1);
    add_with_neighbours(points, midpoint, 1);
    points.push_back(a + (b - a) / 4);
    points.push_back(a + 3 * (b - a) / 4);
  }
  add_with_neighbours(points, line.back(), 1);
  const double smallest_positive = *std::upper_bound(r.values().begin(), r.values().end(), 0.0);
  for (double special : {DBL_TRUE_MIN, DBL_MIN, DBL_MAX, 2 * max, 1e30, std::ldexp(smallest_positive, -1),
                         std::ldexp(smallest_positive, -2), double(INFINITY), double(NAN)})
    points.push_back(special);
  // The line holds the negative values of signed formats; unsigned ones take -x as well, and
  // every format the underflow region below its smallest positive value, overflow and NaN.
  const std::size_t n = points.size();
  for (std::size_t i = 0; i < n; ++i)
    if (!r.format().is_signed || points[i] >= max || std::isnan(points[i]) || std::fabs(points[i]) < smallest_positive)
      points.push_back(-points[i]);
  // Both zeros explicitly (-0 is +0 where the negative-zero code is NaN).
  points.push_back(0.0);
  points.push_back(-0.0);
  return points;
}

struct Tally {
  std::size_t checked = 0, mismatches = 0;
  std::vector<std::string> first;
  // `what` runs only for a mismatch.
  template <typename Describe>
  void record(bool ok, Describe what) {
    ++checked;
    if (ok) return;
    if (first.size() < 12) first.push_back(what());
    ++mismatches;
  }
};

}  // namespace

TEST_CASE("encode equals the value-list reference at both neighbours of every boundary", "[convert][boundary]") {
  std::size_t total_checked = 0;
  for (const auto& spec : lowbit::testing::small_format_specs()) {
    const Format f = format_from_string(spec);
    const ReferenceFormat reference(f);
    const auto points = boundary_points(reference);
    Tally tally;
    for (Rounding rounding : lowbit::testing::kAllRoundings)
      for (Overflow overflow : kOverflows) {
        ConversionOptions options{.rounding = rounding, .overflow = overflow, .random_bits = 32, .seed = 7};
        if (options.validate(f)) continue;  // policy not available for this format
        for (double x : points) {
          const auto expected = reference.expected(x, rounding, overflow);
          if (rounding != Rounding::stochastic) {
            const Code got = encode(f, x, options);
            tally.record(got == expected.code, [&] {
              return fmt::format("{}: got {:#x}, expected {:#x}", lowbit::testing::describe(f, x, options), got,
                                 expected.code);
            });
            continue;
          }
          for (std::uint64_t index = 0; index < 4; ++index) {
            const Code got = encode(f, x, options, index);
            tally.record(got == expected.code || got == expected.away_code, [&] {
              return fmt::format("{} index {}: got {:#x}, expected {:#x} or {:#x}",
                                 lowbit::testing::describe(f, x, options), index, got, expected.code, expected.away_code);
            });
          }
        }
      }
    fmt::print("{:<28} {:>6} values {:>8} points {:>10} checks {} mismatches\n", spec, reference.values().size(),
               points.size(), tally.checked, tally.mismatches);
    INFO(fmt::format("{}: first mismatches:\n{}", spec, fmt::join(tally.first, "\n")));
    CHECK(tally.mismatches == 0);
    total_checked += tally.checked;
  }
  CHECK(total_checked > 10'000'000);
}
