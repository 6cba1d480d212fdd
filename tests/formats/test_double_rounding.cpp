// float64 inputs are rounded once, directly: never float64 -> float32 -> format.
//
// The inputs are the doubles near each boundary of the format that float32 cannot tell from the
// boundary: a value or midpoint v of the format, plus or minus v * 2^-30 (far below float32's
// half ulp, so float(x) == v). Rounding those through float32 first gives a different code in
// every mode (ties resolved the wrong way, directed roundings landing on v); the test counts
// how often, to show the inputs matter, and requires encode(double) to equal the reference.
#include <catch2/catch.hpp>

#include <cmath>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "tests/formats/format_reference.hpp"

using namespace lowbit;

TEST_CASE("encode(double) rounds once, where rounding through float32 would differ", "[convert][double-rounding]") {
  constexpr Rounding kModes[]{Rounding::nearest_even, Rounding::nearest_away, Rounding::toward_zero,
                              Rounding::toward_positive, Rounding::toward_negative, Rounding::odd};
  for (const char* spec : {"e4m3", "e5m2", "e2m1", "e2m3", "e3m2", "bf16", "fp16", "ue8m0", "e3m4", "e4m3fnuz",
                           "p3109:k=8:p=3", "int8", "int16", "e4m3:bias=8:no-subnormals"}) {
    const Format f = format_from_string(spec);
    const lowbit::testing::ReferenceFormat reference(f);
    std::vector<double> line = reference.values();
    if (!f.is_integer()) line.push_back(reference.beyond());
    std::vector<double> xs;
    for (std::size_t i = 0; i + 1 < line.size(); ++i)
      for (double v : {line[i], (line[i] + line[i + 1]) / 2})
        if (v != 0 && float(v) == v)
          for (double offset : {std::ldexp(v, -30), -std::ldexp(v, -30)}) xs.push_back(v + offset);
    for (Rounding mode : kModes) {
      const ConversionOptions options{.rounding = mode, .overflow = Overflow::saturate};
      int mismatches = 0, through_float_differs = 0;
      for (double x : xs) {
        REQUIRE(double(float(x)) != x);  // float32 cannot hold x ...
        const Code expected = reference.expected(x, mode, Overflow::saturate).code;
        const Code direct = encode(f, x, options);
        const Code through_float = encode(f, double(float(x)), options);
        through_float_differs += through_float != expected;
        if (direct != expected && ++mismatches <= 4)
          UNSCOPED_INFO(fmt::format("{}: got {:#x}, expected {:#x}", lowbit::testing::describe(f, x, options), direct,
                                    expected));
      }
      fmt::print("{:<28} {:<16} {:>7} inputs: direct mismatches {}, through float32 {} differ\n", spec, to_string(mode),
                 xs.size(), mismatches, through_float_differs);
      CHECK(mismatches == 0);
      CHECK(through_float_differs > 0);  // ... and the inputs do tell direct and double rounding apart
    }
  }
}
